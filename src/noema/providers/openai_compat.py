"""Any server that speaks OpenAI's Chat Completions, through the official SDK.

OpenAI, OpenRouter, DeepSeek, Ollama, llama.cpp, vLLM and LM Studio all
take the same request; they differ in what they send back at the edges
(usage, finish reasons, tool-call indexes), which `ChunkReader` absorbs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from .base import (
    AnswerSchema,
    BadRequest,
    EmptyAnswer,
    Finish,
    Message,
    MessageRole,
    ModelNotFound,
    ModelRequest,
    ProtocolViolation,
    ProviderError,
    SchemaStyle,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from .counting import PYTHON_SERVER_ROUTE, TOKENIZER_ROUTES, TokenizerRoute, Traffic, server_root
from .endpoint import Endpoint
from .entities import escape, unescaped
from .format_leaks import calls_from_leaks
from .failures import (
    Failure,
    FailureKind,
    StreamEndedEarly,
    StreamMalformed,
    connection_failure,
    describe_transport,
    failure_from_response,
    failure_from_stream_error,
    provider_error,
    timeout_failure,
)
from .retry import RetryPolicy, stream_with_retry

log = logging.getLogger(__name__)

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


def _text(m: Message) -> str:
    # Never null: llama.cpp's server (and others that validate the body)
    # refuse a null content, and a turn stored that way would make every
    # later request of the conversation fail the same way.
    return m.content or ""


def _system(m: Message) -> dict[str, Any]:
    return {"role": "system", "content": _text(m)}


def _user(m: Message) -> dict[str, Any]:
    return {"role": "user", "content": _text(m)}


def _assistant(m: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": "assistant", "content": _text(m)}
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
    return {"role": "tool", "tool_call_id": m.tool_call_id, "content": _text(m)}


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


def _json_schema_format(answer: AnswerSchema) -> dict[str, Any]:
    return {"type": "json_schema",
            "json_schema": {"name": answer.name, "schema": answer.schema, "strict": True}}


def _json_object_format(answer: AnswerSchema) -> dict[str, Any]:
    # llama.cpp's servers (C++ and Python) turn the schema into a grammar.
    return {"type": "json_object", "schema": answer.schema}


_RESPONSE_FORMATS: Mapping[SchemaStyle, Callable[[AnswerSchema], dict[str, Any]]] = {
    SchemaStyle.JSON_SCHEMA: _json_schema_format,
    SchemaStyle.JSON_OBJECT: _json_object_format,
}


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
            raise StreamEndedEarly("the stream ended without a finish reason")
        reason = _FINISH_REASONS.get(self._finish, self._finish)
        # Some local servers say "stop" after emitting tool calls; the calls
        # are what the orchestrator must act on.
        if reason == "stop" and self._saw_calls:
            reason = "tool_calls"
        tail: list[StreamEvent] = [self._usage] if self._usage else []
        return [*tail, Finish(reason)]


def completion_events(completion: Any) -> list[StreamEvent]:
    """The events of a whole (non-streamed) completion, in the order a stream
    would have sent them: text, calls, usage, finish."""
    choices = getattr(completion, "choices", None) or []
    choice = next((c for c in choices if getattr(c, "index", 0) in (0, None)), None)
    if choice is None:
        raise StreamMalformed("the answer held no choice")
    message = getattr(choice, "message", None)
    events: list[StreamEvent] = []
    text = getattr(message, "content", None) if message is not None else None
    if text:
        events.append(TextDelta(text))
    calls = (getattr(message, "tool_calls", None) if message is not None else None) or ()
    for index, call in enumerate(calls):
        function = getattr(call, "function", None)
        events.append(ToolCallDelta(
            index=index, id=getattr(call, "id", None) or None,
            name=getattr(function, "name", None) or None,
            arguments=getattr(function, "arguments", None) or "",
        ))
    usage = getattr(completion, "usage", None)
    if usage is not None:
        events.append(Usage(int(getattr(usage, "prompt_tokens", 0) or 0),
                            int(getattr(usage, "completion_tokens", 0) or 0)))
    finish = getattr(choice, "finish_reason", None)
    if not finish:
        raise StreamMalformed("the answer had no finish reason")
    reason = _FINISH_REASONS.get(finish, finish)
    if reason == "stop" and calls:
        reason = "tool_calls"
    events.append(Finish(reason))
    return events


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


def _broke_after_headers(exc: BaseException) -> bool:
    """A stream that was accepted, then ended or broke (but was not garbled):
    what a server does when it fails after sending the headers."""
    if isinstance(exc, StreamEndedEarly):
        return True
    failure = describe_openai_error(exc)
    return failure is not None and failure.kind is FailureKind.CONNECTION and not failure.connecting


# Endpoints (base URL, model) that cannot stream a tool call: llama.cpp's
# Python server accepts the streamed request, then fails once the model has
# chosen a tool (a 500 traceback in its log, "Automatic streaming tool choice
# is not supported"). Known before the first request when the server answers
# its own token-count route (which only that server has), else found out by
# the first such failure; remembered for the life of the process. Their
# tool-bearing requests are then sent whole.
_WHOLE_WHEN_TOOLS: set[tuple[str, str]] = set()

# Seconds without a first word before the person is told what the request
# waits for (a busy server, start-up checks), rather than left in silence;
# once answers have come, the wait must also be SILENCE_TIMES the usual one
# (a slow machine's usual wait is no news).
SILENCE_TOLD_S = 10.0
SILENCE_TIMES = 3.0

# Endpoints (base URL, model) found to HTML-escape what their model reads
# (True) or not (False), for the life of the process: see `entities.py`.
_ESCAPING: dict[tuple[str, str], bool] = {}

# Two texts the escaping check has the server count, in a chat and alone:
# escaped, the second grows by dozens of tokens more than as it is.
_PLAIN_SAMPLE = "Say it."
_MARKED_SAMPLE = "Say it." + ' "<&>" \'it\'' * 8


class _NothingSaid(Exception):
    """An answer that ended without words or a call (`finish`: its reason)."""

    def __init__(self, finish: str | None) -> None:
        super().__init__(finish)
        self.finish = finish


async def _unless_empty(
    events: AsyncGenerator[StreamEvent, None],
) -> AsyncGenerator[StreamEvent, None]:
    """Passes `events` on once they hold a call or words other than
    whitespace; an answer that ends before either raises `_NothingSaid`."""
    held: list[StreamEvent] = []
    said = False
    finish: str | None = None
    try:
        async for event in events:
            if not said:
                said = isinstance(event, ToolCallDelta) or (
                    isinstance(event, TextDelta) and bool(event.text.strip()))
                if isinstance(event, Finish):
                    finish = event.reason
                if not said:
                    held.append(event)
                    continue
                for earlier in held:
                    yield earlier
                held.clear()
            yield event
    finally:
        await events.aclose()
    if not said:
        raise _NothingSaid(finish)


class _Silence:
    """Tells the person, once, when a request has had no first word for longer
    than usual (`SILENCE_TOLD_S`, and `SILENCE_TIMES` the `usual` wait): what
    it waits for, in words (a warning, which a chat shows as its notice),
    instead of a silent wait until the timeout."""

    def __init__(self, endpoint: Endpoint, checking: bool, usual: float | None) -> None:
        self._endpoint = endpoint
        self._checking = checking  # the start-up checks of the server come first
        loop = asyncio.get_running_loop()
        self._started = loop.time()
        self.waited: float | None = None  # until the first word, once it came
        self._after = max(SILENCE_TOLD_S, SILENCE_TIMES * (usual or 0.0))
        self._timer: asyncio.TimerHandle | None = loop.call_later(self._after, self._tell)

    def checked(self) -> None:
        self._checking = False

    def end(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self.waited = asyncio.get_running_loop().time() - self._started

    def _tell(self) -> None:
        self._timer = None
        what = ("its start-up checks (how it counts and reads text)" if self._checking
                else "the first words of the answer")
        log.warning("%s has not answered in %.0f s; still waiting for %s. It may be busy "
                    "with an earlier request (one a closed chat left behind keeps llama.cpp's "
                    "Python server busy until it is done), still reading a long request, or "
                    "loading its model; a step with no answer for %.0f s gives up",
                    self._endpoint.where, self._after, what, self._endpoint.timeout_s)


# -- the provider -------------------------------------------------------------


class OpenAICompatProvider:
    """A model behind a Chat Completions endpoint, streamed.

    A request that offers tools to an endpoint that cannot stream tool calls
    is sent whole instead (see `_WHOLE_WHEN_TOOLS`): the answer then arrives
    as one piece, with the same events.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        context_window: int,
        max_output_tokens: int = 4096,
        temperature: float | None = None,
        policy: RetryPolicy | None = None,
        max_tokens_field: str = "max_tokens",
        may_escape: bool = False,
        schema_style: SchemaStyle = SchemaStyle.NONE,
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
            http_client=endpoint.http_client(openai.DefaultAsyncHttpxClient),
        )
        self._tokenizer: TokenizerRoute | None = None
        self._tokenizer_probed = False
        self._traffic = Traffic()
        self._may_escape = may_escape  # its server might escape what the model reads
        self.schema_style = schema_style  # how it is asked for an answer held to a schema
        self._checking = asyncio.Lock()
        self._usual_wait: float | None = None  # seconds to a first word, as usually seen

    @property
    def _key(self) -> tuple[str, str]:
        return (self.endpoint.base_url.rstrip("/"), self.model)

    @property
    def streams_tool_calls(self) -> bool:
        """False once this endpoint was found unable to stream a tool call."""
        return self._key not in _WHOLE_WHEN_TOOLS

    def payload(self, request: ModelRequest, *, stream: bool = True) -> dict[str, Any]:
        """The keyword arguments of the Chat Completions call for a request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.messages),
            "stream": stream,
            self._max_tokens_field: request.max_tokens or self._max_output_tokens,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = to_openai_tools(request.tools)
            # The API's default when tools are present, but some servers
            # (llama.cpp's Python server) leave the tools out of the prompt
            # unless asked, and the model can then never call one.
            body["tool_choice"] = "auto"
        if self._temperature is not None:
            body["temperature"] = self._temperature
        if request.answer_schema is not None and self.schema_style in _RESPONSE_FORMATS:
            body["response_format"] = _RESPONSE_FORMATS[self.schema_style](request.answer_schema)
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
        silence = _Silence(self.endpoint, self._checks_pending(), self._usual_wait)
        try:
            escaping = await self.reads_escaped()
            silence.checked()
            async with self._traffic.answering():
                events = self._attempt_unguarded(request)
                json_text = request.answer_schema is not None
                async for event in unescaped(events, json_text=json_text) if escaping else events:
                    if silence.waited is None:
                        silence.end()
                        self._learn_wait(silence.waited)
                    yield event
        finally:
            silence.end()

    def _learn_wait(self, waited: float | None) -> None:
        """The usual wait for a first word: a slow average of the waits seen."""
        if waited is not None:
            usual = self._usual_wait
            self._usual_wait = waited if usual is None else 0.7 * usual + 0.3 * waited

    def _checks_pending(self) -> bool:
        return self._may_escape and self._key not in _ESCAPING

    async def _attempt_unguarded(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        def arguments_for(name: str) -> Awaitable[str | None]:
            return self._named_call_arguments(request, name)

        try:
            async for event in _unless_empty(calls_from_leaks(self._answer(request),
                                                              arguments_for)):
                yield event
            return
        except _NothingSaid as nothing:
            finish = nothing.finish
            if not request.tools:
                raise self._empty(finish) from None
        # llama.cpp's Python server answers nothing at all whenever its model
        # picks words over a call (its grammar then allows only a call or the
        # end): asked again without tools, the model says what it meant to.
        log.info("%s answered a request with tools with nothing; asked again without tools",
                 self.endpoint.where)
        try:
            # Without tools the model may still write a call in its format's
            # words (it sees earlier calls written that way): made a call too.
            bare = self._answer(dataclasses.replace(request, tools=()))
            async for event in _unless_empty(calls_from_leaks(bare, arguments_for)):
                yield event
        except _NothingSaid as nothing:
            raise self._empty(nothing.finish or finish) from None

    def _empty(self, finish: str | None) -> EmptyAnswer:
        why = f" (it ended with {finish!r})" if finish and finish != "stop" else ""
        return EmptyAnswer(f"the model returned an empty answer{why}: {self.endpoint.where}, "
                           f"model {self.model!r}")

    async def _answer(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        if request.tools and not self.streams_tool_calls:
            for event in await self._whole(request):
                yield event
            return
        # Built here so that a request we cannot convert fails while iterating, like any other.
        response = await self._client.post(
            _CHAT_PATH, body=self.payload(request), cast_to=ChatCompletion,
            options={"security": {"bearer_auth": True}},
            stream=True, stream_cls=openai.AsyncStream[ChatCompletionChunk],
        )
        passed_on = False
        try:
            reader = ChunkReader()
            async for chunk in response:
                for event in reader.feed(chunk):
                    passed_on = True
                    yield event
            for event in reader.close():
                yield event
            return
        except Exception as exc:
            if passed_on or not _broke_after_headers(exc):
                raise
            # Asked whole, the same request gets the answer, or the error the
            # stream could not carry (llama.cpp's Python server fails a
            # request past its window that way, after the headers).
            if request.tools:
                _WHOLE_WHEN_TOOLS.add(self._key)
                log.info("%s accepted a streamed request with tools, then broke before its "
                         "first event; requests with tools go whole from now on",
                         self.endpoint.where)
            else:
                log.info("%s accepted a streamed request, then broke before its first event; "
                         "asked again whole", self.endpoint.where)
        finally:
            await response.close()
        for event in await self._whole(request, after_broken_stream=True):
            yield event

    async def _named_call_arguments(self, request: ModelRequest, name: str) -> str | None:
        """The arguments of a call to `name`, asked of the server by naming the
        tool (the model wrote the name alone in its format's words); None when
        the request did not offer it or the server gives none."""
        if not any(tool.name == name for tool in request.tools):
            return None
        body = self.payload(request, stream=False)
        body["tool_choice"] = {"type": "function", "function": {"name": name}}
        try:
            completion = await self._client.post(
                _CHAT_PATH, body=body, cast_to=ChatCompletion,
                options={"security": {"bearer_auth": True}})
        except openai.OpenAIError as exc:
            log.info("%s: asked for the arguments of %s by name, it failed: %s",
                     self.endpoint.where, name, exc)
            return None
        calls = [e for e in completion_events(completion) if isinstance(e, ToolCallDelta)]
        return calls[0].arguments or None if calls else None

    async def _whole(self, request: ModelRequest, *, after_broken_stream: bool = False,
                     ) -> list[StreamEvent]:
        async def send() -> ChatCompletion:
            return await self._client.post(
                _CHAT_PATH, body=self.payload(request, stream=False), cast_to=ChatCompletion,
                options={"security": {"bearer_auth": True}},
            )

        try:
            completion = await send()
        except openai.APIConnectionError:
            if not after_broken_stream:
                raise
            # The server hangs up the connection the broken stream came on a
            # moment after it ended; taken again from the pool, it fails
            # before any answer. Nothing reached the model: send it afresh.
            completion = await send()
        return completion_events(completion)

    # -- what the server can tell ------------------------------------------

    async def reads_escaped(self) -> bool:
        """Whether the server hands its model HTML-escaped text (llama.cpp's
        Python server does, for the chat format that shows tools): the
        model's answers are then unescaped (`entities.py`).

        Found out once per endpoint, for a provider that may meet such a
        server, with no guess from its name: the server counts two texts
        alone, as they are and escaped, and in two chat requests of one
        output token; the growth of the chat's prompt says which of the two
        the model read. Only llama.cpp's Python server is asked: the
        check needs its tokenizer route, and no other server is known to
        escape. A server that fails to answer is asked again next time.
        """
        if not self._may_escape:
            return False
        async with self._checking:
            if self._key not in _ESCAPING:
                try:
                    _ESCAPING[self._key] = await self._check_escaping()
                except (ProviderError, openai.OpenAIError) as exc:
                    log.info("%s: could not tell whether its model reads escaped text (%s)",
                             self.endpoint.where, exc)
                    return False
                if _ESCAPING[self._key]:
                    log.info("%s hands its model HTML-escaped text; its answers are unescaped",
                             self.endpoint.where)
            return _ESCAPING[self._key]

    async def _check_escaping(self) -> bool:
        samples = (_PLAIN_SAMPLE, _MARKED_SAMPLE)
        counts = await self.count_tokens([*samples, *map(escape, samples)])
        if counts is None or self._tokenizer is not PYTHON_SERVER_ROUTE:
            return False
        plain, marked, plain_escaped, marked_escaped = counts
        read = [await self._prompt_tokens(text) for text in samples]
        if None in read:
            return False
        grew = read[1] - read[0]
        return abs(grew - (marked_escaped - plain_escaped)) < abs(grew - (marked - plain))

    async def _prompt_tokens(self, text: str) -> int | None:
        """The prompt tokens the server counts for a chat of `text` alone."""
        body = {"model": self.model, "messages": [{"role": "user", "content": text}],
                "stream": False, self._max_tokens_field: 1}
        async with self._traffic.answering():
            completion = await self._client.post(
                _CHAT_PATH, body=body, cast_to=ChatCompletion,
                options={"security": {"bearer_auth": True}},
            )
        usage = getattr(completion, "usage", None)
        return getattr(usage, "prompt_tokens", None) if usage is not None else None

    async def count_tokens(self, texts: list[str]) -> list[int] | None:
        """Token counts of `texts` by the server's own tokenizer, or None when
        the server offers none.

        Asks llama.cpp's server (`POST /tokenize`) or llama.cpp's Python
        server (`POST /extras/tokenize/count`), whichever answers; the first
        call finds out which, and an endpoint that has neither is not asked
        again (None from then on, at no cost). A text is counted as the
        server tokenizes it alone, without the chat template around it.
        A count waits until no answer of this provider is streaming, and an
        answer waits for a count under way: llama.cpp's Python server cuts
        the answer it is generating short whenever another request
        arrives. Failures of the server are `ProviderError`s, like those of
        a request; an empty list is counted without asking.
        """
        if not texts:
            return []
        async with self._traffic.counting():
            counts: list[int] = []
            if not self._tokenizer_probed:
                first = await self._find_tokenizer(texts[0])
                if first is not None:
                    counts.append(first)
            if self._tokenizer is None:
                return None
            for text in texts[len(counts):]:
                counts.append(await self._count_with(self._tokenizer, text))
            return counts

    async def _find_tokenizer(self, sample: str) -> int | None:
        """Tries each known route on `sample`; the count from the one that answers.
        A server that could not be reached is asked again next time."""
        for tokenizer in TOKENIZER_ROUTES:
            try:
                count = await self._count_with(tokenizer, sample)
            except (BadRequest, ModelNotFound):
                continue  # not this server's route (404, 405…)
            self._tokenizer, self._tokenizer_probed = tokenizer, True
            if tokenizer is PYTHON_SERVER_ROUTE and self._key not in _WHOLE_WHEN_TOOLS:
                # That server cannot stream a call: known now, before any
                # request with tools could fail on its side.
                _WHOLE_WHEN_TOOLS.add(self._key)
                log.info("%s is llama.cpp's Python server, which cannot stream a tool call: "
                         "requests with tools go whole", self.endpoint.where)
            return count
        self._tokenizer_probed = True
        return None

    async def _count_with(self, tokenizer: TokenizerRoute, text: str) -> int:
        answer = await self._ask("post", tokenizer.path, tokenizer.body(text, self.model))
        count = tokenizer.count(answer)
        if count is None:
            raise ProtocolViolation(
                f"{self.endpoint.where} answered {tokenizer.path} without a token count"
            )
        return count

    async def _ask(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """One JSON request beside the chat endpoint (a path from the server's
        root, not under /v1), tried once: a count can wait for the next time."""
        url = server_root(self.endpoint.base_url) + path
        options: Any = {"security": {"bearer_auth": True}}
        try:
            if method == "get":
                return await self._client.get(url, cast_to=object, options=options)
            return await self._client.post(url, body=body, cast_to=object, options=options)
        except Exception as exc:
            failure = describe_openai_error(exc)
            if failure is None:
                raise
            raise provider_error(failure, self.endpoint, attempts=1, mid_stream=False) from exc

    async def aclose(self) -> None:
        """Release the connection pool."""
        await self._client.close()
