"""Any server that speaks OpenAI's Chat Completions, through the official SDK.

OpenAI, OpenRouter, DeepSeek, Ollama, llama.cpp, vLLM and LM Studio all
take the same request; they differ in what they send back at the edges
(usage, finish reasons, tool-call indexes), which `ChunkReader` absorbs.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from .base import (
    Finish,
    Message,
    MessageRole,
    ModelRequest,
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

# The SDK will not build a client without a key; keyless local servers
# ignore whatever bearer token they receive.
_NO_KEY = "no-key-needed"

# What `chat.completions.create` asks of the client's `post`, minus the
# body's type-driven transform: that walks every message of the history
# against the SDK's typed dicts (about 0.4 ms a message, 85 ms for 200), to
# rename and reformat fields our bodies never hold (they are plain JSON
# already, `payload`). Same path, auth, errors and stream classes.
_CHAT_PATH = "/chat/completions"

_FINISH_REASONS = {"function_call": "tool_calls"}


# -- request: our messages to the wire ---------------------------------------


def _system(m: Message) -> dict[str, Any]:
    return {"role": "system", "content": m.content}


def _user(m: Message) -> dict[str, Any]:
    return {"role": "user", "content": m.content}


def _assistant(m: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": "assistant", "content": m.content or None}
    if m.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                # Several servers reject an empty arguments string.
                "function": {"name": call.name, "arguments": call.arguments or "{}"},
            }
            for call in m.tool_calls
        ]
    return wire


def _tool(m: Message) -> dict[str, Any]:
    if not m.tool_call_id:
        raise ValueError("a TOOL message needs the tool_call_id of the call it answers")
    return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}


_TO_WIRE: Mapping[MessageRole, Callable[[Message], dict[str, Any]]] = {
    MessageRole.SYSTEM: _system,
    MessageRole.USER: _user,
    MessageRole.ASSISTANT: _assistant,
    MessageRole.TOOL: _tool,
}


def to_openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in Chat Completions form; roles map one to one."""
    return [_TO_WIRE[m.role](m) for m in messages]


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs in Chat Completions form."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


# -- response: chunks to our events -------------------------------------------


class ChunkReader:
    """Turns Chat Completions chunks into stream events, one chunk at a time.

    Usage and the finish reason are held back and emitted by `close()`, so
    the stream always ends with `Usage` (when the server sent any) and then
    `Finish`, whatever order the server used.
    """

    def __init__(self) -> None:
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._call_ids: list[str] = []  # in order of first appearance
        self._saw_calls = False

    def feed(self, chunk: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            # Some servers repeat a running total on every chunk: keep the last.
            self._usage = Usage(
                int(getattr(usage, "prompt_tokens", 0) or 0),
                int(getattr(usage, "completion_tokens", 0) or 0),
            )
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) not in (0, None):
                continue  # we ask for one choice; ignore any others
            delta = getattr(choice, "delta", None)
            if delta is not None:
                content = getattr(delta, "content", None)
                if content:
                    events.append(TextDelta(content))
                for call in getattr(delta, "tool_calls", None) or ():
                    events.append(self._call_piece(call))
            if getattr(choice, "finish_reason", None):
                self._finish = choice.finish_reason
        return events

    def _call_piece(self, call: Any) -> ToolCallDelta:
        self._saw_calls = True
        call_id = getattr(call, "id", None) or None
        index = getattr(call, "index", None)
        if index is None:
            # A few servers omit the index and send each call whole or with
            # its id first: number the calls by the order their ids appear.
            if call_id and call_id not in self._call_ids:
                self._call_ids.append(call_id)
            if not self._call_ids:
                raise StreamMalformed("a tool-call piece had neither an index nor an id")
            index = len(self._call_ids) - 1
        elif call_id and call_id not in self._call_ids:
            self._call_ids.append(call_id)
        function = getattr(call, "function", None)
        name = getattr(function, "name", None) if function is not None else None
        arguments = getattr(function, "arguments", None) if function is not None else None
        return ToolCallDelta(index=int(index), id=call_id, name=name or None, arguments=arguments or "")

    def close(self) -> list[StreamEvent]:
        if self._finish is None:
            raise StreamMalformed("the stream ended without a finish reason")
        reason = _FINISH_REASONS.get(self._finish, self._finish)
        # Some local servers say "stop" after emitting tool calls; the calls
        # are what the orchestrator must act on.
        if reason == "stop" and self._saw_calls:
            reason = "tool_calls"
        tail: list[StreamEvent] = [self._usage] if self._usage else []
        return [*tail, Finish(reason)]


# -- errors -------------------------------------------------------------------


def describe_openai_error(exc: BaseException) -> Failure | None:
    """A neutral description of an OpenAI SDK (or transport) exception."""
    if isinstance(exc, openai.APIStatusError):
        return failure_from_response(exc.status_code, exc.response.headers, exc.body, exc.message)
    if isinstance(exc, openai.APITimeoutError):
        return timeout_failure(exc)
    if isinstance(exc, openai.APIConnectionError):
        return connection_failure(exc)
    if isinstance(exc, openai.APIError):  # an error object inside the stream
        return failure_from_stream_error(exc.body, exc.message)
    return describe_transport(exc)


# -- the provider -------------------------------------------------------------


class OpenAICompatProvider:
    """A model behind a Chat Completions endpoint, streamed."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        context_window: int,
        max_output_tokens: int = 4096,
        temperature: float | None = None,
        policy: RetryPolicy | None = None,
        max_tokens_field: str = "max_tokens",
    ) -> None:
        self.name = endpoint.provider
        self.model = endpoint.model
        self.context_window = context_window
        self.endpoint = endpoint
        self._max_output_tokens = max_output_tokens
        self._temperature = temperature
        self._policy = policy or RetryPolicy()
        self._max_tokens_field = max_tokens_field
        self._client = openai.AsyncOpenAI(
            api_key=endpoint.api_key or _NO_KEY,
            base_url=endpoint.base_url,
            timeout=endpoint.timeout(),
            max_retries=0,  # ours is the only retry policy
        )

    def payload(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of the Chat Completions call for a request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            self._max_tokens_field: request.max_tokens or self._max_output_tokens,
        }
        if request.tools:
            body["tools"] = to_openai_tools(request.tools)
        if self._temperature is not None:
            body["temperature"] = self._temperature
        return body

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        """Stream the answer; closing or cancelling the iteration closes the response."""
        return stream_with_retry(
            lambda: self._attempt(request),
            endpoint=self.endpoint,
            policy=self._policy,
            describe=describe_openai_error,
        )

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        # Built here so that a request we cannot convert fails while iterating, like any other.
        response = await self._client.post(
            _CHAT_PATH, body=self.payload(request), cast_to=ChatCompletion,
            options={"security": {"bearer_auth": True}},
            stream=True, stream_cls=openai.AsyncStream[ChatCompletionChunk],
        )
        try:
            reader = ChunkReader()
            async for chunk in response:
                for event in reader.feed(chunk):
                    yield event
            for event in reader.close():
                yield event
        finally:
            await response.close()

    async def aclose(self) -> None:
        """Release the connection pool."""
        await self._client.close()
