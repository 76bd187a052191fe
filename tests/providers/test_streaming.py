"""Both adapters against their fake servers: what comes out of a stream."""

from __future__ import annotations

import json

from noema.providers.base import (
    Finish,
    ModelRequest,
    ResponseBuilder,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from tests.fakes import FakeReply, FakeToolCall

from .conftest import Rig, simple_request


async def collect(provider, request: ModelRequest) -> list:
    return [event async for event in provider.stream(request)]


def build(events: list):
    builder = ResponseBuilder()
    for event in events:
        builder.feed(event)
    return builder.build()


async def test_text_streams_in_pieces_and_ends_with_usage_then_finish(rig: Rig) -> None:
    rig.server.script(FakeReply(text="The quick brown fox jumps", input_tokens=21, output_tokens=5))
    events = await collect(rig.make(), simple_request())

    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == ["The ", "quick ", "brown ", "fox ", "jumps"]
    assert events[-2:] == [Usage(21, 5), Finish("stop")]


async def test_tool_calls_split_across_chunks_are_reassembled_by_index(rig: Rig) -> None:
    weather = json.dumps({"city": "Valparaíso", "units": "metric", "days": [1, 2, 3]})
    rig.server.script(FakeReply(
        text="Let me check.",
        tool_calls=(
            FakeToolCall("get_weather", weather, id="call_a"),
            FakeToolCall("get_time", '{"zone": "America/Santiago"}', id="call_b"),
        ),
        argument_piece=5,
    ))
    events = await collect(rig.make(), simple_request())

    pieces = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len([p for p in pieces if p.index == 0]) > 2  # really split
    response = build(events)
    assert response.text == "Let me check."
    assert [(c.id, c.name) for c in response.tool_calls] == [
        ("call_a", "get_weather"), ("call_b", "get_time"),
    ]
    assert json.loads(response.tool_calls[0].arguments) == json.loads(weather)
    assert response.tool_calls[1].parsed_arguments() == {"zone": "America/Santiago"}
    assert response.finish_reason == "tool_calls"


async def test_a_call_without_arguments_gets_an_empty_object(rig: Rig) -> None:
    rig.server.script(FakeReply(tool_calls=(FakeToolCall("list_sensors", "", id="c1"),)))
    response = build(await collect(rig.make(), simple_request()))

    assert response.tool_calls[0].name == "list_sensors"
    assert response.tool_calls[0].parsed_arguments() == {}


async def test_length_limit_is_reported_as_length(rig: Rig) -> None:
    rig.server.script(FakeReply(text="cut short", finish_reason="length"))
    events = await collect(rig.make(), simple_request())

    assert events[-1] == Finish("length")


async def test_openai_stream_without_usage_still_finishes(openai_rig: Rig) -> None:
    openai_rig.server.script(FakeReply(text="no usage here", send_usage=False))
    events = await collect(openai_rig.make(), simple_request())

    assert not any(isinstance(e, Usage) for e in events)
    assert events[-1] == Finish("stop")


async def test_openai_request_payload(openai_rig: Rig) -> None:
    spec = ToolSpec("read_file", "Read a file.", {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"],
    })
    provider = openai_rig.make(
        secrets={"MY_LOCAL_KEY": "local-secret"}, api_key_env="MY_LOCAL_KEY",
        temperature=0.3, max_output_tokens=777,
    )
    await collect(provider, simple_request("read notes.md", tools=(spec,)))

    [recorded] = openai_rig.server.requests
    body = recorded.body
    assert recorded.path == "/v1/chat/completions"
    assert recorded.headers["authorization"] == "Bearer local-secret"
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 777
    assert body["temperature"] == 0.3
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "read notes.md"},
    ]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "read_file", "description": "Read a file.", "parameters": spec.parameters,
    }}]
    # Sent explicitly: some servers leave the tools out of the prompt without it.
    assert body["tool_choice"] == "auto"


async def test_no_tool_choice_without_tools(openai_rig: Rig) -> None:
    await collect(openai_rig.make(), simple_request("hi"))

    [recorded] = openai_rig.server.requests
    assert "tool_choice" not in recorded.body and "tools" not in recorded.body


async def test_openai_itself_gets_max_completion_tokens(openai_rig: Rig) -> None:
    provider = openai_rig.make(provider="openai", model="gpt-test", secrets={"OPENAI_API_KEY": "sk-x"})
    await collect(provider, ModelRequest(simple_request().messages, max_tokens=99))

    body = openai_rig.server.requests[0].body
    assert body["max_completion_tokens"] == 99
    assert "max_tokens" not in body
    assert "tools" not in body  # an empty tool list is never sent


async def test_anthropic_request_payload(anthropic_rig: Rig) -> None:
    spec = ToolSpec("lookup_turn", "Fetch a turn.", {
        "type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
    })
    await collect(anthropic_rig.make(max_output_tokens=512), simple_request("what was turn 6?", (spec,)))

    [recorded] = anthropic_rig.server.requests
    body = recorded.body
    assert recorded.path == "/v1/messages"
    assert "test-key" in (recorded.headers.get("x-api-key", "") + recorded.headers.get("authorization", ""))
    assert recorded.headers.get("anthropic-version")
    assert body["model"] == "claude-test"
    assert body["stream"] is True
    assert body["max_tokens"] == 512
    assert body["system"] == "You are terse."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "what was turn 6?"}]}]
    assert body["tools"] == [
        {"name": "lookup_turn", "description": "Fetch a turn.", "input_schema": spec.parameters}
    ]
    assert "temperature" not in body


async def test_anthropic_temperature_is_sent_when_configured(anthropic_rig: Rig) -> None:
    await collect(anthropic_rig.make(temperature=0.2), simple_request())

    assert anthropic_rig.server.requests[0].body["temperature"] == 0.2
