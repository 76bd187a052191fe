"""Giant turns never poison later requests.

A turn larger than a share of the window is shown cut, with a marker that
says how to page through it; the store keeps it whole. A request never
grows past the window: the oldest turns give way, whole groups at a time,
behind a note. End to end, fake servers that refuse any request past the
window (as real endpoints do) keep answering after a 5 MB answer, a 5 MB
tool result and a 5 MB pasted message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noema.memory.recall_tools import memory_tools
from noema.memory.search import HistorySearch
from noema.memory.store import TurnStore, turn_tokens
from noema.memory.tokens import MESSAGE_OVERHEAD, estimate_tokens, fitting_chars
from noema.memory.turns import ROLE_OF_KIND, NewTurn, Turn, TurnKind
from noema.orchestrator.context import (
    ContextLimits,
    ContextTooSmall,
    build_context,
    check_history,
    tools_tokens,
)
from noema.providers.anthropic_native import to_anthropic
from noema.providers.base import (
    BadRequest,
    Message,
    MessageRole,
    ModelRequest,
    ToolCall,
    ToolSpec,
)
from noema.providers.catalog import build_provider
from noema.providers.settings import ModelSettings
from noema.tools.registry import ToolContext, ToolRegistry, tool
from tests.fakes import FakeAnthropicServer, FakeFailure, FakeOpenAIServer, FakeReply, FakeToolCall

from .rig import make_agent

WINDOW = 8_192
# About 1.3 million estimated tokens, with no whitespace so a fake server
# streams it as one piece.
GIANT = "0123456789abcdef;" * 300_000
SYSTEM = "You are a test."


# -- helpers ---------------------------------------------------------------------------


def stored(store: TurnStore, *news: NewTurn) -> list[Turn]:
    return [store.append(new) for new in news]


def call(name: str, call_id: str, arguments: str = "{}") -> NewTurn:
    return NewTurn(TurnKind.TOOL_CALL, tool_name=name, call_id=call_id, arguments=arguments)


def result(name: str, call_id: str, content: str, kind: TurnKind = TurnKind.TOOL_RESULT) -> NewTurn:
    return NewTurn(kind, content, tool_name=name, call_id=call_id)


def message_tokens(messages: Sequence[Message]) -> int:
    """The request's size counted afresh from what it says, not from the store's estimates."""
    total = 0
    for m in messages:
        total += estimate_tokens(m.content) + MESSAGE_OVERHEAD
        for c in m.tool_calls:
            total += estimate_tokens(c.name) + estimate_tokens(c.arguments) + MESSAGE_OVERHEAD
    return total


async def lookup(tools: ToolRegistry, **arguments: object) -> str:
    """Call lookup_turn as the model does, through the registry."""
    done = await tools.call(ToolCall("c", "lookup_turn", json.dumps(arguments)),
                            ToolContext("c", 0, 1))
    assert not done.is_error, done.content
    return done.content


def check_wire(messages: Sequence[Message]) -> None:
    """Both protocols would accept these messages."""
    check_history(messages)
    _, wire = to_anthropic(messages)
    assert not wire or wire[0]["role"] == "user"
    for before, after in zip(wire, wire[1:]):
        assert before["role"] != after["role"], "Anthropic roles must alternate"
    for index, m in enumerate(messages):
        for c in m.tool_calls:
            json.loads(c.arguments)  # cut arguments stay valid JSON
        if m.role is MessageRole.TOOL:
            assert any(c.id == m.tool_call_id for c in messages[index - 1].tool_calls) or (
                messages[index - 1].role is MessageRole.TOOL
            )


# -- the builder -------------------------------------------------------------------------


async def test_a_giant_answer_is_cut_with_a_marker_and_kept_whole(store):
    turns = stored(store, NewTurn(TurnKind.USER, "write it all"),
                   NewTurn(TurnKind.ASSISTANT, GIANT), NewTurn(TurnKind.USER, "thanks; and now?"))
    limits = ContextLimits(WINDOW)
    built = build_context(SYSTEM, turns, limits)
    check_wire(built.messages)
    assert built.cut == (turns[1].id,) and built.left_out == ()
    shown = built.messages[2].content
    assert GIANT.startswith(shown.split("\n[…")[0]) and shown.endswith(GIANT[-40:])
    marker = re.search(r"\[… ([\d,]+) of the ([\d,]+) characters of turn (\d+) are left out", shown)
    assert marker and int(marker[3]) == turns[1].id
    assert int(marker[2].replace(",", "")) == len(GIANT)
    assert estimate_tokens(shown) <= limits.turn_cap
    assert message_tokens(built.messages) <= built.tokens <= WINDOW - limits.answer_room
    assert store.get(turns[1].id).content == GIANT
    assert built.messages[-1].content == "thanks; and now?"
    # The marker's page reads the very next characters, and the end can be reached.
    tools = ToolRegistry(memory_tools(store, HistorySearch(store)))
    page_call = re.search(r"lookup_turn\(id=(\d+), offset=(\d+), limit=(\d+)\)", shown)
    assert page_call
    offset, limit = int(page_call[2]), int(page_call[3])
    page = await lookup(tools, id=turns[1].id, offset=offset, limit=limit)
    assert page.split("\n", 2)[1].startswith(GIANT[offset : offset + 200])
    last = await lookup(tools, id=turns[1].id, offset=len(GIANT) - 100, limit=limit)
    assert GIANT[-100:] in last and last.endswith(f"the end of turn {turns[1].id}]")


async def test_lookup_turn_pages_through_a_giant_turn_from_the_marker(store):
    # Big enough to need dozens of pages; paging all of a 5 MB turn at this window's
    # page size would take a thousand calls, which a test need not make.
    long = GIANT[:200_000]
    turns = stored(store, NewTurn(TurnKind.USER, "dump it"), call("dump", "c1"),
                   result("dump", "c1", long), NewTurn(TurnKind.ASSISTANT, "done"))
    limits = ContextLimits(WINDOW)
    shown = build_context(SYSTEM, turns, limits).messages[3].content
    tools = ToolRegistry(memory_tools(store, HistorySearch(store)))
    page_call = re.search(r"lookup_turn\(id=(\d+), offset=(\d+), limit=(\d+)\)", shown)
    assert page_call and int(page_call[1]) == turns[2].id
    head = shown.split("\n[…")[0]
    offset, limit = int(page_call[2]), int(page_call[3])
    assert offset == len(head)
    pages, read = 0, head
    while True:
        page = await lookup(tools, id=turns[2].id, offset=offset, limit=limit)
        pages += 1
        # Each page fits under the cap, so the model can read it without it being cut again.
        assert estimate_tokens(page) <= limits.turn_cap
        body = page.split("\n", 1)[1]
        follow = re.search(r"\n\[characters [\d,]+-[\d,]+ of [\d,]+; call lookup_turn\(id=\d+, "
                           r"offset=(\d+), limit=(\d+)\) for more\]$", body)
        if follow is None:
            assert body.endswith(f"the end of turn {turns[2].id}]")
            read += body.rsplit("\n[characters", 1)[0]
            break
        read += body[: follow.start()]
        offset = int(follow[1])
    assert read == long and pages > 10


async def test_lookup_turn_refuses_a_page_size_out_of_bounds(store):
    turns = stored(store, NewTurn(TurnKind.USER, "x" * 2_000))
    tools = ToolRegistry(memory_tools(store, HistorySearch(store)))
    refused = await tools.call(ToolCall("c", "lookup_turn", json.dumps({"id": turns[0].id,
                                                                        "limit": 10})),
                               ToolContext("c", 0, 1))
    assert refused.is_error and "limit must be between 500 and 100000" in refused.content
    page = await lookup(tools, id=turns[0].id, limit=500)
    assert f"call lookup_turn(id={turns[0].id}, offset=500, limit=500) for more" in page


def test_giant_call_arguments_become_valid_json_that_says_where_they_are(store):
    arguments = json.dumps({"path": "big.txt", "text": GIANT})
    turns = stored(store, NewTurn(TurnKind.USER, "write the file"),
                   call("write_file", "w1", arguments), result("write_file", "w1", "written"))
    built = build_context(SYSTEM, turns, ContextLimits(WINDOW))
    check_wire(built.messages)
    sent = built.messages[2].tool_calls[0]
    assert sent.id == "w1" and sent.name == "write_file"
    assert f"lookup_turn(id={turns[1].id})" in json.loads(sent.arguments)["left_out"]
    assert store.get(turns[1].id).arguments == arguments


def test_when_cut_turns_still_do_not_fit_the_oldest_groups_give_way(store):
    big = "word " * 6_000  # about 6,000 tokens: above the cap, cut to about 2,000
    news = [NewTurn(TurnKind.USER, "start")]
    for n in range(6):
        news += [call("read", f"r{n}"), result("read", f"r{n}", big),
                 call("pool_event", f"p{n}"), result("pool_event", f"p{n}", big, TurnKind.EVENT)]
    news.append(NewTurn(TurnKind.USER, "what now?"))
    turns = stored(store, *news)
    limits = ContextLimits(WINDOW)
    built = build_context(SYSTEM, turns, limits)
    check_wire(built.messages)
    assert built.left_out and built.left_out == tuple(t.id for t in turns[: len(built.left_out)])
    opening = built.messages[1].content
    assert opening.startswith("[note from the runtime") and f"turns {turns[0].id} to" in opening
    assert f"window of {WINDOW:,} tokens" in opening
    assert built.messages[-1].content == "what now?"
    assert message_tokens(built.messages) <= built.tokens <= WINDOW - limits.answer_room
    # No call is parted from its result: whatever was kept is whole pairs.
    sent_calls = [c.id for m in built.messages for c in m.tool_calls]
    answered = [m.tool_call_id for m in built.messages if m.role is MessageRole.TOOL]
    assert sent_calls == answered


def test_a_window_too_small_for_the_tools_is_a_clear_error(store):
    turns = stored(store, NewTurn(TurnKind.USER, "hi"))
    tools = [ToolSpec(f"tool_{n}", "does things " * 100, {"type": "object"}) for n in range(20)]
    with pytest.raises(ContextTooSmall, match="tool descriptions"):
        build_context(SYSTEM, turns, ContextLimits(4_096), tools)


def test_a_giant_system_prompt_is_cut_at_its_end(store):
    turns = stored(store, NewTurn(TurnKind.USER, "hi"))
    built = build_context("rules " * 50_000, turns, ContextLimits(WINDOW))
    check_wire(built.messages)
    assert "characters of the system prompt are left out" in built.messages[0].content
    assert message_tokens(built.messages) <= WINDOW


# -- the property -------------------------------------------------------------------------

SIZES = [0, 5, 40, 400, 3_000, 30_000]
TEXTS = ["word ", "a,b;", "x", "longerwordsthanusual ", "\n"]


@st.composite
def histories(draw) -> list[Turn]:
    """Random sessions of every kind of turn, in the shapes a session can have."""
    ids = iter(range(1, 10_000))
    news: list[NewTurn] = []

    def text() -> str:
        pattern, size = draw(st.sampled_from(TEXTS)), draw(st.sampled_from(SIZES))
        return (pattern * (size // len(pattern) + 1))[:size]  # `size` characters

    for n in range(draw(st.integers(1, 14))):
        shape = draw(st.sampled_from(["user", "assistant", "calls", "event", "note"]))
        if shape == "user":
            news.append(NewTurn(TurnKind.USER, text() or "hi", channel=draw(
                st.sampled_from([None, "terminal", "telegram"])), sender="ana"))
        elif shape == "assistant":
            news.append(NewTurn(TurnKind.ASSISTANT, text() or "ok"))
        elif shape == "note":
            news.append(NewTurn(TurnKind.NOTE, text() or "note"))
        elif shape == "event":
            news += [call("pool_event", f"e{n}"), result("pool_event", f"e{n}", text(), TurnKind.EVENT)]
        else:
            if draw(st.booleans()):
                news.append(NewTurn(TurnKind.ASSISTANT, text() or "calling"))
            count = draw(st.integers(1, 3))
            calls = [call("tool", f"c{n}_{k}", json.dumps({"text": text()})) for k in range(count)]
            news += calls
            news += [result("tool", c.call_id or "", text()) for c in calls]
    turns = []
    for new in news:
        turns.append(Turn(next(ids), 0.0, new.kind, ROLE_OF_KIND[new.kind], new.content,
                          tool_name=new.tool_name, call_id=new.call_id, arguments=new.arguments,
                          channel=new.channel, sender=new.sender, tokens=turn_tokens(new)))
    return turns


TOOL = ToolSpec("read_file", "Read a file of the workspace.",
                {"type": "object", "properties": {"path": {"type": "string"}}})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=histories(), window=st.sampled_from([2_048, 4_096, 8_192, 32_768, 128_000]),
       share=st.sampled_from([0.1, 0.25, 0.5]), prompt=st.sampled_from([10, 2_000, 12_000]),
       tools=st.sampled_from([0, 3, 10]))
def test_every_built_request_fits_the_window_and_stays_valid(turns, window, share, prompt, tools):
    limits = ContextLimits(window, giant_share=share)
    specs = (TOOL,) * tools
    built = build_context("be brief. " * prompt, turns, limits, specs)
    check_wire(built.messages)
    sent = message_tokens(built.messages) + tools_tokens(specs)
    assert sent <= built.tokens <= window - limits.answer_room
    # Only the oldest turns are left out, never the newest; every other turn is sent.
    assert built.left_out == tuple(t.id for t in turns[: len(built.left_out)])
    assert turns[-1].id not in built.left_out
    kept = turns[len(built.left_out) :]
    results = [m for m in built.messages if m.role is MessageRole.TOOL]
    assert [m.tool_call_id for m in results] == [t.call_id for t in kept if t.is_result]
    users = sum(m.role is MessageRole.USER for m in built.messages)
    assert users - sum(t.kind in (TurnKind.USER, TurnKind.NOTE) for t in kept) in (0, 1)


@settings(max_examples=150, deadline=None)
@given(pattern=st.sampled_from(TEXTS + ["é ü ñ ", "::::", "a" * 50 + " ", "a" + " " * 300]),
       size=st.integers(0, 40_000), budget=st.integers(-5, 3_000), from_end=st.booleans())
def test_a_fitted_piece_never_exceeds_its_budget(pattern, size, budget, from_end):
    text = (pattern * (size // len(pattern) + 1))[:size]
    fit = fitting_chars(text, budget, from_end=from_end)
    piece = text[len(text) - fit.chars :] if from_end else text[: fit.chars]
    assert fit.chars <= len(text) and fit.tokens == estimate_tokens(piece) <= max(budget, 0)
    if budget >= 100:  # the budget is used, not wasted: nine tenths of it, or the whole text
        assert fit.chars == len(text) or fit.tokens * 10 >= budget * 9


# -- end to end: fake endpoints that refuse a request past the window ----------------------


def wire_tokens(body: dict) -> int:
    """A request's size as the endpoint counts it: every text it carries, and the tools."""

    def texts(value: object) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            for item in value:
                yield from texts(item)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in {"role", "type", "id", "tool_call_id", "tool_use_id"}:
                    yield from texts(item)

    messages = body.get("messages", [])
    total = sum(estimate_tokens(t) for t in texts(messages)) + MESSAGE_OVERHEAD * len(messages)
    total += sum(estimate_tokens(t) for t in texts(body.get("system") or ""))
    return total + (estimate_tokens(json.dumps(body["tools"])) if body.get("tools") else 0)


