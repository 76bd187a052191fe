"""The reasoning cycle and the agent shell, with the scripted model."""

import asyncio

from noema.memory.turns import Flag, TurnKind
from noema.orchestrator.agent import Agent, AgentListener
from noema.orchestrator.context import build_messages, check_history
from noema.orchestrator.cycle import CycleSettings, ReasoningCycle
from noema.orchestrator.settings import ReflexSettings
from noema.providers.base import ProviderError
from noema.providers.scripted import ScriptedProvider, call, say
from noema.tools.registry import ToolContext, ToolRegistry, tool


class Recorder(AgentListener):
    def __init__(self, store):
        self.store = store
        self.events = []
        self.started = asyncio.Event()
        self.streaming = asyncio.Event()

    def on_text(self, delta):
        self.streaming.set()

    def on_turn(self, turn):
        # Shown only after it is stored: the store must already have it.
        assert self.store.get(turn.id) == turn
        self.events.append(("turn", turn.kind, turn.tool_name))

    def on_tool_start(self, call, side_effects):
        self.events.append(("start", call.tool_name, side_effects))
        self.started.set()

    def on_cycle_end(self, cycle_id, outcome, error):
        self.events.append(("end", outcome, error))


log: list[str] = []


@tool(side_effects=True)
def remember(ctx: ToolContext, thing: str) -> str:
    """Remember a thing.

    Args:
        thing: What to remember.
    """
    log.append(thing)
    return f"remembered {thing}"


