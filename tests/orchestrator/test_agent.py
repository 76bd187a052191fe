"""The asyncio shell: each path of the reflexes through a real session and store."""

from __future__ import annotations

import asyncio

from noema.memory.turns import Flag, TurnKind
from noema.orchestrator.core import Phase
from noema.orchestrator.decisions import (
    KillTool,
    Queued,
    QueueReason,
    SafeCancel,
    UnsafeCancel,
)
from noema.orchestrator.repair import CANCELLED_TOOL
from noema.perception.clock import ManualClock
from noema.perception.tools import pool_event_tool
from noema.providers.scripted import ScriptedProvider, call, say
from noema.tools.registry import ToolContext, tool

from .conftest import T0, event
from .rig import (
    check_both_protocols,
    check_notices,
    event_ids,
    make_agent,
    make_senses,
    never_discarded,
    wait,
)

PRIORITY_ALERTS = {"rules": [{"channel": "alerts", "urgency": "priority"}],
                   "idle_quiet_window_s": 0, "idle_max_wait_s": 0}

notes: list[str] = []


@tool(side_effects=True)
def write_note(ctx: ToolContext, text: str) -> str:
    """Write a note (atomic: no await between its start and its end).

    Args:
        text: The note.
    """
    notes.append(text)
    return f"wrote {text!r}"


