"""An HTML mail as text, without what a mail client would not show.

A mail can carry text the person never sees and the model would read:
an instruction in a `display:none` block, white on white, in a zero-size
font. So before the HTML becomes text (inscriptis keeps tables and lists
legible), every element a client would hide is taken out, and the text
says how many were:

- hidden by its own style or by a rule of the mail's `<style>` sheets
  (matched with cssselect; `@media` blocks count as applying):
  `display:none`, `visibility:hidden|collapse`, `opacity` near 0, a font
  size under 3 px (or 0 in any unit), text coloured like its background
  (its own or the nearest one above it; white when none is set), or
  `transparent`, placed far off-screen (`left`/`top`/`text-indent`/
  `margin-left` under -500 px), squeezed to nothing (`height`/`width`/
  `max-height`/`max-width` 0 with `overflow:hidden`), clipped away
  (`clip: rect(0…)`, `clip-path: inset(50%)`), `transform: scale(0)`;
- `<template>`, elements with the `hidden` attribute, and
  `aria-hidden="true"` elements whose text is tiny (a font size under
  6 px) or hidden as above;
- `<font color>` like the `bgcolor` around it.

A style that cannot be read hides nothing (the text is shown); the HTML
read is cut at `MAX_HTML_CHARS`; a sheet with more rules that can hide
than `MAX_RULES` (or `MAX_COMPLEX_RULES` with combinators) leaves the
whole text out, saying why, since what it hides cannot be checked.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

MAX_HTML_CHARS = 2_000_000
MAX_RULES = 2000  # style rules that can hide, matched at most
MAX_COMPLEX_RULES = 100  # of those, the ones with combinators (each a search of the page)
OFF_SCREEN_PX = -500.0
TINY_PX = 3.0
_DECLARATION = re.compile(r"([a-zA-Z-]+)\s*:\s*([^;]+)")
_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_NUMBER = re.compile(r"^(-?[0-9]*\.?[0-9]+)\s*([a-z%]*)")
_ALWAYS_HIDDEN = frozenset({"template"})
_NAMED = {
    "white": (255, 255, 255), "black": (0, 0, 0), "red": (255, 0, 0), "green": (0, 128, 0),
    "blue": (0, 0, 255), "yellow": (255, 255, 0), "gray": (128, 128, 128),
    "grey": (128, 128, 128), "silver": (192, 192, 192), "whitesmoke": (245, 245, 245),
    "snow": (255, 250, 250), "ivory": (255, 255, 240), "ghostwhite": (248, 248, 255),
    "navy": (0, 0, 128), "maroon": (128, 0, 0), "purple": (128, 0, 128),
    "orange": (255, 165, 0), "lightgray": (211, 211, 211), "lightgrey": (211, 211, 211),
}
WHITE = (255, 255, 255)
BLACK = (0, 0, 0)


def html_to_text(html: str) -> str:
    """HTML as readable text, with what a mail client hides left out (and counted)."""
    if len(html) > MAX_HTML_CHARS:
        html = html[:MAX_HTML_CHARS]
    try:
        import lxml.html  # with inscriptis, MBs an idle agent does not need
        from inscriptis import Inscriptis

        tree = lxml.html.document_fromstring(html)
        try:
            hidden = _drop_hidden(tree)
        except SheetTooLarge:
            return (f"[this mail's style sheet has more than {MAX_RULES} rules that could hide "
                    f"text (or more than {MAX_COMPLEX_RULES} complex ones), too many to check "
                    "what its reader would see: its text is left out]")
        text = Inscriptis(tree).get_text()
    except Exception:  # a page lxml cannot build: the tags stripped crudely, hiding nothing
        log.debug("HTML mail not parsed", exc_info=True)
        return re.sub(r"<[^>]+>", " ", html)
    if hidden:
        noun = "passage" if hidden == 1 else "passages"
        text += (f"\n\n[{hidden} {noun} of this mail are styled to be invisible to its "
                 "reader (hidden, zero-size, off-screen or coloured like the background) "
                 "and were left out]")
    return text


# -- styles -------------------------------------------------------------------------


def declarations(text: str) -> dict[str, str]:
    """`a: b; c: d` as {'a': 'b', 'c': 'd'}, names and values lower case."""
    return {m.group(1).lower(): m.group(2).strip().lower().replace("!important", "").strip()
            for m in _DECLARATION.finditer(text or "")}


def sheet_rules(css: str) -> list[tuple[str, dict[str, str]]]:
    """(selector, declarations) of a style sheet; `@media` wrappers are read through."""
    css = _COMMENT.sub(" ", css)
    css = re.sub(r"@media[^{]*\{", " ", css)  # the inner rules stay; a stray } is harmless
    rules = []
    for selectors, body in _RULE.findall(css):
        found = declarations(body)
        if found and not selectors.strip().startswith("@"):
            rules.extend((s.strip(), found) for s in selectors.split(",") if s.strip())
    return rules


def _length(value: str, font_px: float = 16.0) -> float | None:
    found = _NUMBER.match(value.strip())
    if found is None:
        return None
    number, unit = float(found.group(1)), found.group(2)
    scale = {"": 1.0, "px": 1.0, "pt": 4 / 3, "em": font_px, "rem": 16.0, "%": font_px / 100,
             "ex": font_px / 2, "ch": font_px / 2, "vw": 10.0, "vh": 10.0, "in": 96.0,
             "cm": 37.8, "mm": 3.78, "pc": 16.0}.get(unit)
    return None if scale is None else number * scale


def colour(value: str | None) -> tuple[int, int, int] | None | str:
    """An RGB triple, 'transparent', or None when unreadable."""
    if not value:
        return None
    value = value.strip().lower()
    if value == "transparent":
        return "transparent"
    if value in _NAMED:
        return _NAMED[value]
    if value.startswith("#"):
        digits = value[1:]
        if len(digits) in (3, 4):
            digits = "".join(c * 2 for c in digits[:3])
        try:
            return (int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16))
        except ValueError:
            return None
    found = re.match(r"rgba?\(([^)]*)\)", value)
    if found:
        parts = [p.strip() for p in re.split(r"[,\s/]+", found.group(1)) if p.strip()]
        try:
            rgb = [float(p[:-1]) * 2.55 if p.endswith("%") else float(p) for p in parts[:3]]
            if len(parts) > 3:
                alpha = float(parts[3][:-1]) / 100 if parts[3].endswith("%") else float(parts[3])
                if alpha < 0.1:
                    return "transparent"
            return (int(rgb[0]), int(rgb[1]), int(rgb[2]))
        except (ValueError, IndexError):
            return None
    return None


def _alike(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return sum(abs(x - y) for x, y in zip(a, b)) < 40


def _hidden_by(style: dict[str, str], font_px: float) -> bool:
    """Whether these declarations (with colours judged apart) hide an element."""
    if style.get("display", "").startswith("none"):
        return True
    if style.get("visibility", "") in ("hidden", "collapse"):
        return True
    opacity = _length(style.get("opacity", "1"))
    if opacity is not None and opacity < 0.05:
        return True
    if "font-size" in style:
        size = _length(style["font-size"], font_px)
        if size is not None and size < TINY_PX:
            return True
    for name in ("left", "top", "text-indent", "margin-left", "margin-top", "right"):
        if name in style:
            where = _length(style[name], font_px)
            if where is not None and where < OFF_SCREEN_PX and (
                    name in ("text-indent", "margin-left", "margin-top")
                    or style.get("position", "") in ("absolute", "fixed", "relative")):
                return True
    if style.get("overflow", "").startswith("hidden"):
        for name in ("height", "width", "max-height", "max-width"):
            size = _length(style.get(name, "x"), font_px)
            if size is not None and size <= 1:
                return True
    if re.fullmatch(r"rect\((\s*0(px)?\s*,?){4}\)", style.get("clip", "")):
        return True
    if style.get("clip-path", "").replace(" ", "") in ("inset(50%)", "inset(100%)"):
        return True
    return bool(re.match(r"scale\(\s*0(\.0+)?\s*(,\s*0(\.0+)?\s*)?\)", style.get("transform", "")))


_SIMPLE = re.compile(r"^([a-z][a-z0-9]*|\*)?((?:[.#][\w-]+)*)$", re.I)
# Only declarations that can hide are worth matching a rule for.
_RELEVANT = frozenset({"display", "visibility", "opacity", "font-size", "color", "background",
                       "background-color", "left", "top", "right", "text-indent",
                       "margin-left", "margin-top", "position", "overflow", "height",
                       "width", "max-height", "max-width", "clip", "clip-path", "transform"})


class SheetTooLarge(Exception):
    """A style sheet with more rules that can hide than are checked."""


def _match_sheets(tree) -> dict[object, dict[str, str]]:
    """Each element's declarations from the mail's <style> sheets, in source order.

    Simple selectors (`p`, `.c`, `#i`, `p.c.d`) are matched in one walk, by
    class and id; only the others go through cssselect, at most
    `MAX_COMPLEX_RULES`, so a sheet of thousands of rules costs one pass, not
    one search of the page per rule. More than `MAX_RULES` rules that can
    hide: SheetTooLarge (the caller says the mail cannot be checked)."""
    simple: list[tuple[int, str | None, str | None, frozenset[str], dict[str, str]]] = []
    complex_rules: list[tuple[int, str, dict[str, str]]] = []
    order = 0
    for style in tree.iter("style"):
        for selector, found in sheet_rules(style.text or ""):
            found = {k: v for k, v in found.items() if k in _RELEVANT}
            if not found:
                continue
            order += 1
            if order > MAX_RULES:
                raise SheetTooLarge
            shape = _SIMPLE.match(selector)
            if shape is None:
                complex_rules.append((order, selector, found))
                continue
            tag = shape.group(1)
            parts = re.findall(r"([.#])([\w-]+)", shape.group(2))
            ids = [name for kind, name in parts if kind == "#"]
            simple.append((order, None if tag in (None, "*") else tag.lower(),
                           ids[0] if ids else None,
                           frozenset(name for kind, name in parts if kind == "."), found))
    if len(complex_rules) > MAX_COMPLEX_RULES:
        raise SheetTooLarge
    matched: dict[object, list[tuple[int, dict[str, str]]]] = {}
    if simple:
        # Each rule filed under one key it needs (its id, a class, its tag, or none),
        # so an element meets only the rules that could match it.
        index: dict[tuple[str, str], list] = {}
        for rule in simple:
            _, rule_tag, rule_id, rule_classes, _ = rule
            key = (("#", rule_id) if rule_id else (".", min(rule_classes)) if rule_classes
                   else ("t", rule_tag) if rule_tag else ("*", ""))
            index.setdefault(key, []).append(rule)
        for element in tree.iter():
            if not isinstance(element.tag, str):
                continue
            classes = frozenset((element.get("class") or "").split())
            tag, ident = element.tag.lower(), element.get("id")
            keys = [("*", ""), ("t", tag), *((".", c) for c in classes)]
            if ident:
                keys.append(("#", ident))
            for key in keys:
                for rule_order, rule_tag, rule_id, rule_classes, found in index.get(key, ()):
                    if (rule_tag is None or rule_tag == tag) and (
                            rule_id is None or rule_id == ident) and rule_classes <= classes:
                        matched.setdefault(element, []).append((rule_order, found))
    if complex_rules:
        from lxml.cssselect import CSSSelector

        for rule_order, selector, found in complex_rules:
            try:
                elements = CSSSelector(selector)(tree)
            except Exception:  # a selector cssselect cannot read: it hides nothing
                continue
            for element in elements:
                matched.setdefault(element, []).append((rule_order, found))
    sheet: dict[object, dict[str, str]] = {}
    for element, rules in matched.items():
        merged: dict[str, str] = {}
        for _, found in sorted(rules, key=lambda rule: rule[0]):
            merged.update(found)
        sheet[element] = merged
    return sheet


def _drop_hidden(tree) -> int:
    """Remove the hidden elements of `tree` (their tails stay); how many were removed."""
    sheet = _match_sheets(tree)
    # element → (font px, text colour, background), inherited down the tree
    computed: dict[object, tuple[float, object, object]] = {}
    doomed = []  # the outermost hidden elements
    gone: set[object] = set()  # those and everything inside them
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue  # comments and processing instructions
        parent = element.getparent()
        if parent in gone:
            gone.add(element)  # leaves with its ancestor
            continue
        font_px, text_colour, background = computed.get(parent, (16.0, BLACK, WHITE))
        tag = element.tag.lower()
        if tag in _ALWAYS_HIDDEN:
            doomed.append(element)
            gone.add(element)
            continue
        style = dict(sheet.get(element, {}))
        style.update(declarations(element.get("style", "")))
        if "font-size" in style:
            size = _length(style["font-size"], font_px)
            if size is not None:
                font_px = size
        own_background = colour(style.get("background-color")
                                or _background_shorthand(style.get("background"))
                                or element.get("bgcolor"))
        if isinstance(own_background, tuple):
            background = own_background
        own_colour = colour(style.get("color") or (element.get("color") if tag == "font"
                                                    else None))
        if own_colour is not None:
            text_colour = own_colour
        computed[element] = (font_px, text_colour, background)
        hides = (element.get("hidden") is not None or _hidden_by(style, font_px)
                 or text_colour == "transparent"
                 or (isinstance(text_colour, tuple) and isinstance(background, tuple)
                     and _alike(text_colour, background) and _has_text(element)))
        if not hides and element.get("aria-hidden", "").lower() == "true" and font_px < 6:
            hides = True
        if hides:
            doomed.append(element)
            gone.add(element)
    for element in doomed:
        _remove_keeping_tail(element)
    return len(doomed)


def _background_shorthand(value: str | None) -> str | None:
    if not value:
        return None
    for word in re.findall(r"#[0-9a-f]{3,8}|rgba?\([^)]*\)|[a-z]+", value):
        if colour(word) is not None:
            return word
    return None


def _has_text(element) -> bool:
    return bool((element.text or "").strip())


def _remove_keeping_tail(element) -> None:
    parent = element.getparent()
    if parent is None:
        return
    tail = element.tail
    previous = element.getprevious()
    if tail:
        if previous is not None:
            previous.tail = (previous.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(element)
