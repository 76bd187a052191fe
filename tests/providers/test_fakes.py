"""The fake servers themselves: real SSE over real HTTP, usable without asyncio."""

from __future__ import annotations

import json

import httpx

from tests.fakes import FakeAnthropicServer, FakeFailure, FakeOpenAIServer, FakeReply, FakeToolCall


def sse_events(raw: str) -> list[dict[str, str]]:
    """Parse an SSE body into its events (field name -> value)."""
    events = []
    for block in raw.split("\n\n"):
        if block.strip():
            events.append(dict(line.split(": ", 1) for line in block.splitlines()))
    return events


def test_openai_fake_speaks_sse_from_sync_code(openai_server: FakeOpenAIServer) -> None:
    openai_server.reset()
    openai_server.script(FakeReply(text="hi there", tool_calls=(FakeToolCall("f", '{"x": 1}'),)))
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "messages": []}

    response = httpx.post(f"{openai_server.base_url}/chat/completions", json=body, timeout=10)

    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    assert events[-1] == {"data": "[DONE]"}
    chunks = [json.loads(e["data"]) for e in events[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 11
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1]) == "hi there"
    assert openai_server.requests[0].body == body
    assert openai_server.completed == 1


def test_openai_fake_answers_whole_when_not_streaming(openai_server: FakeOpenAIServer) -> None:
    openai_server.reset()
    openai_server.script(FakeReply(text="whole answer"))

    response = httpx.post(f"{openai_server.base_url}/chat/completions",
                          json={"model": "m", "messages": []}, timeout=10)

    assert response.json()["choices"][0]["message"]["content"] == "whole answer"


def test_anthropic_fake_names_its_events(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.reset()
    anthropic_server.script(FakeReply(text="yo", tool_calls=(FakeToolCall("f", '{"x": 1}'),)))

    response = httpx.post(f"{anthropic_server.base_url}/v1/messages",
                          json={"model": "m", "stream": True, "messages": []}, timeout=10)

    names = [e["event"] for e in sse_events(response.text)]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == 2 == names.count("content_block_stop")
    deltas = [json.loads(e["data"])["delta"] for e in sse_events(response.text)
              if e["event"] == "content_block_delta"]
    assert {d["type"] for d in deltas} == {"text_delta", "input_json_delta"}


def test_failures_carry_status_retry_after_and_body(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.reset()
    anthropic_server.script(FakeFailure(429, "too many", retry_after=3))

    response = httpx.post(f"{anthropic_server.base_url}/v1/messages", json={"stream": True}, timeout=10)

    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.json() == {"type": "error", "error": {"type": "rate_limit_error", "message": "too many"}}


def test_unknown_routes_are_404_and_still_recorded(openai_server: FakeOpenAIServer) -> None:
    openai_server.reset()

    response = httpx.get(f"{openai_server.base_url}/models", timeout=10)

    assert response.status_code == 404
    assert [(r.method, r.path) for r in openai_server.requests] == [("GET", "/v1/models")]


def test_a_private_server_starts_and_stops() -> None:
    with FakeOpenAIServer(tokens_per_second=1000) as server:
        assert server.tokens_per_second == 1000
        response = httpx.post(f"{server.base_url}/chat/completions",
                              json={"model": "m", "stream": True, "messages": []}, timeout=10)
        assert response.status_code == 200
        port = server.port
    try:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
    except httpx.ConnectError:
        pass
    else:
        raise AssertionError("the server still answers after stop()")