@tool(side_effects=True)
async def slow_job(ctx: ToolContext) -> str:
    """A long command."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        ctx.interruption.append("The command was killed; its output so far: 'step 1 of 3'.")
        raise
    return "done"


@tool(side_effects=False)
async def slow_read(ctx: ToolContext) -> str:
    """A long read."""
    await asyncio.sleep(30)
    return "read"


def kinds(session):
    return [(t.kind, t.tool_name) for t in session.turns]


async def test_a_priority_event_cancels_a_safe_thought_and_the_model_never_knows(session):
    provider = ScriptedProvider([say("word " * 300), say("I see the alert.")], token_delay_s=0.002)
    agent, rec = make_agent(session, provider, reflexes=PRIORITY_ALERTS)
    agent.submit("write me a long poem")
    await wait(rec.streaming)
    agent.perceive(event("alerts", "evt-1 disk almost full"))
    await agent.idle()
    assert kinds(session) == [
        (TurnKind.USER, None), (TurnKind.TOOL_CALL, "pool_event"), (TurnKind.EVENT, "pool_event"),
        (TurnKind.ASSISTANT, None),
    ]
    assert event_ids(session.turns) == ["evt-1"]
    # The half-written poem left the context but not the store.
    discarded = [t for t in session.store.range(1, 100) if t.has(Flag.DISCARDED)]
    assert len(discarded) == 1 and discarded[0].has(Flag.INTERRUPTED)
    assert discarded[0].content.startswith("word")
    # The restarted request is the input, then the event: as if it came just before.
    second = provider.requests[1]
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert not any("word word" in m.content for m in second.messages)
    assert [e[0] for e in rec.ends] == ["cancelled_safe", "answered"]
    assert rec.notices == ["interrupted: a priority event arrived from alerts"]
    check_both_protocols(session.turns)
    assert session.store.open_cycles() == []


async def test_a_read_only_tool_is_killed_by_a_safe_cancellation(session):
    provider = ScriptedProvider([say("Reading.", call("slow_read")), say("Alert seen.")])
    agent, rec = make_agent(session, provider, [slow_read], reflexes=PRIORITY_ALERTS)
    agent.submit("read the big file")
    await wait(rec.tool_started)
    agent.perceive(event("alerts", "evt-2"))
    await agent.idle()
    assert [type(d).__name__ for d in rec.decisions if isinstance(d, (KillTool, SafeCancel))] == [
        "KillTool", "SafeCancel"]
    assert [t.kind for t in session.turns] == [
        TurnKind.USER, TurnKind.TOOL_CALL, TurnKind.EVENT, TurnKind.ASSISTANT]
    check_both_protocols(session.turns)


async def test_an_urgent_alert_after_a_file_write_cancels_unsafely(session):
    notes.clear()
    provider = ScriptedProvider([
        say("Writing the draft.", call("write_note", text="draft 1")),
        say("word " * 300),
        say("The server is down; I stop the draft and look at it."),
    ], token_delay_s=0.002)
    agent, rec = make_agent(session, provider, [write_note])
    agent.submit("write the draft, then explain it at length")
    await wait(rec.second_step_streaming)
    agent.perceive(event("pager", "evt-3 server down"))  # the pager is urgent by default
    await agent.idle()
    assert notes == ["draft 1"]  # the write happened once, and stays
    assert kinds(session) == [
        (TurnKind.USER, None), (TurnKind.ASSISTANT, None), (TurnKind.TOOL_CALL, "write_note"),
        (TurnKind.TOOL_RESULT, "write_note"),
        (TurnKind.TOOL_CALL, CANCELLED_TOOL), (TurnKind.TOOL_RESULT, CANCELLED_TOOL),
        (TurnKind.TOOL_CALL, "pool_event"), (TurnKind.EVENT, "pool_event"),
        (TurnKind.ASSISTANT, None),
    ]
    assert session.turns[3].content == "wrote 'draft 1'"
    check_notices(session.turns)
    # The model sees, in one step: it was cancelled, and why.
    last = provider.requests[-1].messages
    assert [m.role for m in last[-4:]] == ["assistant", "tool", "assistant", "tool"]
    assert last[-4].tool_calls[0].name == CANCELLED_TOOL and last[-3].content == "true"
    assert "server" in last[-1].content
    assert [e[0] for e in rec.ends] == ["cancelled_unsafe", "answered"]
    check_both_protocols(session.turns)


async def test_an_unsafe_cancellation_tells_what_a_killed_command_did(session):
    provider = ScriptedProvider([
        say("Running it.", call("slow_job"), call("write_note", text="after")),
        say("Understood: the job was killed half way."),
    ])
    agent, rec = make_agent(session, provider, [slow_job, write_note])
    agent.submit("run the job, then note it")
    await wait(rec.tool_started)
    agent.perceive(event("pager", "evt-4 stop everything"))
    await agent.idle()
    results = [t for t in session.turns if t.kind is TurnKind.TOOL_RESULT]
    killed, not_run = results[0], results[1]
    assert "killed; its output so far: 'step 1 of 3'" in killed.content
    assert killed.has(Flag.INTERRUPTED)
    assert not_run.content.startswith("Not run") and "no effect" in not_run.content
    check_notices(session.turns)
    check_both_protocols(session.turns)
    assert rec.of(KillTool)[0].side_effects


async def test_a_priority_event_in_an_unsafe_cycle_waits_for_its_end(session):
    notes.clear()
    provider = ScriptedProvider([
        say("", call("write_note", text="x")),
        say("word " * 60),
        say("Now about the alert."),
    ], token_delay_s=0.002)
    agent, rec = make_agent(session, provider, [write_note], reflexes=PRIORITY_ALERTS)
    agent.submit("note x and talk")
    await wait(rec.second_step_streaming)
    agent.perceive(event("alerts", "evt-5"))
    await agent.idle()
    queued = rec.of(Queued)
    assert queued[0].head and queued[0].reason is QueueReason.UNSAFE
    assert [t.kind for t in session.turns][-4:] == [
        TurnKind.ASSISTANT, TurnKind.TOOL_CALL, TurnKind.EVENT, TurnKind.ASSISTANT]
    assert session.turns[-4].content.startswith("word word")  # the thought was let finish
    assert [e[0] for e in rec.ends] == ["answered", "answered"]
    check_both_protocols(session.turns)


async def test_a_message_typed_while_the_agent_thinks_restarts_the_thought(session):
    provider = ScriptedProvider([say("first " * 300), say("second")], token_delay_s=0.002)
    agent, rec = make_agent(session, provider)
    agent.submit("one")
    await wait(rec.streaming)
    agent.submit("two")
    await agent.idle()
    assert [(t.kind, t.content.split()[0]) for t in session.turns] == [
        (TurnKind.USER, "one"), (TurnKind.USER, "two"), (TurnKind.ASSISTANT, "second")]
    check_both_protocols(session.turns)
    assert rec.idles == 1


async def test_in_queue_mode_a_message_waits_for_the_end_of_the_cycle(session):
    provider = ScriptedProvider([say("first " * 50), say("second")], token_delay_s=0.002)
    agent, rec = make_agent(session, provider, reflexes={"message_while_busy": "queue"})
    agent.submit("one")
    await wait(rec.streaming)
    agent.submit("two")
    await agent.idle()
    assert [(t.kind, t.content.split()[0]) for t in session.turns] == [
        (TurnKind.USER, "one"), (TurnKind.ASSISTANT, "first"),
        (TurnKind.USER, "two"), (TurnKind.ASSISTANT, "second")]


async def test_the_model_can_poll_its_events_and_gets_each_once(session):
    holder = {}
    poll = pool_event_tool(lambda: holder["agent"].pending_events())
    provider = ScriptedProvider([
        say("Let me look at what my senses have.", call("pool_event")),
        say("One alert, noted."),
    ], token_delay_s=0.005)
    agent, rec = make_agent(session, provider, [poll])
    holder["agent"] = agent
    agent.submit("anything new?")
    await wait(rec.streaming)
    agent.perceive(event("alerts", "evt-6 backup finished"))  # normal: waits in the queue
    await agent.idle()
    assert event_ids(session.turns) == ["evt-6"]
    assert len(provider.requests) == 2  # nothing left to deliver at the end of the cycle
    assert agent.status().waiting_events == 0
    check_both_protocols(session.turns)


async def test_a_burst_wakes_an_idle_agent_once_after_a_quiet_window(session):
    # The agent's clock moves only when told: a loop held up on a busy machine
    # cannot close the window between the two events.
    clock = ManualClock(T0)
    provider = ScriptedProvider([say("Two alerts; both look harmless.")])
    agent, rec = make_agent(session, provider, clock=clock,
                            reflexes={"idle_quiet_window_s": 0.05, "idle_max_wait_s": 1.0})
    agent.perceive(event("alerts", "evt-7", sender="a"))
    await asyncio.sleep(0.1)  # the agent's timer looks, and finds the window open
    clock.advance(0.01)
    agent.perceive(event("alerts", "evt-8", sender="b"))
    assert not agent.busy  # the window is still open
    clock.advance(0.1)  # quiet since evt-8 for longer than the window, within the longest wait
    await wait(rec.cycle_started)
    await agent.idle()
    assert sorted(event_ids(session.turns)) == ["evt-7", "evt-8"]
    assert len(provider.requests) == 1
    check_both_protocols(session.turns)


async def test_a_rule_can_bypass_a_sensor_the_model_silenced(session):
    senses = make_senses()
    provider = ScriptedProvider([say("Fire! Calling for help.")])
    agent, _rec = make_agent(session, provider, senses=senses, reflexes={
        "rules": [{"channel": "alerts", "text": "fire", "urgency": "urgent",
                   "bypass_stopped_sensor": True}],
        "idle_quiet_window_s": 0, "idle_max_wait_s": 0,
    })
    senses.pipeline.stop(["alerts"], 600, agent._clock())
    agent.perceive(event("alerts", "evt-9 all quiet"))
    await asyncio.sleep(0)
    assert not agent.busy and agent.status().waiting_events == 0  # dropped by the gate
    agent.perceive(event("alerts", "evt-10 fire in the server room"))
    await agent.idle()
    assert event_ids(session.turns) == ["evt-10"]


async def test_when_the_world_budget_is_spent_events_wait_for_the_person(session):
    provider = ScriptedProvider([say("You wrote; and an alert was waiting.")])
    agent, _rec = make_agent(session, provider, reflexes={
        "world_tokens_per_hour": 0, "idle_quiet_window_s": 0, "idle_max_wait_s": 0})
    agent.perceive(event("pager", "evt-11 disk failing"))
    await asyncio.sleep(0)
    status = agent.status()
    assert not status.busy and status.waiting_events == 1
    assert status.reflexes.world_budget_exhausted
    agent.submit("hello")
    await agent.idle()
    assert event_ids(session.turns) == ["evt-11"]
    assert [t.kind for t in session.turns][:1] == [TurnKind.TOOL_CALL]  # urgent goes first
    check_both_protocols(session.turns)


async def test_a_repeated_event_is_delivered_once(session):
    provider = ScriptedProvider([say("Seen.")])
    agent, _rec = make_agent(session, provider, reflexes={"idle_quiet_window_s": 0,
                                                         "idle_max_wait_s": 0})
    alert = event("pager", "evt-12")
    agent.perceive(alert)
    agent.perceive(alert)
    await agent.idle()
    assert event_ids(session.turns) == ["evt-12"]


async def test_stop_keeps_what_the_person_saw_and_starts_nothing(session):
    provider = ScriptedProvider([say("word " * 400)], token_delay_s=0.002)
    agent, rec = make_agent(session, provider)
    agent.submit("talk")
    await wait(rec.streaming)
    assert await agent.stop()
    assert not await agent.stop()
    assert session.turns[-2].has(Flag.INTERRUPTED) and session.turns[-1].kind is TurnKind.NOTE
    assert [e[0] for e in rec.ends] == ["stopped"]
    never_discarded(session)
    check_both_protocols(session.turns)


async def test_closing_mid_cycle_leaves_a_valid_history(session):
    provider = ScriptedProvider([say("Running.", call("slow_job"))])
    agent, rec = make_agent(session, provider, [slow_job])
    agent.submit("run")
    await wait(rec.tool_started)
    await agent.close()
    assert [e[0] for e in rec.ends] == ["shutdown"]
    assert "killed" in session.turns[-1].content
    check_both_protocols(session.turns)
    assert session.store.open_cycles() == []


async def test_messages_stored_before_a_crash_are_answered_on_start(session):
    from noema.memory.turns import NewTurn

    session.stage(NewTurn(TurnKind.USER, "are you there?"))
    provider = ScriptedProvider([say("Yes.")])
    agent, _rec = make_agent(session, provider)
    agent.start()
    await agent.idle()
    assert [t.content for t in session.turns] == ["are you there?", "Yes."]


async def test_the_status_reports_the_reflexes(session):
    provider = ScriptedProvider([say("word " * 200)], token_delay_s=0.002)
    agent, rec = make_agent(session, provider, [write_note])
    agent.submit("talk")
    await wait(rec.streaming)
    status = agent.status()
    assert status.busy and status.reflexes.cycle.safety.value == "safe"
    assert status.reflexes.cycle.chunks >= 1
    await agent.stop()
    assert not rec.of(UnsafeCancel)


async def test_a_cancelled_tool_tells_the_model_what_it_did(session):
    @tool(side_effects=True)
    async def long_command(ctx: ToolContext) -> str:
        """A command that reports its effect when it is cancelled."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            ctx.interruption.append("Killed with its processes; output so far: 'compiling 3/9'.")
            raise
        return "done"

    provider = ScriptedProvider([say("", call("long_command")), say("Noted.")])
    agent, rec = make_agent(session, provider, [long_command])
    agent.submit("build it")
    await wait(rec.tool_started)
    agent.perceive(event("pager", "evt-13"))
    await agent.idle()
    result = next(t for t in session.turns if t.tool_name == "long_command" and t.is_result)
    assert "compiling 3/9" in result.content


async def test_a_cycle_cancelled_before_its_task_first_runs_still_ends(session):
    """A sensor that reports a burst in one go: the first urgent event starts a
    cycle, the second cancels it before its task has run a single step. The
    abort must still be carried out, or the agent would wait for it forever."""
    provider = ScriptedProvider([say("Two pages."), say("Both seen.")])
    agent, rec = make_agent(session, provider, reflexes={"idle_quiet_window_s": 0,
                                                         "idle_max_wait_s": 0})
    agent.perceive(event("pager", "evt-13 disk failing"))
    agent.perceive(event("pager", "evt-14 disk gone"))
    await agent.idle()
    assert [outcome for outcome, _ in rec.ends] == ["cancelled_safe", "answered"]
    assert sorted(event_ids(session.turns)) == ["evt-13", "evt-14"]
    assert agent.core.phase is Phase.IDLE
    check_both_protocols(session.turns)
