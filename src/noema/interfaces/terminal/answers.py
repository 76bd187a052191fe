"""Whether a line the person entered answers a question, and which one.

An approval counts only when it answers a question the person could see: a
line is an answer only when it was entered at that question's own prompt,
after the prompt was drawn. A line entered before (typed while the agent was
busy, its Enter pressed a moment before the question appeared) is a message
like any other: it is sent, stored and answered after, never taken for a
"yes" or a "no".

Nothing here reads a terminal or a clock. The input side places every line on
one scale of *positions* that only grows as the person types (the offset of
the line's end in the bytes read, for lines from a stream; the number of the
prompt it was typed at, under prompt_toolkit), and says where the input stood
each time it drew a prompt (`Prompts.drawn`). A line belongs to the last
prompt drawn at or before its position.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

__all__ = ["YES", "NO", "Prompt", "Prompts", "Reply", "Message", "Command", "Nothing",
           "Verdict", "read_line", "InputSide", "Unclocked", "FAR"]

YES = frozenset({"y", "yes", "s", "si", "sí"})
NO = frozenset({"", "n", "no"})  # the question says [y/N]: Enter alone refuses


@dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt the chat drew: the approval it asks, or None for messages;
    lines at position `first` or later were entered at it."""

    question: int | None
    first: int


class Prompts:
    """The prompts drawn, in order, to place the lines entered at them.

    Lines are judged in the order they were entered, so a prompt older than
    the one the last line belonged to is forgotten.
    """

    def __init__(self) -> None:
        self._drawn: deque[Prompt] = deque([Prompt(None, 0)])

    @property
    def last(self) -> Prompt:
        """The prompt drawn most recently."""
        return self._drawn[-1]

    def drawn(self, question: int | None, first: int) -> None:
        """A prompt asking `question` (None: taking messages) is on the screen;
        the input stood at `first` when it was drawn. A prompt drawn at the
        same position as the last one replaces it (a prompt first drawn for
        messages, then found clean enough to ask)."""
        last = self._drawn[-1]
        if first < last.first:
            raise ValueError(f"a prompt drawn at {first}, before the last one at {last.first}: "
                             "input positions only grow")
        if first == last.first:
            self._drawn.pop()
        self._drawn.append(Prompt(question, first))

    def at(self, position: int) -> Prompt:
        """The prompt a line entered at `position` was entered at."""
        while len(self._drawn) > 1 and self._drawn[1].first <= position:
            self._drawn.popleft()
        first = self._drawn[0]
        if first.first > position:
            # Older than every prompt still known: entered before all of them,
            # so at a prompt for messages as far as any question is concerned.
            return Prompt(None, position)
        return first


class InputSide(Protocol):
    """Where the person's lines come from, as the chat's logic sees it."""

    def prompt_changed(self, prompts: Prompts, question: int | None) -> None:
        """The chat now asks `question` (None: it takes messages) and has shown
        it: record in `prompts`, once that prompt is drawn, where the input
        stood then."""


FAR = 1 << 62  # a position no line reaches


class Unclocked:
    """An input side that cannot tell when a line was entered: every line is
    taken as entered before any question, so none is ever an answer."""

    def prompt_changed(self, prompts: Prompts, question: int | None) -> None:
        prompts.drawn(question, FAR)


@dataclass(frozen=True, slots=True)
class Reply:
    """The person's answer to `question`; `words`, when not empty, is what
    they wrote instead of yes or no: a refusal, and a message sent as well."""

    question: int
    allow: bool
    words: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    """A message for the agent."""

    text: str


@dataclass(frozen=True, slots=True)
class Command:
    """A chat command (`/stop`, `/status`…); one typed at a question's prompt
    leaves the question open."""

    text: str


@dataclass(frozen=True, slots=True)
class Nothing:
    """An empty line at a prompt for messages."""


Verdict = Reply | Message | Command | Nothing


def read_line(text: str, prompt: Prompt) -> Verdict:
    """What a line entered at `prompt` is."""
    stripped = text.strip()
    if stripped.startswith("/"):
        return Command(stripped)
    if prompt.question is None:
        return Message(stripped) if stripped else Nothing()
    word = stripped.lower()
    if word in YES:
        return Reply(prompt.question, True)
    if word in NO:
        return Reply(prompt.question, False)
    return Reply(prompt.question, False, words=stripped)
