"""Each reflex end to end: the real provider adapters against the fake SSE
servers on 127.0.0.1, the real session and store, the real pipeline.

The server sees the interrupted stream go away, and the request that
follows carries the sanitised history in the wire format of its protocol.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import pytest

from noema.memory.turns import Flag, TurnKind
from noema.orchestrator.repair import CANCELLED_TOOL
from noema.providers.catalog import build_provider
from noema.providers.settings import ModelSettings
from noema.tools.registry import ToolContext, tool
from tests.fakes import FakeAnthropicServer, FakeOpenAIServer, FakeReply, FakeToolCall

from .conftest import event
from .rig import check_both_protocols, check_notices, make_agent, wait

LONG = "word " * 400  # 8 s at 50 tokens/s: only a cancellation ends it early
PRIORITY_ALERTS = {"rules": [{"channel": "alerts", "urgency": "priority"}],
                   "idle_quiet_window_s": 0, "idle_max_wait_s": 0}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def servers() -> Iterator[dict]:
    with FakeOpenAIServer() as openai_server, FakeAnthropicServer() as anthropic_server:
        yield {"openai": openai_server, "anthropic": anthropic_server}


@pytest.fixture(params=["openai", "anthropic"])
async def wire(request, servers) -> AsyncIterator[tuple[str, object, object]]:
    protocol = request.param
    server = servers[protocol]
    server.reset()
    server.tokens_per_second = 50
    if protocol == "openai":
        settings = ModelSettings(provider="openai-compatible", model="fake",
                                 base_url=server.base_url, max_retries=0)
        provider = build_provider(settings, {})
    else:
        settings = ModelSettings(provider="anthropic", model="fake", base_url=server.base_url,
                                 max_retries=0)
        provider = build_provider(settings, {"ANTHROPIC_API_KEY": "test"})
    yield protocol, server, provider
    await provider.aclose()
    server.reset()


written: list[str] = []


@tool(side_effects=True)
def write_note(ctx: ToolContext, text: str) -> str:
    """Write a note.

    Args:
        text: The note.
    """
    written.append(text)
    return f"wrote {text}"


def sequence(protocol: str, body: dict) -> list[str]:
    """The request's conversation as role[:tool names], in wire terms."""
    out = []
    for message in body["messages"]:
        if protocol == "openai":
            names = [c["function"]["name"] for c in message.get("tool_calls") or []]
        else:
            blocks = message["content"] if isinstance(message["content"], list) else []
            names = [b["name"] for b in blocks if b.get("type") == "tool_use"]
            names += ["result" for b in blocks if b.get("type") == "tool_result"]
        out.append(":".join([message["role"], *names]))
    return out


async def test_safe_cancellation_closes_the_stream_and_resends_a_clean_history(wire, session):
    protocol, server, provider = wire
    server.script(FakeReply(text=LONG), FakeReply(text="The disk alert comes first."))
    agent, rec = make_agent(session, provider, reflexes=PRIORITY_ALERTS)
    agent.submit("write a long poem")
    await wait(rec.streaming)
    agent.perceive(event("alerts", "evt-1 disk almost full"))
    await agent.idle()
    assert await server.wait_disconnected(10)
    assert server.disconnects == 1
    second = server.requests[1].body
    text = json.dumps(second)
    assert "word word" not in text and "evt-1" in text
    expected = {
        "openai": ["system", "user", "assistant:pool_event", "tool"],
        "anthropic": ["user", "assistant:pool_event", "user:result"],
    }[protocol]
    assert sequence(protocol, second) == expected
    assert session.turns[-1].content == "The disk alert comes first."
    assert any(t.has(Flag.DISCARDED) for t in session.store.range(1, 100))
    check_both_protocols(session.turns)


async def test_unsafe_cancellation_after_a_write_sends_notice_then_event(wire, session):
    protocol, server, provider = wire
    written.clear()
    server.script(
        FakeReply(text="Writing.", tool_calls=(FakeToolCall("write_note", '{"text": "v1"}'),)),
        FakeReply(text=LONG),
        FakeReply(text="The server is down; the note is written, I turn to the outage."),
    )
    agent, rec = make_agent(session, provider, [write_note])
    agent.submit("write the note and then explain")
    await wait(rec.second_step_streaming)
    agent.perceive(event("pager", "evt-2 server down"))
    await agent.idle()
    assert written == ["v1"]
    assert await server.wait_disconnected(10)
    third = server.requests[2].body
    expected_tail = {
        "openai": ["assistant:write_note", "tool", f"assistant:{CANCELLED_TOOL}", "tool",
                   "assistant:pool_event", "tool"],
        "anthropic": ["assistant:write_note", "user:result", f"assistant:{CANCELLED_TOOL}",
                      "user:result", "assistant:pool_event", "user:result"],
    }[protocol]
    assert sequence(protocol, third)[-6:] == expected_tail
    assert "evt-2" in json.dumps(third["messages"][-1])
    check_notices(session.turns)
    check_both_protocols(session.turns)


async def test_a_message_of_the_person_restarts_the_thought(wire, session):
    _, server, provider = wire
    server.script(FakeReply(text=LONG), FakeReply(text="Shorter, then."))
    agent, rec = make_agent(session, provider)
    agent.submit("write a long poem")
    await wait(rec.streaming)
    agent.submit("actually, keep it short")
    await agent.idle()
    assert await server.wait_disconnected(10)
    second = server.requests[1].body
    assert "word word" not in json.dumps(second)
    assert [t.kind for t in session.turns] == [TurnKind.USER, TurnKind.USER, TurnKind.ASSISTANT]
    check_both_protocols(session.turns)


async def test_stop_closes_the_stream_and_sends_nothing_more(wire, session):
    _, server, provider = wire
    server.script(FakeReply(text=LONG))
    agent, rec = make_agent(session, provider)
    agent.submit("talk")
    await wait(rec.streaming)
    assert await agent.stop()
    assert await server.wait_disconnected(10)
    await asyncio.sleep(0.05)
    assert len(server.requests) == 1 and not agent.busy
    assert session.turns[-1].kind is TurnKind.NOTE
    check_both_protocols(session.turns)
