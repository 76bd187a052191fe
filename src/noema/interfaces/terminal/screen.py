"""Where the terminal chat writes: plain lines, or rich Markdown.

The chat's logic (`client.ChatClient`) says *what* to show; a screen
says *how*. `PlainScreen` writes plain text with no escape codes, for pipes,
scripts and dumb terminals, and shows its own `you> ` prompt. `RichScreen`
renders answers as Markdown block by block as they stream (the block still
being written is shown live by the prompt, see `pending`), with colours, and
leaves the prompt to prompt_toolkit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol, TextIO

from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

from .markdown import MarkdownStream

PROMPT = "you> "
ANSWER = "noema> "
QUESTION = "  allow it? [y/N] "

Kind = Literal["info", "tool", "result", "failed", "notice", "error", "note", "other", "you"]

STYLES: dict[str, str] = {
    "info": "",
    "tool": "dim",
    "result": "dim",
    "failed": "red",
    "notice": "yellow",
    "error": "bold red",
    "note": "italic dim",
    "other": "cyan",
    "you": "bold",
}


class Screen(Protocol):
    """What the chat's logic needs from a display."""

    def answer(self, delta: str) -> None:
        """A piece of the answer being written."""

    def end_answer(self) -> None:
        """The answer being written is complete (or was cut short)."""

    def line(self, text: str, kind: Kind = "info") -> None:
        """A line (or a few) that is not part of an answer."""

    def aside(self, text: str) -> None:
        """A notice of the program's own (a log line): shown without cutting
        an answer being written."""

    def ready(self) -> None:
        """The agent is idle: invite the person to type."""

    def ask(self) -> None:
        """An approval question was just shown: invite the answer."""

    def line_read(self, text: str) -> None:
        """The person entered `text`."""


class PlainScreen:
    """Plain text on a stream, with its own prompt: what scripts and tests read.

    With `echo`, each line read is written after the prompt: lines from a
    pipe are not shown by a terminal, and the transcript should say what
    each answer answers."""

    def __init__(self, out: TextIO, *, echo: bool = False) -> None:
        self.out = out
        self.echo = echo
        self.streaming = False
        self.prompting = False  # the prompt is the last thing on the screen
        self._prompt = PROMPT  # the prompt shown last: for messages, or a question's
        self._asides: list[str] = []  # said while an answer streams: shown after it

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self.prompting = False

    def answer(self, delta: str) -> None:
        if not self.streaming:
            self._write(("\n" if self.prompting else "") + ANSWER)
            self.streaming = True
        self._write(delta)

    def end_answer(self) -> None:
        if self.streaming:
            self._write("\n")
            self.streaming = False
        asides, self._asides = self._asides, []
        for text in asides:
            self.line(text, "notice")

    def line(self, text: str, kind: Kind = "info") -> None:
        self.end_answer()
        # Said while the prompt waits: on its own line, then the prompt again.
        waiting = self.prompting
        self._write(("\n" if waiting else "") + text + "\n")
        if waiting:  # the same prompt again: a question's stays a question's
            self._write(self._prompt)
            self.prompting = True

    def aside(self, text: str) -> None:
        if self.streaming:
            self._asides.append(text)  # a plain line cannot be written above the answer
        else:
            self.line(text, "notice")

    def ready(self) -> None:
        # Several paths end at idle at once (a stop, its repair, the command):
        # one prompt is enough.
        if not self.prompting or self._prompt != PROMPT:
            self._write(("\n" if self.prompting else "") + PROMPT)
            self._prompt = PROMPT
            self.prompting = True

    def ask(self) -> None:
        self._write(QUESTION)
        self._prompt = QUESTION
        self.prompting = True

    def line_read(self, text: str) -> None:
        if self.echo and self.prompting:
            self._write(text + "\n")
        self.prompting = False

    def close(self) -> None:
        """The chat ends: a prompt no line will follow gets its line end, so
        that what runs next starts on a line of its own."""
        if self.prompting:
            self._write("\n")


class RichScreen:
    """Colours and Markdown through rich; prompt_toolkit owns the prompt.

    `console` writes to `sys.stdout`, which prompt_toolkit's `patch_stdout`
    turns into "print above the prompt" while the chat runs.
    """

    def __init__(self, console: Console, changed: Callable[[], None] = lambda: None) -> None:
        self.console = console
        self._stream: MarkdownStream | None = None
        self._changed = changed  # the live part of the answer changed: redraw the prompt

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the live part (or the prompt's wording) may have changed."""
        self._changed = callback

    @property
    def pending(self) -> str:
        """The block of the answer still being written (shown live above the prompt)."""
        return self._stream.pending if self._stream is not None else ""

    def answer(self, delta: str) -> None:
        if self._stream is None:
            self._stream = MarkdownStream()
        for block in self._stream.feed(delta):
            self._markdown(block)
        self._changed()

    def end_answer(self) -> None:
        if self._stream is None:
            return
        rest = self._stream.finish()
        self._stream = None
        if rest:
            self._markdown(rest)
        self._changed()

    def _markdown(self, block: str) -> None:
        self.console.print(Markdown(block))

    def line(self, text: str, kind: Kind = "info") -> None:
        self.end_answer()
        self.console.print(Text(text, style=STYLES.get(kind, "")))

    def aside(self, text: str) -> None:
        # Printed above the prompt, where the block being written is shown
        # live: the answer goes on below it, uncut.
        self.console.print(Text(text, style=STYLES["notice"]))
        self._changed()

    def ready(self) -> None:
        self._changed()

    def ask(self) -> None:
        self._changed()

    def line_read(self, text: str) -> None:
        pass