class Windowed:
    """Refuses any request larger than the model's window, as a real endpoint does."""

    window = WINDOW
    refused: list[int]
    sizes: list[int]

    def refusal(self, body):
        size = wire_tokens(body) if isinstance(body, dict) else 0
        self.sizes.append(size)
        if size > self.window:
            self.refused.append(size)
            return FakeFailure(400, f"prompt is too long: {size} tokens > {self.window} maximum",
                               code=self.too_long_code)
        return None


class WindowedOpenAI(Windowed, FakeOpenAIServer):
    too_long_code = "context_length_exceeded"


class WindowedAnthropic(Windowed, FakeAnthropicServer):
    too_long_code = "invalid_request_error"


@pytest.fixture(scope="module")
def servers() -> Iterator[dict]:
    with WindowedOpenAI() as openai_server, WindowedAnthropic() as anthropic_server:
        yield {"openai": openai_server, "anthropic": anthropic_server}


@pytest.fixture(params=["openai", "anthropic"])
async def wire(request, servers):
    server = servers[request.param]
    server.reset()
    server.refused, server.sizes = [], []
    options = dict(model="fake", base_url=server.base_url, max_retries=0, context_window=WINDOW)
    if request.param == "openai":
        provider = build_provider(ModelSettings(provider="openai-compatible", **options), {})
    else:
        provider = build_provider(ModelSettings(provider="anthropic", **options),
                                  {"ANTHROPIC_API_KEY": "test"})
    yield server, provider
    await provider.aclose()
    server.reset()


