"""What a fake model server answers: replies, failures and recorded requests."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

Cut = Literal["drop", "error", "garbage"]


@dataclass(frozen=True, slots=True)
class FakeToolCall:
    """A tool call the fake model makes; `arguments` is JSON text, streamed in pieces."""

    name: str
    arguments: str = "{}"
    id: str | None = None  # None: the server makes one up


@dataclass(frozen=True, slots=True)
class FakeReply:
    """One streamed (or whole) answer.

    `cut` interrupts the stream after `cut_after` events: "drop" closes the
    connection mid-body, "error" sends the protocol's in-stream error event,
    "garbage" sends an event whose data is not JSON.
    """

    text: str = ""
    tool_calls: tuple[FakeToolCall, ...] = ()
    input_tokens: int = 11
    output_tokens: int | None = None  # None: one per streamed piece
    finish_reason: str | None = None  # None: what the protocol says for this content
    argument_piece: int = 7  # characters of tool arguments per chunk
    send_usage: bool = True  # False: behave like servers that ignore include_usage
    cut: Cut | None = None
    cut_after: int = 0
    error_type: str = "overloaded_error"  # for cut="error"
    error_message: str = "the model is overloaded"

    def tokens(self) -> list[str]:
        """The text split the way a model streams it: a word and its trailing space."""
        return re.findall(r"\S+\s*|\s+", self.text)

    def pieces(self, arguments: str) -> list[str]:
        step = max(1, self.argument_piece)
        return [arguments[i : i + step] for i in range(0, len(arguments), step)] or [""]


@dataclass(frozen=True, slots=True)
class FakeFailure:
    """An HTTP error answer instead of a reply."""

    status: int
    message: str = "the fake server was told to fail"
    retry_after: float | None = None
    code: str | None = None  # OpenAI's error code; Anthropic's error type when given


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as the fake server received it."""

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: Any = None  # parsed JSON, or the raw text when it was not JSON
