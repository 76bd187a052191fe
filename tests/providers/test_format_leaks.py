"""A tool call the model wrote as words is made a call, never shown as the
answer; llama.cpp's Python server is known not to stream calls before it
fails on one; a silent server is said to be waited for."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noema.providers import openai_compat
from noema.providers.base import Finish, TextDelta, ToolCallDelta, ToolSpec, Usage
from noema.providers.format_leaks import FormatLeak, LeakedCall, calls_from_leaks, read_leak
from tests.fakes import FakeReply
from tests.fakes.script import FakeToolCall

from .conftest import Rig, simple_request
from .test_server_quirks import LlamaServerShapes, a_model, events_of

ENABLE = ToolSpec("enable_tools", "Enable tool groups.", {
    "type": "object", "properties": {"groups": {"type": "array", "items": {"type": "string"}}},
    "required": ["groups"]})


def test_each_known_format_reads_as_its_calls():
    assert read_leak("functions.enable_tools:") == [LeakedCall("enable_tools", None)]
    assert read_leak('functions.file_read:\n{"path": "a"}\nfunctions.file_read:\n{"path": "b"}') \
        == [LeakedCall("file_read", '{"path": "a"}'), LeakedCall("file_read", '{"path": "b"}')]
    assert read_leak('<tool_call>\n{"name": "x", "arguments": {"a": 1}}\n</tool_call>') \
        == [LeakedCall("x", '{"a": 1}')]
    assert read_leak('[TOOL_CALLS] [{"name": "x", "arguments": {"a": 1}}]') \
        == [LeakedCall("x", '{"a": 1}')]
    assert read_leak('<|python_tag|>{"name": "x", "parameters": {"a": 1}}') \
        == [LeakedCall("x", '{"a": 1}')]
    assert read_leak("Just words.") is None
    with pytest.raises(FormatLeak, match="could not be read as a call"):
        read_leak("functions.x: and then some prose")
    with pytest.raises(FormatLeak):
        read_leak("<tool_call>{not json}</tool_call>")


async def _through(pieces: list[str], arguments_for=None) -> list:
    async def answer():
        for piece in pieces:
            yield TextDelta(piece)
        yield Finish("stop")
        yield Usage(5, 3)

    return [e async for e in calls_from_leaks(answer(), arguments_for)]


async def test_the_chatml_format_s_words_become_a_call_with_arguments_asked_by_name():
    asked: list[str] = []

    async def arguments_for(name: str) -> str:
        asked.append(name)
        return '{"groups": ["mail"]}'

    events = await _through(["functions.enable", "_tools:"], arguments_for)
    assert events == [Usage(5, 3), ToolCallDelta(0, None, "enable_tools", '{"groups": ["mail"]}'),
                      Finish("tool_calls")]
    assert asked == ["enable_tools"]


async def test_words_before_a_call_stream_and_prose_that_only_looks_like_one_stays_prose():
    events = await _through(["Let me look.\n", "functions.file_read:\n", '{"path": "a"}'])
    assert events[0] == TextDelta("Let me look.\n")
    assert events[-2:] == [ToolCallDelta(0, None, "file_read", '{"path": "a"}'),
                           Finish("tool_calls")]
    prose = await _through(["The file ", "functions.py defines it; ", "functions. are fun"])
    assert "".join(e.text for e in prose if isinstance(e, TextDelta)) == \
        "The file functions.py defines it; functions. are fun"
    assert prose[-1] == Finish("stop")


async def test_a_format_s_words_that_are_no_readable_call_are_an_error_not_an_answer():
    with pytest.raises(FormatLeak):
        await _through(["functions.enable_tools: please enable mail"])


@given(st.lists(st.text(alphabet=st.sampled_from("abc .:\n{}_-fu<>[]|"), max_size=12),
                max_size=8))
def test_an_answer_with_no_call_in_it_passes_whole(pieces):
    text = "".join(pieces)
    try:
        leaked = read_leak(text[text.find("functions."):]) if "functions." in text else None
    except FormatLeak:
        leaked = "unreadable"
    if leaked is not None or any(m in text for m in ("<tool_call>", "[TOOL_CALLS]",
                                                       "<|python_tag|>")):
        return  # those are the other tests' cases
    try:
        events = asyncio.run(_through(pieces))
    except FormatLeak:
        # Only a line that begins like a call in the chatml format is held.
        assert any(line.lstrip(" \t").startswith("functions.") for line in text.split("\n"))
        return
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text
    assert events[-1] == Finish("stop")


# -- through the provider, against a server that behaves like llama.cpp's Python one ------


async def test_the_format_s_words_from_the_server_become_a_call_never_the_answer(
        openai_rig: Rig) -> None:
    # The chatml-function-calling format's reply when the model chose to
    # speak and its grammar forced a name: the name as the answer's text.
    openai_rig.server.script(
        FakeReply(text="functions.enable_tools:"),
        FakeReply(tool_calls=(FakeToolCall("enable_tools", '{"groups": ["mail"]}'),)))
    provider = openai_rig.make(model=a_model())

    events = await events_of(provider, simple_request("read my mail", tools=(ENABLE,)))

    assert not [e for e in events if isinstance(e, TextDelta)]
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == \
        [("enable_tools", {"groups": ["mail"]})]
    assert events[-1] == Finish("tool_calls")
    first, second = openai_rig.server.requests
    assert second.body["tool_choice"] == {"type": "function",
                                          "function": {"name": "enable_tools"}}
    assert second.body["stream"] is False


def _python_server_count(body: Any) -> dict:
    return {"count": len(body["input"].split())}


async def test_llama_cpp_s_python_server_gets_requests_with_tools_whole_from_the_first(
        openai_rig: Rig) -> None:
    with LlamaServerShapes({"/extras/tokenize/count": _python_server_count}) as server:
        call = FakeToolCall("enable_tools", '{"groups": ["mail"]}')
        # The escaping check's two one-token chats, then the answer.
        server.script(FakeReply(text="x", input_tokens=9), FakeReply(text="x", input_tokens=12),
                      FakeReply(tool_calls=(call,)))
        provider = openai_rig.make(provider="llamacpp", base_url=server.base_url,
                                   model=a_model(), context_window=8192)
        events = await events_of(provider, simple_request("read my mail", tools=(ENABLE,)))
        chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert [c.name for c in events if isinstance(c, ToolCallDelta)] == ["enable_tools"]
    # Never a streamed request with tools: the server never fails on one.
    assert [r.body["stream"] for r in chats if "tools" in r.body] == [False]
    assert not provider.streams_tool_calls


async def test_a_server_silent_for_long_is_said_to_be_waited_for(
        openai_rig: Rig, monkeypatch, caplog) -> None:
    monkeypatch.setattr(openai_compat, "SILENCE_TOLD_S", 0.05)

    def slow_count(body: Any) -> dict:
        time.sleep(0.4)  # busy with a request an earlier chat left behind
        return _python_server_count(body)

    with LlamaServerShapes({"/extras/tokenize/count": slow_count}) as server:
        server.script(FakeReply(text="x"), FakeReply(text="x"), FakeReply(text="Hello."))
        provider = openai_rig.make(provider="llamacpp", base_url=server.base_url,
                                   model=a_model(), context_window=8192)
        with caplog.at_level(logging.WARNING, logger="noema.providers.openai_compat"):
            events = await events_of(provider, simple_request("hi"))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello."
    told = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(told) == 1
    assert "has not answered in 0 s; still waiting for its start-up checks" in told[0]
    assert "busy with an earlier request" in told[0]
