"""The user guide, served by the page under /guide: the Markdown pages of
`docs/` (shipped in the package as `noema/guide`, a link to that folder in
a clone), rendered here, so that Help works offline and from an installed
package, with no site built beforehand.

The pages are read as the static site reads them: a link to `memory.md#search`
goes to `/guide/memory#search`, and headings get the ids MkDocs gives them
(Python-Markdown's `toc` slugs), so one set of links works in both. The pages
are ours, shipped with the program, and raw HTML in them is shown as text.
The order of the pages is the order of the guide's home page's links.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

GUIDE = Path(__file__).resolve().parents[2] / "guide"
HOME = "index"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_PAGE_LINK = re.compile(r"^(?P<page>[A-Za-z0-9_-]+)\.md(?P<anchor>#[\w-]+)?$")

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


class NoSuchPage(LookupError):
    """The guide has no page by this name."""


@dataclass(frozen=True, slots=True)
class GuidePage:
    """One page of the guide, rendered."""

    name: str
    title: str
    html: str


def slug(text: str) -> str:
    """A heading's id, as Python-Markdown's `toc` makes it (MkDocs' default)."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    plain = re.sub(r"[^\w\s-]", "", plain).strip().lower()
    return re.sub(r"[-\s]+", "-", plain)


def _text_of(inline: Token) -> str:
    return "".join(child.content for child in inline.children or ()
                   if child.type in ("text", "code_inline"))


def _rewrite_link(token: Token) -> None:
    href = str(token.attrGet("href") or "")
    local = _PAGE_LINK.match(href)
    if local:
        page = "" if local.group("page") == HOME else local.group("page")
        token.attrSet("href", f"/guide/{page}{local.group('anchor') or ''}")
    elif href.startswith(("https://", "http://")):
        token.attrSet("rel", "noopener noreferrer")
    elif not href.startswith("#"):
        # A path into the clone (a script, a test) means nothing on the page.
        token.attrs.pop("href", None)


def render(text: str) -> str:
    """A guide page's Markdown as HTML, with heading ids and links into /guide."""
    tokens = _markdown.parse(text)
    seen: dict[str, int] = {}
    for number, token in enumerate(tokens):
        if token.type == "heading_open":
            base = slug(_text_of(tokens[number + 1]))
            count = seen.get(base, 0)
            seen[base] = count + 1
            token.attrSet("id", base if count == 0 else f"{base}_{count}")
        elif token.type == "inline":
            for child in token.children or ():
                if child.type == "link_open":
                    _rewrite_link(child)
    return _markdown.renderer.render(tokens, _markdown.options, {})


def _title(text: str, name: str) -> str:
    match = re.search(r"^# (.+)$", text, flags=re.MULTILINE)
    return match.group(1).strip() if match else name


@lru_cache(maxsize=64)  # the pages ship with the program and do not change while it runs
def guide_page(name: str = HOME) -> GuidePage:
    """The page `name` (`index` for the guide's home), or NoSuchPage."""
    if not _NAME.fullmatch(name):
        raise NoSuchPage(name)
    path = GUIDE / f"{name}.md"
    if not path.is_file():
        raise NoSuchPage(name)
    text = path.read_text(encoding="utf-8")
    return GuidePage(name, _title(text, name), render(text))


@lru_cache(maxsize=1)
def contents() -> tuple[tuple[str, str], ...]:
    """(name, title) of each page, home first, in the order the home page links them."""
    home = (GUIDE / f"{HOME}.md").read_text(encoding="utf-8")
    names = [HOME]
    for name in re.findall(r"\]\(([A-Za-z0-9_-]+)\.md[)#]", home):
        if name not in names and (GUIDE / f"{name}.md").is_file():
            names.append(name)
    return tuple((name, guide_page(name).title) for name in names)