@pytest.mark.slow
async def test_the_fake_endpoints_refuse_a_request_past_the_window(wire):
    server, provider = wire
    request = ModelRequest(messages=(Message(MessageRole.SYSTEM, SYSTEM),
                                     Message(MessageRole.USER, GIANT[:100_000])))
    with pytest.raises(BadRequest, match="too long"):
        async for _ in provider.stream(request):
            pass
    assert len(server.refused) == 1 and server.refused[0] > WINDOW


@tool(side_effects=False)
def dump(ctx: ToolContext) -> str:
    """Dump everything."""
    return GIANT


async def converse(agent, *messages: str) -> None:
    for text in messages:
        agent.submit(text)
        await agent.idle()


def answers(session) -> list[str]:
    return [t.content for t in session.turns if t.kind is TurnKind.ASSISTANT]


@pytest.mark.slow
async def test_after_a_giant_answer_the_next_messages_are_answered(wire, session):
    server, provider = wire
    server.script(FakeReply(text=GIANT), FakeReply(text="first"), FakeReply(text="second"))
    agent, _ = make_agent(session, provider, [dump])
    await converse(agent, "write everything", "and now?", "and then?")
    await agent.close()
    assert answers(session)[-2:] == ["first", "second"]
    assert server.refused == [] and len(server.sizes) == 3
    assert max(server.sizes) <= WINDOW
    giant = next(t for t in session.turns if t.kind is TurnKind.ASSISTANT)
    assert session.store.get(giant.id).content == GIANT


@pytest.mark.slow
async def test_after_a_giant_tool_result_the_next_messages_are_answered(wire, session):
    server, provider = wire
    server.script(FakeReply(tool_calls=(FakeToolCall("dump"),)), FakeReply(text="dumped"),
                  FakeReply(text="first"))
    agent, _ = make_agent(session, provider, [dump])
    await converse(agent, "dump it", "what was in it?")
    await agent.close()
    assert answers(session) == ["dumped", "first"]
    assert server.refused == [] and len(server.sizes) == 3
    assert max(server.sizes) <= WINDOW
    giant = next(t for t in session.turns if t.kind is TurnKind.TOOL_RESULT)
    assert session.store.get(giant.id).content == GIANT


@pytest.mark.slow
async def test_a_giant_pasted_message_is_answered_and_so_is_the_next(wire, session):
    server, provider = wire
    server.script(FakeReply(text="that is long"), FakeReply(text="first"))
    agent, _ = make_agent(session, provider, [dump])
    await converse(agent, GIANT, "summarise it")
    await agent.close()
    assert answers(session) == ["that is long", "first"]
    assert server.refused == [] and max(server.sizes) <= WINDOW
