"""An answer rendered while it is written, so the page never shows raw Markdown.

The page receives the model's text in pieces. Each piece's frame carries the
whole answer so far as sanitised HTML (the same renderer and sanitiser as a
stored answer: `render.markdown_html`), rendered from a *healed* copy of the
text: a marker whose other half has not arrived yet (`**bol`, an open code
fence, a backtick, a heading marker with no words yet, a link whose address is
still coming) is closed or held back, so the person sees formatting appear,
never `##` or `**` on screen.
"""

from __future__ import annotations

import re

from ..host.protocol import CycleEnded, CycleStarted, ServerMessage, TextDelta, TurnStored
from .render import markdown_html_fresh

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.M)
_BARE_MARKER = re.compile(r"(?:^|\n) {0,3}(?:#{1,6}|[-*+]|\d{1,9}[.)]|>|`{1,2}|~{1,2})[ \t]*$")
_OPEN_LINK = re.compile(r"!?\[[^\]\n]*(?:\]\([^)\n]*)?$")
_RUN = re.compile(r"(\*{1,3}|_{1,3}|~~|`+)")
_TRAILING_RUN = re.compile(r"[*_`~]+$")
_BLOCKS = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[ \t]*$", re.M | re.S)  # whole code blocks


def heal(text: str) -> str:
    """`text` with its unfinished Markdown closed or held back, for display."""
    fences = list(_FENCE.finditer(text))
    if len(fences) % 2 == 1:  # inside a code block: close it, the code shows as code
        return text + "\n" + fences[-1].group(1)[0] * 3
    last_line = text[text.rfind("\n") + 1:]
    if not _FENCE.fullmatch(last_line):  # a closing fence is whole, not half a marker
        text = _TRAILING_RUN.sub("", text)  # half a marker: what it becomes is still coming
    text = _BARE_MARKER.sub("", text)
    text = _OPEN_LINK.sub(lambda m: "" if "](" in m.group(0)
                          else m.group(0).lstrip("!")[1:], text)
    closers = _closers(_paragraph(_BLOCKS.sub("", text)))
    # A closing marker after a space would not close: "**wor **" stays raw.
    return text.rstrip() + closers if closers else text


def _paragraph(text: str) -> str:
    """The text of the last paragraph, where an open marker can still close."""
    cut = text.rfind("\n\n")
    return text[cut + 2:] if cut >= 0 else text


def _closers(paragraph: str) -> str:
    """What closes the emphasis and code spans left open in `paragraph`."""
    stack: list[str] = []
    for match in _RUN.finditer(paragraph):
        run = match.group(1)
        if run.startswith("`"):
            if stack and stack[-1] == run:
                stack.pop()
            elif not any(s.startswith("`") for s in stack):
                stack.append(run)
            continue
        if any(s.startswith("`") for s in stack):
            continue  # inside a code span markers are text
        before = paragraph[match.start() - 1] if match.start() > 0 else " "
        after = paragraph[match.end()] if match.end() < len(paragraph) else " "
        if run.startswith("_") and before.isalnum() and after.isalnum():
            continue  # snake_case is not emphasis
        if stack and stack[-1] == run and not before.isspace():
            stack.pop()
        elif not after.isspace():  # "2 * 3" opens nothing
            stack.append(run)
    return "".join(reversed(stack))


class StreamedAnswer:
    """Follows one page's stream and renders the answer being written."""

    def __init__(self) -> None:
        self._text: list[str] = []

    def html_for(self, message: ServerMessage) -> str | None:
        """The answer so far as HTML when `message` is a piece of it; else None
        (and an answer that ended starts the next one afresh)."""
        if isinstance(message, TextDelta):
            self._text.append(message.delta)
            return markdown_html_fresh(heal("".join(self._text)))
        if isinstance(message, (CycleStarted, CycleEnded)) or (
                isinstance(message, TurnStored) and message.turn.kind == "assistant"):
            self._text.clear()
        return None
