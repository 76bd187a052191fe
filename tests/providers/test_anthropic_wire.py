"""Messages API conversion (role rules) and event reading, as pure functions."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noema.providers.anthropic_native import EventReader, to_anthropic, to_anthropic_tools
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

S, U, A, T = MessageRole.SYSTEM, MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL


def test_system_messages_become_the_system_parameter() -> None:
    system, messages = to_anthropic([Message(S, "identity"), Message(S, "rules"), Message(U, "hi")])

    assert system == "identity\n\nrules"
    assert messages == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_no_system_text_means_no_system_parameter() -> None:
    assert to_anthropic([Message(S, "  "), Message(U, "hi")])[0] is None


def test_assistant_text_and_calls_become_blocks() -> None:
    calls = (ToolCall("t1", "read", '{"path": "a.md"}'), ToolCall("t2", "grep", "{not json"))
    _, messages = to_anthropic([Message(U, "go"), Message(A, "Reading.", tool_calls=calls)])

    assert messages[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.md"}},
        {"type": "tool_use", "id": "t2", "name": "grep", "input": {}},
    ]}


def test_consecutive_tool_results_and_a_following_user_message_share_one_user_message() -> None:
    calls = (ToolCall("t1", "read", "{}"), ToolCall("t2", "grep", "{}"))
    _, messages = to_anthropic([
        Message(U, "go"),
        Message(A, "", tool_calls=calls),
        Message(T, "file text", tool_call_id="t1"),
        Message(T, "Error: no match", tool_call_id="t2", is_error=True),
        Message(U, "and also check b.md"),
    ])

    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [  # no empty text block
        {"type": "tool_use", "id": "t1", "name": "read", "input": {}},
        {"type": "tool_use", "id": "t2", "name": "grep", "input": {}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "is_error": False, "content": "file text"},
        {"type": "tool_result", "tool_use_id": "t2", "is_error": True, "content": "Error: no match"},
        {"type": "text", "text": "and also check b.md"},
    ]


def test_same_role_messages_merge_and_empty_ones_vanish() -> None:
    _, messages = to_anthropic([
        Message(U, "first"), Message(U, "   "), Message(U, "second"),
        Message(A, ""), Message(A, "answer"), Message(A, "more"),
    ])

    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}, {"type": "text", "text": "more"}]},
    ]


def test_an_empty_tool_result_has_no_content_block() -> None:
    _, messages = to_anthropic([Message(T, "", tool_call_id="t1")])

    assert messages == [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "is_error": False},
    ]}]


def test_a_tool_message_without_its_call_id_is_our_bug() -> None:
    with pytest.raises(ValueError, match="tool_call_id"):
        to_anthropic([Message(T, "orphan")])


def test_tools_use_input_schema() -> None:
    spec = ToolSpec("t", "does t", {"type": "object"})

    assert to_anthropic_tools([spec]) == [{"name": "t", "description": "does t", "input_schema": {"type": "object"}}]


_messages = st.lists(st.one_of(
    st.builds(Message, st.sampled_from([S, U, A]), st.sampled_from(["", " ", "text", "more text"])),
    st.builds(lambda n, text: Message(A, text, tool_calls=(ToolCall(f"c{n}", "f", "{}"),)),
              st.integers(0, 9), st.sampled_from(["", "calling"])),
    st.builds(lambda n, text, err: Message(T, text, tool_call_id=f"c{n}", is_error=err),
              st.integers(0, 9), st.sampled_from(["", "result"]), st.booleans()),
), max_size=14)


@given(_messages)
def test_any_conversation_obeys_the_role_rules(conversation: list[Message]) -> None:
    _, messages = to_anthropic(conversation)

    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
    for message in messages:
        blocks = message["content"]
        assert blocks
        assert all(b["text"].strip() for b in blocks if b["type"] == "text")
        kinds = [b["type"] for b in blocks]
        if "tool_result" in kinds:
            assert message["role"] == "user"
            assert kinds == sorted(kinds, key=lambda k: k != "tool_result")  # results first
    results = sum(m.role is T for m in conversation)
    assert results == sum(b["type"] == "tool_result" for m in messages for b in m["content"])


def ev(kind: str, **fields):
    return NS(type=kind, **fields)


def test_events_become_ours() -> None:
    reader = EventReader()
    stream = [
        ev("message_start", message=NS(usage=NS(input_tokens=10, cache_read_input_tokens=90, output_tokens=1))),
        ev("content_block_start", index=0, content_block=NS(type="thinking", thinking="")),
        ev("content_block_delta", index=0, delta=NS(type="thinking_delta", thinking="hmm")),
        ev("content_block_stop", index=0),
        ev("content_block_start", index=1, content_block=NS(type="text", text="")),
        ev("ping"),
        ev("content_block_delta", index=1, delta=NS(type="text_delta", text="Sure.")),
        ev("content_block_stop", index=1),
        ev("content_block_start", index=2, content_block=NS(type="tool_use", id="tu", name="f", input={})),
        ev("content_block_delta", index=2, delta=NS(type="input_json_delta", partial_json="")),
        ev("content_block_delta", index=2, delta=NS(type="input_json_delta", partial_json='{"a": 1}')),
        ev("content_block_stop", index=2),
        ev("message_delta", delta=NS(stop_reason="tool_use"), usage=NS(output_tokens=17)),
        ev("message_stop"),
    ]
    events = [e for item in stream for e in reader.feed(item)] + reader.close()

    assert events == [
        TextDelta("Sure."),
        ToolCallDelta(0, "tu", "f"),
        ToolCallDelta(0, arguments='{"a": 1}'),
        Usage(100, 17),
        Finish("tool_calls"),
    ]


def test_a_tool_use_without_input_gets_an_empty_object() -> None:
    reader = EventReader()
    reader.feed(ev("content_block_start", index=0, content_block=NS(type="tool_use", id="t", name="f", input={})))

    assert reader.feed(ev("content_block_stop", index=0)) == [ToolCallDelta(0, arguments="{}")]


@pytest.mark.parametrize(("theirs", "ours"), [
    ("end_turn", "stop"), ("tool_use", "tool_calls"), ("max_tokens", "length"),
    ("stop_sequence", "stop"), ("refusal", "refusal"),
])
def test_stop_reasons_are_normalised(theirs: str, ours: str) -> None:
    reader = EventReader()
    reader.feed(ev("message_delta", delta=NS(stop_reason=theirs), usage=NS(output_tokens=1)))
    reader.feed(ev("message_stop"))

    assert reader.close()[-1] == Finish(ours)


def test_input_json_for_a_text_block_is_malformed() -> None:
    reader = EventReader()
    reader.feed(ev("content_block_start", index=0, content_block=NS(type="text", text="")))

    with pytest.raises(StreamMalformed):
        reader.feed(ev("content_block_delta", index=0, delta=NS(type="input_json_delta", partial_json="{")))


def test_a_stream_that_stops_early_is_malformed() -> None:
    reader = EventReader()
    reader.feed(ev("message_start", message=NS(usage=NS(input_tokens=1, output_tokens=1))))

    with pytest.raises(StreamMalformed, match="message_stop"):
        reader.close()
