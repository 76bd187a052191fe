"""An answer as Telegram messages: MarkdownV2, split within Telegram's limit.

The model writes Markdown. Telegram's MarkdownV2 refuses any of
`_*[]()~`>#+-=|{}.!` left unescaped, so everything is escaped with the
library's helper except three things kept as formatting: fenced code blocks
(monospace, only `` ` `` and `\\` escaped inside), inline code, and `**bold**`.

A message holds at most 4096 characters; the limit is checked on the
escaped text, counted in UTF-16 units as Telegram counts, which is never
less than the text shown. An answer is cut between paragraphs when it can
be, else between lines, else between words; every piece is rendered on its
own, so no cut falls inside an escape, and a code block cut in two is
closed and opened again. Each part also carries its plain text, sent
without formatting if Telegram should refuse the formatted one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .library import MessageLimit, escape_markdown

LIMIT = MessageLimit.MAX_TEXT_LENGTH  # 4096
_INLINE = re.compile(r"`([^`\n]+)`|\*\*([^*\n]+)\*\*")
_FENCE = re.compile(r"^\s*```\s*([\w+#.-]*)\s*$")


@dataclass(frozen=True, slots=True)
class Part:
    """One message: MarkdownV2, and the same text plain."""

    markdown: str
    plain: str


@dataclass(frozen=True, slots=True)
class _Line:
    text: str


@dataclass(frozen=True, slots=True)
class _Code:
    lang: str
    lines: tuple[str, ...]


_Segment = _Line | _Code


def units(text: str) -> int:
    """Length as Telegram counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def render_line(line: str) -> str:
    """A line of prose in MarkdownV2: code spans and bold kept, the rest escaped."""
    out, at = [], 0
    for match in _INLINE.finditer(line):
        out.append(escape_markdown(line[at:match.start()], version=2))
        if match.group(1) is not None:
            out.append("`" + escape_markdown(match.group(1), 2, "code") + "`")
        else:
            out.append("*" + escape_markdown(match.group(2), version=2) + "*")
        at = match.end()
    out.append(escape_markdown(line[at:], version=2))
    return "".join(out)


def _plain_line(line: str) -> str:
    return _INLINE.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), line)


def _render(segment: _Segment) -> str:
    if isinstance(segment, _Line):
        return render_line(segment.text)
    body = escape_markdown("\n".join(segment.lines), 2, "pre")
    return f"```{segment.lang}\n{body}\n```"


def _plain(segment: _Segment) -> str:
    return _plain_line(segment.text) if isinstance(segment, _Line) else "\n".join(segment.lines)


def segments(text: str) -> list[_Segment]:
    """Prose lines and fenced code blocks, in order (an unclosed fence runs to the end)."""
    found: list[_Segment] = []
    code: list[str] | None = None
    lang = ""
    for line in text.replace("\r\n", "\n").split("\n"):
        fence = _FENCE.match(line)
        if code is None and fence:
            code, lang = [], fence.group(1)
        elif code is not None and fence and not fence.group(1):
            found.append(_Code(lang, tuple(code)))
            code = None
        elif code is not None:
            code.append(line)
        else:
            found.append(_Line(line))
    if code is not None:
        found.append(_Code(lang, tuple(code)))
    return found


def split_message(text: str, limit: int = LIMIT) -> list[Part]:
    """The messages that carry `text`, each within `limit` once escaped."""
    parts: list[Part] = []
    current: list[_Segment] = []

    def size(pieces: list[_Segment]) -> int:
        return sum(units(_render(p)) for p in pieces) + max(0, len(pieces) - 1)

    def flush() -> None:
        nonlocal current
        if any(_plain(p).strip() for p in current):
            parts.append(Part("\n".join(map(_render, current)),
                              "\n".join(map(_plain, current))))
        current = []

    def add(piece: _Segment) -> None:
        nonlocal current
        if size([*current, piece]) <= limit:
            current.append(piece)
            return
        # Over the limit: cut at the last paragraph break if there is one.
        breaks = [i for i, p in enumerate(current) if isinstance(p, _Line) and not p.text.strip()]
        if breaks and breaks[-1] > 0:
            carried = current[breaks[-1] + 1:]
            current = current[:breaks[-1]]
            flush()
            current = carried
            if size([*current, piece]) <= limit:
                current.append(piece)
                return
        flush()
        current = [piece]

    for segment in segments(text):
        if isinstance(segment, _Line):
            for piece in _fitting_lines(segment.text, limit):
                add(_Line(piece))
            continue
        block: _Code | None = None  # this block's piece in `current`, to grow it
        for line in segment.lines or ("",):
            for piece in _fitting_lines(line, limit - 8 - len(segment.lang), pre=True):
                if block is not None and current and current[-1] is block:
                    grown = _Code(block.lang, (*block.lines, piece))
                    if size([*current[:-1], grown]) <= limit:
                        current[-1] = block = grown
                        continue
                block = _Code(segment.lang, (piece,))
                add(block)
    flush()
    return parts


def _fitting_lines(line: str, limit: int, *, pre: bool = False) -> list[str]:
    """`line` cut between words (between characters if a word is too long)
    into pieces whose rendering fits `limit`."""
    measure = ((lambda s: units(escape_markdown(s, 2, "pre"))) if pre
               else (lambda s: units(render_line(s))))
    if measure(line) <= limit:
        return [line]
    pieces: list[str] = []
    current = ""
    for word in re.findall(r"\S+\s*|\s+", line):
        if measure(current + word) <= limit:
            current += word
            continue
        if current:
            pieces.append(current)
            current = ""
        while measure(word) > limit:  # a word longer than a message: cut it
            cut = len(word)
            while cut > 1 and measure(word[:cut]) > limit:
                cut = max(1, cut * limit // max(1, measure(word[:cut])) - 1)
            pieces.append(word[:cut])
            word = word[cut:]
        current = word
    if current:
        pieces.append(current)
    return pieces
