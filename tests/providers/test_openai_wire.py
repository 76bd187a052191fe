"""Chat Completions conversion and chunk reading, as pure functions."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from noema.providers.base import (
    Finish,
    Message,
    MessageRole,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from noema.providers.failures import StreamMalformed
from noema.providers.openai_compat import ChunkReader, to_openai_messages, to_openai_tools


def test_messages_map_one_to_one() -> None:
    call = ToolCall("call_1", "read_file", "")
    wire = to_openai_messages([
        Message(MessageRole.SYSTEM, "be brief"),
        Message(MessageRole.USER, "open it"),
        Message(MessageRole.ASSISTANT, "", tool_calls=(call,)),
        Message(MessageRole.TOOL, "contents", tool_call_id="call_1", tool_name="read_file"),
        Message(MessageRole.ASSISTANT, "done"),
    ])

    assert wire == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "open it"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "contents"},
        {"role": "assistant", "content": "done"},
    ]


def test_content_is_never_null_even_for_a_history_stored_with_none() -> None:
    # Turns written before content was always a string come back as None;
    # a validating server refuses null and the whole conversation with it.
    call = ToolCall("call_1", "read_file", "{}")
    wire = to_openai_messages([
        Message(MessageRole.SYSTEM, None),  # type: ignore[arg-type]
        Message(MessageRole.USER, None),  # type: ignore[arg-type]
        Message(MessageRole.ASSISTANT, None, tool_calls=(call,)),  # type: ignore[arg-type]
        Message(MessageRole.TOOL, None, tool_call_id="call_1"),  # type: ignore[arg-type]
    ])

    assert [m["content"] for m in wire] == ["", "", "", ""]


def test_a_tool_message_without_its_call_id_is_our_bug() -> None:
    with pytest.raises(ValueError, match="tool_call_id"):
        to_openai_messages([Message(MessageRole.TOOL, "orphan")])


def test_tools_are_functions() -> None:
    spec = ToolSpec("t", "does t", {"type": "object", "properties": {}})

    assert to_openai_tools([spec]) == [
        {"type": "function", "function": {"name": "t", "description": "does t", "parameters": spec.parameters}}
    ]


def chunk(content=None, calls=None, finish=None, usage=None, index=0):
    choices = [] if content is None and calls is None and finish is None else [
        NS(index=index, delta=NS(content=content, tool_calls=calls), finish_reason=finish)
    ]
    return NS(choices=choices, usage=usage)


def piece(index, id=None, name=None, arguments=None):
    return NS(index=index, id=id, function=NS(name=name, arguments=arguments))


def test_interleaved_calls_keep_their_indexes() -> None:
    reader = ChunkReader()
    events = []
    for c in (
        chunk(calls=[piece(0, "a", "first", ""), piece(1, "b", "second", "")]),
        chunk(calls=[piece(1, arguments='{"y":'), piece(0, arguments='{"x":')]),
        chunk(calls=[piece(0, arguments="1}"), piece(1, arguments="2}")]),
        chunk(finish="tool_calls"),
    ):
        events += reader.feed(c)
    events += reader.close()

    assert [e for e in events if isinstance(e, ToolCallDelta) and e.index == 1] == [
        ToolCallDelta(1, "b", "second", ""), ToolCallDelta(1, None, None, '{"y":'),
        ToolCallDelta(1, None, None, "2}"),
    ]
    assert events[-1] == Finish("tool_calls")


def test_calls_without_an_index_are_numbered_by_their_ids() -> None:
    reader = ChunkReader()
    first = reader.feed(chunk(calls=[NS(index=None, id="a", function=NS(name="f", arguments="{}"))]))
    second = reader.feed(chunk(calls=[NS(index=None, id="b", function=NS(name="g", arguments="{}"))]))

    assert first[0].index == 0 and second[0].index == 1


def test_usage_and_finish_come_last_whatever_the_server_order() -> None:
    reader = ChunkReader()
    events = reader.feed(chunk("Hi", finish="stop", usage=NS(prompt_tokens=3, completion_tokens=1)))
    events += reader.feed(chunk(usage=NS(prompt_tokens=3, completion_tokens=2)))  # running total
    events += reader.close()

    assert events == [TextDelta("Hi"), Usage(3, 2), Finish("stop")]


def test_other_choices_are_ignored() -> None:
    reader = ChunkReader()

    assert reader.feed(chunk("not ours", index=1)) == []


def test_stop_after_tool_calls_is_reported_as_tool_calls() -> None:
    reader = ChunkReader()
    reader.feed(chunk(calls=[piece(0, "a", "f", "{}")], finish="stop"))

    assert reader.close() == [Finish("tool_calls")]


def test_a_stream_without_a_finish_reason_is_malformed() -> None:
    reader = ChunkReader()
    reader.feed(chunk("half an answer"))

    with pytest.raises(StreamMalformed, match="finish reason"):
        reader.close()


def test_calls_without_ids_still_turn_stop_into_tool_calls() -> None:
    reader = ChunkReader()
    reader.feed(chunk(calls=[piece(0, None, "f", "{}")], finish="stop"))

    assert reader.close() == [Finish("tool_calls")]


async def test_the_sdk_transform_we_skip_would_leave_our_body_as_it_is() -> None:
    # The provider posts its body without the SDK's typed transform (it costs
    # ~0.4 ms a message); this holds only while the transform changes nothing.
    from openai._utils._transform import async_maybe_transform
    from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

    from noema.providers.base import ModelRequest
    from noema.providers.catalog import build_provider
    from noema.providers.settings import ModelSettings

    settings = ModelSettings(provider="openai-compatible", model="m", temperature=0.2,
                             base_url="http://127.0.0.1:9/v1")
    provider = build_provider(settings, {})
    call = ToolCall("call_1", "read_file", '{"path": "a.md"}')
    body = provider.payload(ModelRequest(
        messages=(
            Message(MessageRole.SYSTEM, "be brief"),
            Message(MessageRole.USER, "open it"),
            Message(MessageRole.ASSISTANT, "opening", tool_calls=(call,)),
            Message(MessageRole.TOOL, "contents", tool_call_id="call_1", tool_name="read_file"),
            Message(MessageRole.ASSISTANT, "done"),
        ),
        tools=(ToolSpec("read_file", "Read a file.", {
            "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"],
        }),),
        max_tokens=50,
    ))
    try:
        assert await async_maybe_transform(body, CompletionCreateParamsStreaming) == body
    finally:
        await provider.aclose()
