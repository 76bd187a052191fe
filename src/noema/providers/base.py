"""What every model provider speaks: messages in, a stream of deltas out.

The wire formats of OpenAI-compatible servers and of Anthropic differ; the
adapters translate these neutral types to and from them. A stream can be
cancelled at any point: cancelling the task that iterates it (or calling
`aclose()` on it) closes the HTTP response at once.
"""

from __future__ import annotations

import enum
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


class MessageRole(enum.StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model made it; `arguments` is raw JSON text."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> dict:
        """Arguments as a dict for wire formats that need an object.

        Malformed JSON becomes an empty object: the reply to the call carries
        the error, and the request must still be well formed.
        """
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message in provider-neutral form."""

    role: MessageRole
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # for role TOOL: the call it answers
    tool_name: str | None = None  # for role TOOL
    is_error: bool = False  # for role TOOL


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    description: str
    parameters: dict  # JSON schema of the arguments object


@dataclass(frozen=True, slots=True)
class AnswerSchema:
    """Structured output: the answer is to be one JSON object valid under
    `schema`, decoded under that constraint where the server can (see
    `ProviderSpec.answer_schema`)."""

    name: str
    schema: dict


class SchemaStyle(enum.StrEnum):
    """How a server is asked to hold its answer to a JSON schema."""

    NONE = "none"  # it cannot: the schema is only described in words, if at all
    JSON_SCHEMA = "json_schema"  # OpenAI's response_format (vLLM, Ollama, LM Studio too)
    JSON_OBJECT = "json_object"  # llama.cpp's: a json_object response_format with a schema
    TOOL = "tool"  # Anthropic: a tool whose input schema is the answer, its use required


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call needs."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    # The answer's shape, for a provider that can constrain it: the JSON comes
    # back as text (or as the arguments of the one tool call, with TOOL).
    answer_schema: AnswerSchema | None = None


# -- stream events ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a tool call. `index` says which call of the response it belongs to;
    `id` and `name` arrive on the first piece, `arguments` accumulate."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Finish:
    reason: str  # "stop", "tool_calls", "length", ... as normalised by the adapter


@dataclass(frozen=True, slots=True)
class RetryWait:
    """Not model output: the request failed before anything streamed and will be
    tried again after `seconds`. Passed on so the person is not left in silence;
    `asked` when the provider's Retry-After set the wait, not our own backoff."""

    retry: int  # the retry about to happen, from 1
    of: int  # the most retries there will be
    seconds: float
    asked: bool
    why: str = ""  # what failed, in a few words: "server error (HTTP 503: ...)"

    def __post_init__(self) -> None:
        if not 1 <= self.retry <= self.of:
            raise ValueError("a retry is numbered from 1 to the most there will be")
        if self.seconds < 0:
            raise ValueError("a wait cannot be negative")

    def describe(self) -> str:
        """One line for the person."""
        wait = f"{self.seconds:.0f}" if self.seconds >= 10 else f"{self.seconds:.1f}"
        wait = wait.removesuffix(".0")
        if self.asked:
            return f"the provider asked to wait {wait} s; retry {self.retry} of {self.of}"
        why = " ".join(self.why.split())
        why = why if len(why) <= 80 else why[:79] + "…"
        return (f"{why or 'the request failed'}; waiting {wait} s before retry "
                f"{self.retry} of {self.of}")


StreamEvent = TextDelta | ToolCallDelta | Usage | Finish | RetryWait


@dataclass(slots=True)
class ModelResponse:
    """A response assembled from stream events."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None


class ResponseBuilder:
    """Folds stream events into a ModelResponse, one event at a time."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, list] = {}  # index -> [id, name, [argument pieces]]
        self.usage: Usage | None = None
        self.finish_reason: str | None = None

    def feed(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ToolCallDelta):
            slot = self._calls.setdefault(event.index, [None, None, []])
            if event.id:
                slot[0] = event.id
            # Most servers send the name once; some repeat it on every piece
            # and a few split it. Repeats are ignored, pieces are joined.
            if event.name and event.name != slot[1]:
                slot[1] = (slot[1] or "") + event.name
            slot[2].append(event.arguments)
        elif isinstance(event, Usage):
            self.usage = event
        elif isinstance(event, Finish):
            self.finish_reason = event.reason

    @property
    def text(self) -> str:
        return "".join(self._text)

    def build(self) -> ModelResponse:
        calls = []
        for index in sorted(self._calls):
            call_id, name, pieces = self._calls[index]
            calls.append(
                ToolCall(id=call_id or f"call_{index}", name=name or "", arguments="".join(pieces))
            )
        return ModelResponse(self.text, calls, self.usage, self.finish_reason)


# -- the interface ------------------------------------------------------------


@runtime_checkable
class Provider(Protocol):
    """A model endpoint. `stream` yields StreamEvents and ends with a Finish."""

    name: str
    model: str
    context_window: int

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]: ...


# -- errors: theirs, not ours --------------------------------------------------


class ProviderError(Exception):
    """The provider failed; the message is written for the person."""


class AuthenticationFailed(ProviderError):
    """The API key is missing, wrong or lacks permission."""


class ModelNotFound(ProviderError):
    """The configured model does not exist at this endpoint."""


class ProviderUnavailable(ProviderError):
    """The endpoint kept failing (rate limits, 5xx, connection) after all retries."""


class BadRequest(ProviderError):
    """The endpoint rejected the request (too long a context, bad parameter).

    `server_window` is the context window the refusal named, when it named one.
    """

    def __init__(self, message: str, *, server_window: int | None = None) -> None:
        super().__init__(message)
        self.server_window = server_window


class EmptyAnswer(ProviderError):
    """The model answered with neither words nor a tool call."""


class ProtocolViolation(ProviderError):
    """The endpoint streamed something that does not follow its own protocol."""