@tool(side_effects=True)
async def slow_job(ctx: ToolContext) -> str:
    """A job that takes a while."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        ctx.interruption.append("The job was killed; it had written 2 of 5 files.")
        raise
    return "done"


def make_agent(session, provider, max_steps=24, message_while_busy="priority"):
    recorder = Recorder(session.store)
    cycle = ReasoningCycle(session, provider, ToolRegistry([remember, slow_job]),
                           lambda: "You are a test.", CycleSettings(max_steps=max_steps))
    agent = Agent(session, cycle, recorder, context_window=1000,
                  reflexes=ReflexSettings(message_while_busy=message_while_busy))
    return agent, recorder


def valid(session):
    check_history(build_messages("system", session.turns))


async def test_calls_run_in_order_and_every_turn_is_stored_first(session):
    log.clear()
    provider = ScriptedProvider([
        say("Two things.", call("remember", thing="milk"), call("remember", thing="eggs")),
        say("Done."),
    ])
    agent, rec = make_agent(session, provider)
    agent.submit("remember milk and eggs")
    await agent.idle()
    assert log == ["milk", "eggs"]
    kinds = [t.kind for t in session.turns]
    assert kinds == [TurnKind.USER, TurnKind.ASSISTANT, TurnKind.TOOL_CALL, TurnKind.TOOL_CALL,
                     TurnKind.TOOL_RESULT, TurnKind.TOOL_RESULT, TurnKind.ASSISTANT]
    assert [t.content for t in session.turns if t.kind is TurnKind.TOOL_RESULT] == [
        "remembered milk", "remembered eggs"]
    assert ("end", "answered", None) in rec.events
    valid(session)
    # The second request carried the results, paired with their calls.
    second = provider.requests[1]
    assert [m.role for m in second.messages][-3:] == ["assistant", "tool", "tool"]
    assert {t.name for t in second.tools} == {"remember", "slow_job"}
    assert session.store.open_cycles() == []


async def test_the_number_of_steps_is_bounded(session):
    provider = ScriptedProvider([say("", call("remember", thing=str(i))) for i in range(10)])
    agent, rec = make_agent(session, provider, max_steps=3)
    agent.submit("loop")
    await agent.idle()
    assert len(provider.requests) == 3
    assert session.turns[-1].kind is TurnKind.NOTE and "bound of 3" in session.turns[-1].content
    assert ("end", "step_limit", None) in rec.events
    valid(session)


async def test_a_call_repeated_with_the_same_result_is_refused_then_the_cycle_stops(session):
    log.clear()
    # A small model stuck on one call: the same arguments (spelt two ways)
    # and the same result, over and over.
    same = [say("", call("remember", thing="milk")) for _ in range(7)]
    provider = ScriptedProvider([*same[:3], say("", call("remember", '{ "thing" : "milk" }')),
                                 *same[4:]])
    agent, rec = make_agent(session, provider)
    agent.submit("remember milk")
    await agent.idle()
    assert log == ["milk", "milk"]  # run twice, as asked; the third and fourth were not run
    results = [t for t in session.turns if t.kind is TurnKind.TOOL_RESULT]
    assert [r.has(Flag.ERROR) for r in results] == [False, False, True, True]
    assert "Not run: remember was just called 2 times in a row" in results[2].content
    assert len(provider.requests) == 4  # not the 24 steps the cycle allows
    assert "kept calling remember with the same arguments" in session.turns[-1].content
    assert ("end", "repeating", None) in rec.events
    valid(session)


async def test_a_repeated_call_that_follows_another_or_gives_another_result_runs(session):
    log.clear()
    provider = ScriptedProvider([
        say("", call("remember", thing="a")), say("", call("remember", thing="a")),
        say("", call("remember", thing="b")),  # another call between
        say("", call("remember", thing="a")), say("", call("remember", thing="a")),
        say("Done."),
    ])
    agent, rec = make_agent(session, provider)
    agent.submit("go")
    await agent.idle()
    assert log == ["a", "a", "b", "a", "a"]
    assert ("end", "answered", None) in rec.events


ticks = iter(range(10**6))


@tool(side_effects=False)
def clock(ctx: ToolContext) -> str:
    """The time now."""
    return f"It is 2026-12-07 18:{next(ticks) % 60:02d}:00 UTC."


@tool(side_effects=False)
def page(ctx: ToolContext, offset: int) -> str:
    """A page of a long text.

    Args:
        offset: Where the page starts.
    """
    return f"page at {offset}: " + ["river", "stone", "garden", "lamp", "letter"][offset % 5] * 30


def make_looping_agent(session, provider):
    recorder = Recorder(session.store)
    cycle = ReasoningCycle(session, provider, ToolRegistry([remember, clock, page]),
                           lambda: "You are a test.", CycleSettings(max_steps=24))
    return Agent(session, cycle, recorder, context_window=100_000), recorder


JUNK = "Today I have written a note to myself about the things that I wanted to remember " * 3


async def test_calls_that_change_only_in_noise_are_refused_then_the_cycle_ends(session):
    log.clear()
    # A new junk name each time (a counter, then a word), the same long content.
    names = ["junk_1", "junk_2", "junk_3", "scratch", "junk_5", "junk_6", "junk_7"]
    provider = ScriptedProvider([say("", call("remember", thing=f"{n}.txt: {JUNK}")) for n in names]
                                * 4)
    agent, rec = make_looping_agent(session, provider)
    agent.submit("write notes")
    await agent.idle()
    assert len(log) == 4  # four ran; the fifth and sixth were refused
    results = [t for t in session.turns if t.kind is TurnKind.TOOL_RESULT]
    assert [r.has(Flag.ERROR) for r in results] == [False] * 4 + [True, True]
    assert "differ only in details" in results[4].content
    assert len(provider.requests) == 6  # far short of the 24 steps the cycle allows
    assert "changed only in details" in session.turns[-1].content
    assert ("end", "no_progress", None) in rec.events
    valid(session)


async def test_a_read_only_call_whose_result_changes_only_in_noise_is_stopped(session):
    provider = ScriptedProvider([say("", call("clock")) for _ in range(24)])
    agent, rec = make_looping_agent(session, provider)
    agent.submit("what time is it")
    await agent.idle()
    assert len(provider.requests) == 6
    assert ("end", "no_progress", None) in rec.events


async def test_paging_through_a_text_and_writing_different_things_are_progress(session):
    log.clear()
    provider = ScriptedProvider([
        *(say("", call("page", offset=n)) for n in range(5)),
        *(say("", call("remember", thing=word)) for word in ("milk", "eggs", "tea", "rice",
                                                             "salt", "figs")),
        say("Done."),
    ])
    agent, rec = make_looping_agent(session, provider)
    agent.submit("read and remember")
    await agent.idle()
    assert ("end", "answered", None) in rec.events
    assert log == ["milk", "eggs", "tea", "rice", "salt", "figs"]


async def test_repeated_call_ids_from_a_server_are_made_unique(session):
    class SameIds(ScriptedProvider):
        async def stream(self, request):
            async for event in super().stream(request):
                if hasattr(event, "id") and event.id:
                    event = type(event)(event.index, "call_0", event.name, event.arguments)
                yield event

    provider = SameIds([say("", call("remember", thing="a")), say("", call("remember", thing="b")),
                        say("ok")])
    agent, _ = make_agent(session, provider)
    agent.submit("go")
    await agent.idle()
    ids = [t.call_id for t in session.turns if t.kind is TurnKind.TOOL_CALL]
    assert len(ids) == len(set(ids)) == 2
    valid(session)


async def test_stop_while_streaming_keeps_what_the_person_saw(session):
    provider = ScriptedProvider([say("word " * 400)], token_delay_s=0.005)
    agent, rec = make_agent(session, provider)
    agent.submit("talk")
    await asyncio.wait_for(rec.streaming.wait(), 10)
    assert await agent.stop()
    partial = [t for t in session.turns if t.kind is TurnKind.ASSISTANT]
    assert len(partial) == 1 and partial[0].has(Flag.INTERRUPTED)
    assert 0 < len(partial[0].content) < len("word " * 400)
    assert session.turns[-1].kind is TurnKind.NOTE
    assert ("end", "stopped", None) in rec.events
    valid(session)
    assert session.store.open_cycles() == []


async def test_stop_during_a_side_effect_tool_says_what_happened(session):
    provider = ScriptedProvider([say("Starting.", call("slow_job"), call("remember", thing="x"))])
    agent, rec = make_agent(session, provider)
    agent.submit("do the job")
    await asyncio.wait_for(rec.started.wait(), 10)
    await agent.stop()
    results = [t for t in session.turns if t.kind is TurnKind.TOOL_RESULT]
    assert "killed; it had written 2 of 5 files" in results[0].content
    assert results[0].has(Flag.INTERRUPTED)
    assert results[1].content.startswith("Not run") and "no effect" in results[1].content
    valid(session)


async def test_a_provider_failure_is_reported_and_the_history_stays_valid(session):
    class Failing(ScriptedProvider):
        async def stream(self, request):
            raise ProviderError("the endpoint said no")
            yield  # pragma: no cover

    agent, rec = make_agent(session, Failing([]))
    agent.submit("hello")
    await agent.idle()
    assert ("end", "failed", "the endpoint said no") in rec.events
    valid(session)


async def test_messages_typed_during_a_cycle_can_be_set_to_wait_for_its_end(session):
    provider = ScriptedProvider([say("first " * 50), say("second")], token_delay_s=0.002)
    agent, rec = make_agent(session, provider, message_while_busy="queue")
    agent.submit("one")
    await asyncio.wait_for(rec.streaming.wait(), 10)
    agent.submit("two")
    await agent.idle()
    texts = [(t.kind, t.content.split()[0]) for t in session.turns]
    assert texts == [(TurnKind.USER, "one"), (TurnKind.ASSISTANT, "first"),
                     (TurnKind.USER, "two"), (TurnKind.ASSISTANT, "second")]
    valid(session)


async def test_by_default_a_message_typed_during_a_safe_thought_restarts_it(session):
    provider = ScriptedProvider([say("first " * 50), say("second")], token_delay_s=0.002)
    agent, rec = make_agent(session, provider)
    agent.submit("one")
    await asyncio.wait_for(rec.streaming.wait(), 10)
    agent.submit("two")
    await agent.idle()
    texts = [(t.kind, t.content.split()[0]) for t in session.turns]
    assert texts == [(TurnKind.USER, "one"), (TurnKind.USER, "two"),
                     (TurnKind.ASSISTANT, "second")]
    valid(session)


async def test_status_counts_the_context(session):
    agent, _ = make_agent(session, ScriptedProvider([say("hi")]))
    agent.submit("hello")
    await agent.idle()
    status = agent.status()
    assert status.session_turns == 2 and not status.busy
    assert 0 < status.context_tokens < status.context_window
