"""What real OpenAI-compatible servers do that the API does not say: a tool
call that cannot be streamed, a 500 that judges the request, error bodies
of dozens of lines, a tokenizer behind a route of its own, empty answers."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noema.providers.base import (
    BadRequest,
    Finish,
    ProviderUnavailable,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from noema.providers.failures import is_deterministic, one_line, server_window
from tests.fakes import FakeFailure, FakeOpenAIServer, FakeReply
from tests.fakes.script import FakeToolCall

from .conftest import Rig, SleepRecorder, simple_request

WRITE = ToolSpec("file_write", "Write a file.", {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
})
_models = itertools.count(1)

# What llama.cpp's Python server sends for a null content: pydantic's
# report and the server's traceback, as the message of a 500.
VALIDATION_500 = (
    "2 validation errors for ChatCompletionRequestAssistantMessage\n"
    "messages.1.content\n"
    "  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]\n"
    "    For further information visit https://errors.pydantic.dev/2.11/v/string_type\n"
    "messages.1.name\n"
    "  Field required [type=missing, input_value={'role': 'assistant'}, input_type=dict]\n"
    "Traceback (most recent call last):\n"
    '  File "/srv/llama_cpp/server/errors.py", line 170, in custom_route_handler\n'
    "    response = await original_route_handler(request)\n"
    "pydantic_core._pydantic_core.ValidationError: 2 validation errors\n"
)


# What that server really answers to the same history: FastAPI's report of
# a body that matches none of the message types, one dict a line.
FASTAPI_500 = (
    "3 validation errors:\n"
    "  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestSystemMessage',"
    " 'role'), 'msg': \"Input should be 'system'\", 'input': 'assistant'}\n"
    "  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage',"
    " 'content'), 'msg': 'Input should be a valid string', 'input': None}\n"
    "  {'type': 'missing', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage',"
    " 'tool_call_id'), 'msg': 'Field required', 'input': {'role': 'assistant'}}\n"
    "\n  File \"/srv/llama_cpp/server/app.py\", line 376, in create_chat_completion\n"
    "    POST /v1/chat/completions\n"
)


def a_model() -> str:
    # Each test its own endpoint: what a server cannot do is remembered per process.
    return f"model-{next(_models)}"


async def events_of(provider, request) -> list:
    return [e async for e in provider.stream(request)]


async def test_a_tool_call_that_cannot_be_streamed_is_asked_for_whole_once_and_then_always(
    openai_rig: Rig, sleeps: SleepRecorder,
) -> None:
    call = FakeToolCall("file_write", '{"path": "a.txt", "content": "hi"}', id="call_7")
    # Accepted, then the connection ends before any event: what llama.cpp's
    # Python server does when the model picks a tool in a streamed request.
    openai_rig.server.script(FakeReply(tool_calls=(call,), cut="drop", cut_after=0),
                             FakeReply(tool_calls=(call,)), FakeReply(tool_calls=(call,)),
                             FakeReply(text="plain words"))
    provider = openai_rig.make(model=a_model())
    request = simple_request("write it", tools=(WRITE,))

    first = await events_of(provider, request)
    second = await events_of(provider, request)
    untooled = await events_of(provider, simple_request("just talk"))

    calls = [e for e in first if isinstance(e, ToolCallDelta)]
    assert calls == [ToolCallDelta(0, "call_7", "file_write", '{"path": "a.txt", "content": "hi"}')]
    assert first[-1] == Finish("tool_calls") and second == first
    assert [r.body["stream"] for r in openai_rig.server.requests] == [True, False, False, True]
    assert "stream_options" not in openai_rig.server.requests[1].body
    assert all(r.body.get("tool_choice") == "auto" for r in openai_rig.server.requests[:3])
    assert "".join(e.text for e in untooled if isinstance(e, TextDelta)) == "plain words"
    assert sleeps.waits == []  # a different way of asking, not a retry
    assert not provider.streams_tool_calls


async def test_a_stream_broken_after_it_started_is_not_taken_for_that(openai_rig: Rig) -> None:
    call = FakeToolCall("file_write", '{"path": "a.txt"}')
    openai_rig.server.script(FakeReply(text="I will write", tool_calls=(call,), cut="drop", cut_after=2))
    provider = openai_rig.make(model=a_model(), max_retries=0)

    with pytest.raises(ProviderUnavailable, match="broke off after it had started"):
        await events_of(provider, simple_request("write", tools=(WRITE,)))
    assert provider.streams_tool_calls
    assert len(openai_rig.server.requests) == 1


async def test_a_request_without_tools_broken_after_the_headers_is_asked_whole_once(
    openai_rig: Rig, sleeps: SleepRecorder,
) -> None:
    # llama.cpp's Python server fails a streamed request past its window
    # after the headers; asked whole, it says why (here: a plain answer).
    openai_rig.server.script(FakeReply(text="x", cut="drop", cut_after=0), FakeReply(text="fine"),
                             FakeReply(text="streamed again"))
    provider = openai_rig.make(model=a_model())

    events = await events_of(provider, simple_request("hi"))
    again = await events_of(provider, simple_request("hi"))

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "fine"
    assert "".join(e.text for e in again if isinstance(e, TextDelta)) == "streamed again"
    assert [r.body["stream"] for r in openai_rig.server.requests] == [True, False, True]
    assert sleeps.waits == [] and provider.streams_tool_calls


async def test_the_error_a_broken_stream_could_not_carry_comes_from_the_whole_request(
    openai_rig: Rig, sleeps: SleepRecorder,
) -> None:
    openai_rig.server.script(
        FakeReply(text="x", cut="drop", cut_after=0),
        FakeFailure(400, "This model's maximum context length is 2048 tokens.",
                    code="context_length_exceeded"))
    provider = openai_rig.make(model=a_model())

    with pytest.raises(BadRequest) as caught:
        await events_of(provider, simple_request("a lot"))
    assert caught.value.server_window == 2048 and sleeps.waits == []


async def test_a_500_that_judges_the_request_is_not_retried_and_reads_as_one_line(
    openai_rig: Rig, sleeps: SleepRecorder,
) -> None:
    openai_rig.server.default = FakeFailure(500, VALIDATION_500)
    provider = openai_rig.make(model=a_model())

    with pytest.raises(BadRequest) as caught:
        await events_of(provider, simple_request())

    message = str(caught.value)
    assert len(openai_rig.server.requests) == 1 and sleeps.waits == []
    assert "\n" not in message and "Traceback" not in message
    assert ("HTTP 500): 2 validation errors for ChatCompletionRequestAssistantMessage: "
            "messages.1.content: Input should be a valid string (and 1 more)") in message


async def test_the_report_a_real_server_sends_reads_as_its_telling_line(
    openai_rig: Rig, sleeps: SleepRecorder,
) -> None:
    openai_rig.server.default = FakeFailure(500, FASTAPI_500)

    with pytest.raises(BadRequest) as caught:
        await events_of(openai_rig.make(model=a_model()), simple_request())

    assert len(openai_rig.server.requests) == 1 and sleeps.waits == []
    assert str(caught.value).endswith(
        "(HTTP 500): 3 validation errors: messages.2.ChatCompletionRequestAssistantMessage.content: "
        "Input should be a valid string (and 2 more)")


async def test_a_plain_500_is_still_retried(openai_rig: Rig, sleeps: SleepRecorder) -> None:
    openai_rig.server.script(FakeFailure(500, "CUDA out of memory"), FakeReply(text="ok"))

    events = await events_of(openai_rig.make(model=a_model()), simple_request())

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "ok"
    assert len(sleeps.waits) == 1


async def test_a_refusal_naming_the_window_says_what_to_set(openai_rig: Rig) -> None:
    openai_rig.server.default = FakeFailure(
        400, "This model's maximum context length is 8192 tokens. However, you requested "
             "9000 tokens (8000 in the messages, 1000 in the completion).",
        code="context_length_exceeded")
    provider = openai_rig.make(model=a_model(), context_window=32_768)

    with pytest.raises(BadRequest) as caught:
        await events_of(provider, simple_request())

    assert caught.value.server_window == 8192
    assert "set the model's context_window to 8192" in str(caught.value)


@pytest.mark.parametrize(("status", "message", "code", "expected"), [
    (400, "bad parameter", None, True),
    (404, "no such model", None, True),
    (422, "unprocessable", None, True),
    (408, "request timeout", None, False),
    (409, "conflict", None, False),
    (429, "slow down", None, False),
    (500, "CUDA out of memory", None, False),
    (500, "1 validation error for Foo\nx\n  Field required [type=missing]", None, True),
    (500, "something", "invalid_request_error", True),
    (500, "something", "internal_server_error", False),
    (502, "1 validation error for Foo", None, False),  # a gateway's word, not the model's
    (503, "overloaded", None, False),
])
def test_what_will_not_change_on_a_second_try(status, message, code, expected) -> None:
    assert is_deterministic(status, message, code) is expected


def test_server_window_reads_the_usual_wordings() -> None:
    assert server_window("This model's maximum context length is 4096 tokens.") == 4096
    assert server_window("Requested tokens (9000) exceed context window of 8192") == 8192
    assert server_window("the model is overloaded") is None


@given(st.text(max_size=2000))
def test_one_line_is_always_one_bounded_line(text: str) -> None:
    line = one_line(text)
    assert "\n" not in line and "\r" not in line
    assert 0 < len(line) <= 240
    assert line == line.strip()


def test_one_line_keeps_a_short_message_as_it_is() -> None:
    assert one_line("the model is overloaded") == "the model is overloaded"
    assert one_line("a\n\n  b\tc") == "a b c"


# -- routes beside the chat endpoint ---------------------------------------------


class LlamaServerShapes(FakeOpenAIServer):
    """Answers the tokenize routes of llama.cpp's own server (`/tokenize`)
    or of its Python server (`/extras/tokenize/count`), as told."""

    def __init__(self, routes: dict[str, Any]) -> None:
        super().__init__()
        self.routes = routes

    async def _app(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in self.routes:
            raw = b""
            while True:
                message = await receive()
                raw += message.get("body", b"")
                if not message.get("more_body"):
                    break
            answer = self.routes[scope["path"]](json.loads(raw) if raw else None)
            data = json.dumps(answer).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": data})
            return
        await super()._app(scope, receive, send)


def words(text: str) -> list[str]:
    return text.split()


async def test_token_counts_from_llama_cpp_servers_tokenize_route(openai_rig: Rig) -> None:
    routes: dict[str, Any] = {"/tokenize": lambda body: {"tokens": list(range(len(words(body["content"]))))}}
    with LlamaServerShapes(routes) as server:
        provider = openai_rig.make(base_url=server.base_url, model=a_model())
        assert await provider.count_tokens(["one two three", "", "four five"]) == [3, 0, 2]
        assert await provider.count_tokens([]) == []


async def test_token_counts_from_the_python_servers_count_route(openai_rig: Rig) -> None:
    seen: list[Any] = []

    def count(body: Any) -> dict:
        seen.append(body)
        return {"count": len(words(body["input"]))}

    with LlamaServerShapes({"/extras/tokenize/count": count}) as server:
        model = a_model()
        provider = openai_rig.make(base_url=server.base_url, model=model)
        assert await provider.count_tokens(["a b", "c d e"]) == [2, 3]
    assert seen[-1] == {"input": "c d e", "model": model}


async def test_no_tokenizer_means_none_and_is_not_asked_again(openai_rig: Rig) -> None:
    provider = openai_rig.make(model=a_model())

    assert await provider.count_tokens(["hello"]) is None
    asked = len(openai_rig.server.requests)
    assert await provider.count_tokens(["hello again"]) is None
    assert len(openai_rig.server.requests) == asked  # found out once


async def test_a_tokenizer_answering_nonsense_is_their_fault(openai_rig: Rig) -> None:
    from noema.providers.base import ProtocolViolation

    routes = {"/tokenize": lambda body: {"tokens": "many"}, "/extras/tokenize/count": lambda body: {}}
    with LlamaServerShapes(routes) as server:
        provider = openai_rig.make(base_url=server.base_url, model=a_model())
        with pytest.raises(ProtocolViolation, match="without a token count"):
            await provider.count_tokens(["x"])


# -- empty answers -----------------------------------------------------------------


async def test_an_empty_answer_to_a_request_with_tools_is_asked_again_without_them(
    openai_rig: Rig, sleeps: SleepRecorder,
) -> None:
    # llama.cpp's Python server, when its model picks words over a call.
    openai_rig.server.script(FakeReply(text=""), FakeReply(text="Hello there."))
    provider = openai_rig.make(model=a_model())

    events = await events_of(provider, simple_request("hi", tools=(WRITE,)))

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello there."
    first, second = openai_rig.server.requests
    assert "tools" in first.body and "tools" not in second.body and "tool_choice" not in second.body
    assert second.body["messages"] == first.body["messages"]
    assert sleeps.waits == []


async def test_an_empty_answer_is_said_to_be_one_and_not_retried(
    openai_rig: Rig, sleeps: SleepRecorder,
) -> None:
    from noema.providers.base import EmptyAnswer

    openai_rig.server.default = FakeReply(text="  \n")
    provider = openai_rig.make(model=a_model())

    with pytest.raises(EmptyAnswer, match="the model returned an empty answer"):
        await events_of(provider, simple_request("hi"))
    assert len(openai_rig.server.requests) == 1

    with pytest.raises(EmptyAnswer, match="empty answer \\(it ended with 'length'\\)"):
        openai_rig.server.default = FakeReply(text="", finish_reason="length")
        await events_of(provider, simple_request("hi", tools=(WRITE,)))
    assert len(openai_rig.server.requests) == 3 and sleeps.waits == []


async def test_leading_blank_pieces_are_kept_once_words_follow(openai_rig: Rig) -> None:
    openai_rig.server.script(FakeReply(text="\n\nAnswer follows"))

    events = await events_of(openai_rig.make(model=a_model()), simple_request("hi"))

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "\n\nAnswer follows"


async def test_a_count_waits_for_the_answer_being_streamed(openai_rig: Rig) -> None:
    # llama.cpp's Python server cuts an answer short when another request
    # arrives; a count asked meanwhile must reach it only after the answer.
    import asyncio

    seen_after: list[int] = []
    holder: dict[str, LlamaServerShapes] = {}

    def count(body: Any) -> dict:
        seen_after.append(holder["server"].completed)
        return {"count": 1}

    with LlamaServerShapes({"/extras/tokenize/count": count}) as server:
        holder["server"] = server
        server.tokens_per_second = 50
        server.script(FakeReply(text="one two three four five six seven eight"))
        provider = openai_rig.make(base_url=server.base_url, model=a_model())
        stream = provider.stream(simple_request("count while I talk"))
        first = await anext(stream)
        assert isinstance(first, TextDelta)
        counting = asyncio.create_task(provider.count_tokens(["x"]))
        rest = [event async for event in stream]
        assert await counting == [1]
    assert rest[-1] == Finish("stop")
    assert seen_after == [1]  # the stream had completed when the count arrived


# -- a chat template that escapes what the model reads --------------------------


def _counted(text: str) -> int:
    return len(text)  # this fake's tokenizer: a token a character


def _escaping_check_replies(escaping: bool) -> list[FakeReply]:
    """The two one-token answers of the check: prompts as the server counts
    them, a template of 20 tokens around the text, escaped or as it is."""
    from noema.providers.entities import escape
    from noema.providers.openai_compat import _MARKED_SAMPLE, _PLAIN_SAMPLE

    seen = escape if escaping else (lambda text: text)
    return [FakeReply(text="ok", input_tokens=20 + _counted(seen(sample)))
            for sample in (_PLAIN_SAMPLE, _MARKED_SAMPLE)]


@pytest.mark.parametrize("escaping", [True, False])
async def test_a_server_whose_model_reads_escaped_text_is_answered_in_real_text(
    openai_rig: Rig, escaping: bool,
) -> None:
    count = {"/extras/tokenize/count": lambda body: {"count": _counted(body["input"])}}
    with LlamaServerShapes(count) as server:
        server.script(*_escaping_check_replies(escaping), FakeReply(
            text="She said &#34;hi&#34; &amp; left",
            tool_calls=(FakeToolCall("file_write", json.dumps(
                {"path": "a.html", "content": "&lt;b&gt;&#34;x&#34; &amp;amp;&lt;/b&gt;"})),),
        ))
        provider = openai_rig.make(provider="llamacpp", base_url=server.base_url,
                                   model=a_model(), context_window=8192)
        events = await events_of(provider, simple_request(tools=(WRITE,)))
        assert await provider.reads_escaped() is escaping
        checks = [r for r in server.requests if r.path.endswith("/chat/completions")][:2]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    arguments = json.loads("".join(e.arguments for e in events if isinstance(e, ToolCallDelta)))
    assert [c.body["max_tokens"] for c in checks] == [1, 1]
    if escaping:
        assert text == 'She said "hi" & left'
        assert arguments["content"] == '<b>"x" &amp;</b>'
    else:  # a server that escapes nothing: the model's entities are its own
        assert text == "She said &#34;hi&#34; &amp; left"
        assert arguments["content"] == "&lt;b&gt;&#34;x&#34; &amp;amp;&lt;/b&gt;"


async def test_only_a_provider_that_may_meet_an_escaping_server_checks(openai_rig: Rig) -> None:
    count = {"/extras/tokenize/count": lambda body: {"count": _counted(body["input"])}}
    with LlamaServerShapes(count) as server:
        server.script(FakeReply(text="A &#34;quote&#34;."))
        provider = openai_rig.make(base_url=server.base_url, model=a_model())
        events = await events_of(provider, simple_request())
        assert len(server.requests) == 1  # the answer alone: nothing counted, nothing checked
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "A &#34;quote&#34;."
