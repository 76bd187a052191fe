"""Outside text made inert before the model reads it.

Three defences, layered:
- a per-session random token in every envelope mark, and the mark's
  brackets (⟦ ⟧) removed from outside text, so outside text can neither
  guess nor forge the end of its envelope;
- datamarking: the spaces of outside text are replaced by a marker, so
  wherever the model looks inside data it can see it is data;
- invisible characters (zero-width, bidirectional overrides, tag
  characters, other format and control characters) removed, so nothing
  hidden reaches the model and nothing reorders what it sees.
"""

from __future__ import annotations

import re
import secrets
import unicodedata
from dataclasses import dataclass

OPEN = "⟦"
CLOSE = "⟧"
DEFAULT_MARKER = "ˆ"
# An envelope mark as `SessionDelimiter.open`/`close` write it: the kind, the
# session's token, then attributes. Outside text never holds a bracket.
_MARK = re.compile(f"{OPEN}(/?)([^\\s{CLOSE}]*) [0-9a-f]{{8,32}}([^{CLOSE}]*){CLOSE}")

# Characters that render as nothing but are not in the format/control
# categories: variation selectors, Hangul fillers, the combining grapheme
# joiner, Mongolian free variation selectors, the Khmer inherent vowels.
_INVISIBLE_EXTRA = frozenset([
    0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180E, 0x180F,
    0x2800, 0x3164, 0xFFA0, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0),
])
# Format (Cf: zero-width, bidi, tags), controls (Cc), surrogates, private use, unassigned.
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Cs", "Co", "Cn"})
_ASCII_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_KEEP = frozenset({"\n", "\t"})


def _visible(char: str) -> bool:
    if char in _KEEP:
        return True
    code = ord(char)
    if code in _INVISIBLE_EXTRA:
        return False
    return unicodedata.category(char) not in _INVISIBLE_CATEGORIES


def strip_invisible(text: str) -> str:
    """Remove characters that display as nothing or change display order.

    Newlines and tabs stay; carriage returns go (line ends become "\\n").
    """
    text = text.replace("\r\n", "\n")
    if text.isascii():
        return _ASCII_CONTROLS.sub("", text.replace("\r", "\n"))
    return "".join(c for c in text.replace("\r", "\n") if _visible(c))


@dataclass(frozen=True, slots=True)
class SessionDelimiter:
    """The random token and datamark used for every envelope of one session."""

    token: str
    marker: str = DEFAULT_MARKER

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[0-9a-f]{8,32}", self.token):
            raise ValueError("a delimiter token is 8 to 32 lowercase hex digits")
        if len(self.marker) != 1 or self.marker.isspace() or not self.marker.isprintable() or (
            self.marker.isascii() and self.marker.isalnum()
        ):
            raise ValueError("the datamark is one visible character, not a letter or digit")
        if self.marker in (OPEN, CLOSE):
            raise ValueError("the datamark cannot be an envelope bracket")

    @classmethod
    def new(cls) -> SessionDelimiter:
        """A fresh, unguessable delimiter for a new session."""
        return cls(secrets.token_hex(6))

    def open(self, kind: str, attributes: str = "") -> str:
        """The opening mark of an envelope; attributes are already cleaned."""
        return f"{OPEN}{kind} {self.token}{' ' + attributes if attributes else ''}{CLOSE}"

    def close(self, kind: str) -> str:
        """The closing mark that matches `open(kind)`."""
        return f"{OPEN}/{kind} {self.token}{CLOSE}"

    def neutralise(self, text: str) -> str:
        """Outside text with no invisible characters, no brackets and no token."""
        text = strip_invisible(text)
        if OPEN in text or CLOSE in text:
            text = text.replace(OPEN, "[").replace(CLOSE, "]")
        if self.token in text.lower():
            text = re.sub(re.escape(self.token), "[token]", text, flags=re.I)
        return text

    def datamark(self, text: str) -> str:
        """Neutralised outside text with every run of spaces replaced by the marker.

        A marker already present in the text becomes "^", so every marker the
        model sees was put there by us.
        """
        text = self.neutralise(text).replace(self.marker, "^")
        return "\n".join(self.marker.join(line.split()) for line in text.split("\n"))

    def attribute(self, value: str, limit: int = 200) -> str:
        """An outside value written as a quoted, datamarked envelope attribute."""
        clean = self.marker.join(self.neutralise(value).replace(self.marker, "^").split())
        if len(clean) > limit:
            clean = clean[: limit - 1] + "…"
        return '"' + clean.replace("\\", "\\\\").replace('"', '\\"') + '"'


def plain_words(text: str, marker: str = DEFAULT_MARKER) -> str:
    """Marked text as plain words, for a full-text index: datamarks become
    spaces and envelope marks lose their brackets and session token.

    A datamarked log line is one long token to a tokenizer, so its words
    could never be searched; the model still reads the marked text, only
    the index sees this one. Text with no marks comes back unchanged.
    """
    if OPEN in text:
        text = _MARK.sub(lambda m: f" {m.group(2)}{m.group(3)} ", text)
    return text.replace(marker, " ") if marker in text else text


def escape_invisible(text: str, keep_newlines: bool = False,
                     shown: str = "<U+{:04X}>") -> str:
    """Outside text with every invisible, control or bidirectional character
    written visibly (`shown`, by default `<U+202E>`), so a name or subject that
    hides or reorders its letters shows how (stripping would hide the attempt).

    Newlines are escaped too unless `keep_newlines`: a name is one line.
    """
    kept = _KEEP if keep_newlines else frozenset()
    if text.isascii() and not _ASCII_CONTROLS.search(text) and (
            keep_newlines or not any(c in text for c in "\n\t\r")):
        return text
    return "".join(c if (c in kept or (c not in "\n\t\r" and _visible(c)))
                   else shown.format(ord(c)) for c in text)
