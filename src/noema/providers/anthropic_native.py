"""Anthropic's Messages API, natively, through the official SDK.

The Messages API is stricter than Chat Completions: system text is a
parameter, roles must alternate, tool results are blocks inside a user
message and must come first in it, and empty text blocks are refused.
`to_anthropic` applies those rules; `EventReader` turns the typed stream
back into our events.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

import anthropic

from .base import (
    Finish,
    Message,
    MessageRole,
    ModelRequest,
    SchemaStyle,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from .endpoint import Endpoint
from .failures import (
    Failure,
    StreamMalformed,
    connection_failure,
    describe_transport,
    failure_from_response,
    failure_from_stream_error,
    timeout_failure,
)
from .retry import RetryPolicy, stream_with_retry

_STOP_REASONS = {
    "tool_use": "tool_calls",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}

# -- request: our messages to the wire ---------------------------------------

Block = dict[str, Any]


def _user_blocks(m: Message) -> list[Block]:
    return [{"type": "text", "text": m.content}] if m.content.strip() else []


def _assistant_blocks(m: Message) -> list[Block]:
    blocks = _user_blocks(m)
    blocks += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.parsed_arguments()}
        for c in m.tool_calls
    ]
    return blocks


def _tool_blocks(m: Message) -> list[Block]:
    if not m.tool_call_id:
        raise ValueError("a TOOL message needs the tool_call_id of the call it answers")
    block: Block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "is_error": m.is_error}
    if m.content.strip():
        block["content"] = m.content
    return [block]


_TO_BLOCKS: Mapping[MessageRole, tuple[str, Callable[[Message], list[Block]]]] = {
    MessageRole.USER: ("user", _user_blocks),
    MessageRole.ASSISTANT: ("assistant", _assistant_blocks),
    MessageRole.TOOL: ("user", _tool_blocks),
}


def to_anthropic(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """The `system` parameter and the `messages` list for a conversation.

    System messages join the system parameter. Tool results become
    tool_result blocks of a user message; messages that land on the same
    role are merged so roles alternate, and within a user message the
    tool_result blocks go first (a user message right after tool results
    thus follows them). Messages with nothing to say are dropped.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role is MessageRole.SYSTEM:
            if m.content.strip():
                system.append(m.content)
            continue
        role, to_blocks = _TO_BLOCKS[m.role]
        blocks = to_blocks(m)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            blocks = turn["content"]
            turn["content"] = [b for b in blocks if b["type"] == "tool_result"] + [
                b for b in blocks if b["type"] != "tool_result"
            ]
    return ("\n\n".join(system) or None), turns


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs in Messages API form."""
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


# -- response: stream events to ours -------------------------------------------


class EventReader:
    """Turns Messages API stream events into ours, one event at a time.

    Usage and the stop reason are held back and emitted by `close()`, so the
    stream always ends with `Usage` and then `Finish`.
    """

    def __init__(self) -> None:
        self._tool_index: dict[int, int] = {}  # content block index -> our call index
        self._has_arguments: dict[int, bool] = {}  # block index -> any input JSON seen
        self._input_tokens = 0
        self._output_tokens = 0
        self._stop_reason: str | None = None
        self._stopped = False

    def feed(self, event: Any) -> list[StreamEvent]:
        handler = getattr(self, "_on_" + str(getattr(event, "type", "")), None)
        return handler(event) if handler else []  # unknown event types are for newer clients

    def _on_message_start(self, event: Any) -> list[StreamEvent]:
        usage = getattr(getattr(event, "message", None), "usage", None)
        if usage is not None:
            self._input_tokens = _input_tokens(usage)
            self._output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
        return []

    def _on_content_block_start(self, event: Any) -> list[StreamEvent]:
        block = event.content_block
        kind = getattr(block, "type", None)
        if kind == "text" and getattr(block, "text", ""):
            return [TextDelta(block.text)]
        if kind == "tool_use":
            index = len(self._tool_index)
            self._tool_index[event.index] = index
            self._has_arguments[event.index] = False
            return [ToolCallDelta(index=index, id=block.id, name=block.name)]
        return []

    def _on_content_block_delta(self, event: Any) -> list[StreamEvent]:
        delta = event.delta
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            return [TextDelta(delta.text)] if delta.text else []
        if kind == "input_json_delta":
            index = self._tool_index.get(event.index)
            if index is None:
                raise StreamMalformed(f"input JSON arrived for block {event.index}, not a tool_use block")
            if not delta.partial_json:
                return []
            self._has_arguments[event.index] = True
            return [ToolCallDelta(index=index, arguments=delta.partial_json)]
        return []  # thinking, signatures, citations: not part of our events

    def _on_content_block_stop(self, event: Any) -> list[StreamEvent]:
        if self._has_arguments.get(event.index) is False:
            # A call without input still needs a JSON object for its arguments.
            self._has_arguments[event.index] = True
            return [ToolCallDelta(index=self._tool_index[event.index], arguments="{}")]
        return []

    def _on_message_delta(self, event: Any) -> list[StreamEvent]:
        reason = getattr(getattr(event, "delta", None), "stop_reason", None)
        if reason:
            self._stop_reason = reason
        usage = getattr(event, "usage", None)
        if usage is not None:
            self._output_tokens = int(getattr(usage, "output_tokens", 0) or self._output_tokens)
            if getattr(usage, "input_tokens", None) is not None:
                self._input_tokens = _input_tokens(usage)
        return []

    def _on_message_stop(self, event: Any) -> list[StreamEvent]:
        self._stopped = True
        return []

    def close(self) -> list[StreamEvent]:
        if not self._stopped or self._stop_reason is None:
            raise StreamMalformed("the stream ended before message_stop and a stop_reason")
        reason = _STOP_REASONS.get(self._stop_reason, self._stop_reason)
        return [Usage(self._input_tokens, self._output_tokens), Finish(reason)]


def _input_tokens(usage: Any) -> int:
    # Cached prompt tokens are counted apart; the context holds all of them.
    return sum(
        int(getattr(usage, name, 0) or 0)
        for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


# -- errors -------------------------------------------------------------------


def describe_anthropic_error(exc: BaseException) -> Failure | None:
    """A neutral description of an Anthropic SDK (or transport) exception."""
    if isinstance(exc, anthropic.APIStatusError):
        if exc.status_code < 300:  # an error event inside a started stream (a 3xx: a redirect)
            return failure_from_stream_error(exc.body, exc.message)
        return failure_from_response(exc.status_code, exc.response.headers, exc.body, exc.message)
    if isinstance(exc, anthropic.APITimeoutError):
        return timeout_failure(exc)
    if isinstance(exc, anthropic.APIConnectionError):
        return connection_failure(exc)
    return describe_transport(exc)


# -- the provider -------------------------------------------------------------


class AnthropicProvider:
    """A Claude model through the Messages API, streamed."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        context_window: int,
        max_output_tokens: int = 4096,
        temperature: float | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.name = endpoint.provider
        self.model = endpoint.model
        self.context_window = context_window
        self.endpoint = endpoint
        self._max_output_tokens = max_output_tokens
        self._temperature = temperature
        self.schema_style = SchemaStyle.TOOL  # the catalogue's record may say otherwise
        self._policy = policy or RetryPolicy()
        self._client = anthropic.AsyncAnthropic(
            api_key=endpoint.api_key,
            base_url=endpoint.base_url,
            timeout=endpoint.timeout(),
            max_retries=0,  # ours is the only retry policy
            http_client=endpoint.http_client(anthropic.DefaultAsyncHttpxClient),
        )

    def payload(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of the Messages call for a request."""
        system, messages = to_anthropic(request.messages)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": request.max_tokens or self._max_output_tokens,
            "stream": True,
        }
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = to_anthropic_tools(request.tools)
        if request.answer_schema is not None and self.schema_style is SchemaStyle.TOOL:
            # The answer is the input of one tool the model must use; it comes
            # back as that call's arguments.
            answer = request.answer_schema
            body["tools"] = [*body.get("tools", ()), {
                "name": answer.name, "description": "Give the answer with this tool.",
                "input_schema": answer.schema}]
            body["tool_choice"] = {"type": "tool", "name": answer.name}
        if self._temperature is not None:
            # This SDK version has no temperature argument; the field is sent
            # as given and the server decides whether the model accepts it.
            body["extra_body"] = {"temperature": self._temperature}
        return body

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        """Stream the answer; closing or cancelling the iteration closes the response."""
        return stream_with_retry(
            lambda: self._attempt(request),
            endpoint=self.endpoint,
            policy=self._policy,
            describe=describe_anthropic_error,
        )

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        # Built here so that a request we cannot convert fails while iterating, like any other.
        response = await self._client.messages.create(**self.payload(request))
        try:
            reader = EventReader()
            async for event in response:
                for ours in reader.feed(event):
                    yield ours
            for ours in reader.close():
                yield ours
        finally:
            await response.close()

    async def aclose(self) -> None:
        """Release the connection pool."""
        await self._client.close()
