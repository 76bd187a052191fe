"""The reflexes core with plain values: no clock, no asyncio, no store."""

from __future__ import annotations

import pytest

from noema.orchestrator.core import (
    HELD_BACK,
    POLICY,
    TRANSITIONS,
    Action,
    OrchestratorBug,
    Phase,
    Safety,
)
from noema.orchestrator.decisions import (
    Deliver,
    Dropped,
    HandOver,
    KillTool,
    Origin,
    PersonEntry,
    Queued,
    QueueReason,
    StartCycle,
    WakeAt,
)
from noema.orchestrator.inputs import (
    CycleAborted,
    CycleEnded,
    ModelChunk,
    Outcome,
    Perceived,
    PersonMessage,
    PersonStop,
    Polled,
    StepStarted,
    Tick,
    ToolFinished,
    ToolStarted,
)
from noema.perception.events import Urgency

from .conftest import T0, event, reflexes


def types(decisions):
    return [type(d).__name__ for d in decisions]


def only(decisions, kind):
    found = [d for d in decisions if isinstance(d, kind)]
    assert len(found) == 1, decisions
    return found[0]


def running(core, turn_id=1, at=T0):
    """A core with run 1 in flight, started by a message of the person."""
    decisions = core.handle(PersonMessage(turn_id, at))
    assert types(decisions) == ["Deliver", "StartCycle"]
    return decisions


def make_unsafe(core, run=1, call=10, at=T0):
    core.handle(ToolStarted(run, call, "file_write", True, at))
    core.handle(ToolFinished(run, call, True, at))


def perceive(core, urgency, channel="alerts", text="x", at=T0, **kw):
    e = event(channel, text, at=at, **kw)
    return e, core.handle(Perceived(e, urgency, at))


# -- starting ------------------------------------------------------------------------


def test_a_message_to_an_idle_agent_starts_a_cycle_at_once():
    core = reflexes()
    deliver, start = running(core, turn_id=7)
    assert deliver.package.person_turns == (7,) and not deliver.notice
    assert start == StartCycle(1, Origin.PERSON)
    assert core.phase is Phase.RUNNING and core.run == 1


def test_an_urgent_event_wakes_an_idle_agent_without_waiting_for_quiet():
    core = reflexes(idle_quiet_window_s=5.0, idle_max_wait_s=30.0)
    e, decisions = perceive(core, Urgency.URGENT)
    assert types(decisions) == ["Deliver", "StartCycle"]
    assert decisions[1].origin is Origin.WORLD
    assert decisions[0].package.items[0].events == (e,)


def test_a_quiet_window_groups_a_burst_before_waking():
    core = reflexes(idle_quiet_window_s=2.0, idle_max_wait_s=5.0)
    _, first = perceive(core, Urgency.NORMAL, sender="a", at=T0)
    assert only(first, Queued).reason is QueueReason.IDLE
    assert only(first, WakeAt).when == T0 + 2
    _, second = perceive(core, Urgency.PRIORITY, sender="b", at=T0 + 1.5)
    assert only(second, WakeAt).when == T0 + 3.5  # the window restarts with each arrival
    assert core.handle(Tick(T0 + 3)) == []
    decisions = core.handle(Tick(T0 + 3.5))
    deliver = only(decisions, Deliver)
    # Priority first, then normal: one package for the whole burst.
    assert [e.urgency for e in deliver.package.entries] == [Urgency.PRIORITY, Urgency.NORMAL]


def test_a_steady_stream_is_delivered_after_the_maximum_wait():
    core = reflexes(idle_quiet_window_s=2.0, idle_max_wait_s=5.0)
    started = []
    for step in range(8):
        _, decisions = perceive(core, Urgency.NORMAL, sender=f"s{step}", at=T0 + step)
        started += [d for d in decisions if isinstance(d, StartCycle)]
    assert len(started) == 1  # at T0 + 5, without waiting for a quiet moment


# -- the policy -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("urgency", "unsafe", "expected"),
    [
        (Urgency.NORMAL, False, ["Queued"]),
        (Urgency.NORMAL, True, ["Queued"]),
        (Urgency.PRIORITY, False, ["SafeCancel"]),
        (Urgency.PRIORITY, True, ["Queued"]),
        (Urgency.URGENT, False, ["SafeCancel"]),
        (Urgency.URGENT, True, ["UnsafeCancel"]),
    ],
)
def test_the_policy_by_urgency_and_safety(urgency, unsafe, expected):
    core = reflexes()
    running(core)
    if unsafe:
        make_unsafe(core)
    _, decisions = perceive(core, urgency)
    assert types(decisions) == expected
    if expected == ["Queued"]:
        queued = decisions[0]
        assert queued.head is (urgency is Urgency.PRIORITY)
        assert queued.reason is (QueueReason.UNSAFE if queued.head else QueueReason.NORMAL)


def test_the_policy_table_is_complete_and_guards_only_demote():
    assert set(POLICY) == {(u, s) for u in Urgency for s in Safety}
    assert all(HELD_BACK[a] in {Action.QUEUE, Action.QUEUE_AT_HEAD} for a in Action)
    # Normal never interrupts, urgent always does when it may.
    assert {POLICY[(Urgency.NORMAL, s)] for s in Safety} == {Action.QUEUE}
    assert {POLICY[(Urgency.URGENT, s)] for s in Safety} == {
        Action.SAFE_CANCEL, Action.UNSAFE_CANCEL}


def test_a_failed_side_effect_still_makes_the_cycle_unsafe():
    core = reflexes()
    running(core)
    core.handle(ToolStarted(1, 10, "shell_execute", True, T0))
    core.handle(ToolFinished(1, 10, False, T0))
    assert core.cycle().safety is Safety.UNSAFE
    assert core.cycle().last_confirmed_action is None  # it did not confirm anything


def test_read_only_tools_keep_the_cycle_safe_and_are_killed_by_a_cancellation():
    core = reflexes()
    running(core)
    core.handle(ToolStarted(1, 10, "file_read", False, T0))
    _, decisions = perceive(core, Urgency.PRIORITY)
    assert types(decisions) == ["KillTool", "SafeCancel"]
    assert decisions[0] == KillTool(1, 10, "file_read", False)


def test_an_urgent_event_during_a_side_effect_tool_kills_it_and_cancels_unsafely():
    core = reflexes()
    running(core)
    core.handle(ToolStarted(1, 10, "shell_execute", True, T0))
    _, decisions = perceive(core, Urgency.URGENT, channel="pager")
    assert types(decisions) == ["KillTool", "UnsafeCancel"]
    assert decisions[1].cause.channel == "pager"
    assert core.phase is Phase.CANCELLING


def test_the_cycle_record_tracks_steps_chunks_and_the_last_confirmed_action():
    core = reflexes()
    running(core)
    core.handle(StepStarted(1, 0, T0))
    for _ in range(3):
        core.handle(ModelChunk(1, T0))
    core.handle(ToolStarted(1, 10, "file_write", True, T0))
    assert core.cycle().running_tool == "file_write"
    core.handle(ToolFinished(1, 10, True, T0))
    core.handle(StepStarted(1, 1, T0))
    view = core.cycle()
    assert (view.step, view.chunks, view.tools_started, view.side_effects_started) == (1, 3, 1, 1)
    assert view.last_confirmed_action == "file_write (turn 10)"
    assert view.running_tool is None


# -- after a cancellation -----------------------------------------------------------------


def test_a_safe_cancellation_restarts_with_the_event_delivered():
    core = reflexes()
    running(core)
    e, _ = perceive(core, Urgency.PRIORITY)
    # Arrivals during the abort join the same package, in class order.
    late, _ = perceive(core, Urgency.NORMAL, sender="late")
    decisions = core.handle(CycleAborted(1, 120, T0))
    assert types(decisions) == ["Deliver", "StartCycle"]
    deliver, start = decisions
    assert not deliver.notice
    assert [entry.item.events[0] for entry in deliver.package.entries] == [e, late]
    assert start == StartCycle(2, Origin.PERSON)  # the person's cycle, restarted


def test_an_unsafe_cancellation_delivers_the_notice_and_the_event_together():
    core = reflexes()
    running(core)
    make_unsafe(core)
    normal, _ = perceive(core, Urgency.NORMAL, sender="n")
    urgent, _ = perceive(core, Urgency.URGENT, sender="u", at=T0 + 1)
    deliver, start = core.handle(CycleAborted(1, 0, T0 + 1))
    assert deliver.notice
    assert deliver.package.entries[0].item.events == (urgent,)  # right after the notice
    assert deliver.package.entries[1].item.events == (normal,)
    assert start.run == 2


def test_a_stop_aborts_without_delivering_and_holds_what_waits():
    core = reflexes()
    running(core)
    core.handle(ToolStarted(1, 10, "shell_execute", True, T0))
    assert types(core.handle(PersonStop(T0))) == ["KillTool", "StopCycle"]
    perceive(core, Urgency.NORMAL, sender="during")  # arrived while stopping
    decisions = core.handle(CycleAborted(1, 0, T0))
    # The event that arrived during the stop is new input: it wakes the agent.
    assert types(decisions) == ["Deliver", "StartCycle"]


def test_after_a_stop_old_events_wait_for_something_new():
    core = reflexes()
    running(core)
    perceive(core, Urgency.NORMAL, sender="before")
    core.handle(PersonStop(T0))
    assert core.handle(CycleAborted(1, 0, T0)) == []
    assert core.status(T0).held and core.handle(Tick(T0 + 100)) == []
    _, decisions = perceive(core, Urgency.NORMAL, sender="after", at=T0 + 101)
    deliver = only(decisions, Deliver)
    assert len(deliver.package.entries) == 2


def test_a_stop_during_a_cancellation_delivers_the_event_but_starts_nothing():
    core = reflexes()
    running(core)
    make_unsafe(core)
    perceive(core, Urgency.URGENT)
    assert core.handle(PersonStop(T0)) == []
    decisions = core.handle(CycleAborted(1, 0, T0))
    assert types(decisions) == ["Deliver"] and decisions[0].notice
    assert core.phase is Phase.IDLE


def test_a_stop_with_nothing_running_holds_the_queue():
    core = reflexes(idle_quiet_window_s=2.0, idle_max_wait_s=2.0)
    perceive(core, Urgency.NORMAL)
    assert core.handle(PersonStop(T0)) == [WakeAt(None)]
    assert core.handle(Tick(T0 + 10)) == []


# -- the end of a cycle -----------------------------------------------------------------


def test_normal_events_are_delivered_together_when_the_cycle_ends():
    core = reflexes()
    running(core)
    for n in range(3):
        perceive(core, Urgency.NORMAL, sender=f"s{n}", at=T0 + n)
    deliver, start = core.handle(CycleEnded(1, Outcome.ANSWERED, 50, T0 + 5))
    assert len(deliver.package.entries) == 3 and not deliver.notice
    assert [e.at for e in deliver.package.entries] == [T0, T0 + 1, T0 + 2]
    assert start == StartCycle(2, Origin.WORLD)


def test_a_priority_event_that_could_not_cancel_leads_the_next_package():
    core = reflexes()
    running(core)
    make_unsafe(core)
    perceive(core, Urgency.NORMAL, sender="first", at=T0)
    p, _ = perceive(core, Urgency.PRIORITY, sender="second", at=T0 + 1)
    deliver, _ = core.handle(CycleEnded(1, Outcome.ANSWERED, 50, T0 + 2))
    assert deliver.package.entries[0].item.events == (p,)


def test_aggregated_events_wait_for_their_window_even_at_the_end_of_a_cycle():
    core = reflexes()
    running(core)
    for n in range(5):
        perceive(core, Urgency.NORMAL, channel="logs", key="timeout", text="timeout",
                 at=T0 + n)
    decisions = core.handle(CycleEnded(1, Outcome.ANSWERED, 10, T0 + 10))
    assert only(decisions, WakeAt).when == T0 + 60  # the window opened at T0
    deliver = only(core.handle(Tick(T0 + 60)), Deliver)
    (item,) = deliver.package.items
    assert item.count == 5


def test_a_failed_cycle_does_not_start_another_on_its_own():
    core = reflexes()
    running(core)
    perceive(core, Urgency.NORMAL)
    assert core.handle(CycleEnded(1, Outcome.FAILED, 0, T0)) == []
    assert core.phase is Phase.IDLE and core.status(T0).held
    decisions = core.handle(PersonMessage(2, T0 + 1))  # the person speaks: both go
    assert only(decisions, Deliver).package.event_count == 1


# -- the person as a sensor ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "unsafe", "expected"),
    [
        ("queue", False, ["Queued"]),
        ("priority", False, ["SafeCancel"]),
        ("priority", True, ["Queued"]),
        ("urgent", True, ["UnsafeCancel"]),
    ],
)
def test_a_message_typed_while_busy_follows_the_configured_mode(mode, unsafe, expected):
    core = reflexes(message_while_busy=mode)
    running(core)
    if unsafe:
        make_unsafe(core)
    decisions = core.handle(PersonMessage(2, T0))
    assert types(decisions) == expected
    if expected != ["Queued"]:
        assert decisions[0].cause.channel is None  # the person


def test_an_urgent_message_of_the_person_comes_right_after_the_notice():
    core = reflexes(message_while_busy="urgent")
    running(core)
    make_unsafe(core)
    core.handle(PersonMessage(2, T0))
    deliver, start = core.handle(CycleAborted(1, 0, T0))
    assert deliver.notice and isinstance(deliver.package.entries[0], PersonEntry)
    assert start.origin is Origin.PERSON


# -- the model's own pool_event() ------------------------------------------------------------


def test_the_model_can_poll_for_events_and_gets_each_once():
    core = reflexes()
    running(core)
    perceive(core, Urgency.NORMAL, sender="a")
    perceive(core, Urgency.NORMAL, channel="logs", key="k", text="k")  # not ripe: still given
    core.handle(ToolStarted(1, 10, "pool_event", False, T0))
    handed = only(core.handle(Polled(1, T0)), HandOver)
    assert len(handed.items) == 2
    core.handle(ToolFinished(1, 10, True, T0))
    core.handle(ToolStarted(1, 11, "pool_event", False, T0))
    assert only(core.handle(Polled(1, T0)), HandOver).items == ()


def test_a_safe_cancellation_gives_back_what_the_discarded_cycle_had_polled():
    core = reflexes()
    running(core)
    e, _ = perceive(core, Urgency.NORMAL, sender="polled")
    core.handle(ToolStarted(1, 10, "pool_event", False, T0))
    core.handle(Polled(1, T0))
    core.handle(ToolFinished(1, 10, True, T0))
    perceive(core, Urgency.PRIORITY, sender="trigger")
    deliver, _ = core.handle(CycleAborted(1, 0, T0))
    assert e in [entry.item.events[0] for entry in deliver.package.entries]


def test_an_unsafe_cancellation_keeps_what_was_polled_delivered():
    core = reflexes()
    running(core)
    e, _ = perceive(core, Urgency.NORMAL, sender="polled")
    core.handle(ToolStarted(1, 10, "pool_event", False, T0))
    core.handle(Polled(1, T0))
    core.handle(ToolFinished(1, 10, True, T0))
    make_unsafe(core, call=11)
    perceive(core, Urgency.URGENT, sender="trigger")
    deliver, _ = core.handle(CycleAborted(1, 0, T0))
    assert e not in [entry.item.events[0] for entry in deliver.package.entries]


def test_a_poll_whose_result_was_never_stored_is_given_back():
    core = reflexes()
    running(core)
    e, _ = perceive(core, Urgency.NORMAL, sender="polled")
    core.handle(ToolStarted(1, 10, "pool_event", True, T0))
    core.handle(Polled(1, T0))
    perceive(core, Urgency.URGENT, sender="trigger")  # kills the poll before its result
    deliver, _ = core.handle(CycleAborted(1, 0, T0))
    assert e in [entry.item.events[0] for entry in deliver.package.entries]


# -- guards ---------------------------------------------------------------------------------


def test_a_repeated_event_is_dropped_and_an_unknown_channel_refused():
    core = reflexes()
    running(core)
    e, _ = perceive(core, Urgency.NORMAL)
    assert types(core.handle(Perceived(e, Urgency.URGENT, T0))) == ["Dropped"]
    stranger = event("nowhere")
    dropped = only(core.handle(Perceived(stranger, Urgency.URGENT, T0)), Dropped)
    assert "nowhere" in dropped.reason


def test_a_storm_of_urgent_events_cannot_cancel_forever():
    core = reflexes(progress={"max_cancellations": 3, "window_s": 60})
    running(core)
    run, at = 1, T0
    for n in range(3):
        perceive(core, Urgency.URGENT, sender=f"u{n}", at=at)
        core.handle(CycleAborted(run, 10, at))
        run, at = run + 1, at + 1
    _, decisions = perceive(core, Urgency.URGENT, sender="u3", at=at)
    queued = only(decisions, Queued)
    assert queued.head and queued.reason is QueueReason.GUARD
    assert core.status(at).guard_engaged
    # The cycle finishes; the held events are packed for its end.
    deliver, _ = core.handle(CycleEnded(run, Outcome.ANSWERED, 10, at + 1))
    assert deliver.package.top is Urgency.URGENT
    # A finished cycle clears the guard: the next urgent event interrupts again.
    _, decisions = perceive(core, Urgency.URGENT, sender="u4", at=at + 2)
    assert types(decisions) == ["SafeCancel"]


def test_the_guard_counts_only_cancellations_inside_its_window():
    core = reflexes(progress={"max_cancellations": 2, "window_s": 10})
    running(core)
    perceive(core, Urgency.URGENT, sender="a", at=T0)
    core.handle(CycleAborted(1, 0, T0))
    perceive(core, Urgency.URGENT, sender="b", at=T0 + 20)
    core.handle(CycleAborted(2, 0, T0 + 20))
    # The first cancellation has aged out: one in the window, so this one may cancel.
    _, decisions = perceive(core, Urgency.URGENT, sender="c", at=T0 + 21)
    assert types(decisions) == ["SafeCancel"]
    core.handle(CycleAborted(3, 0, T0 + 21))
    _, decisions = perceive(core, Urgency.URGENT, sender="d", at=T0 + 22)
    assert types(decisions) == ["Queued"]


def test_the_world_budget_stops_world_cycles_and_the_status_says_so():
    core = reflexes(world_tokens_per_hour=1000)
    perceive(core, Urgency.NORMAL, sender="a")  # starts a world cycle
    decisions = core.handle(CycleEnded(1, Outcome.ANSWERED, 1500, T0 + 10))
    assert decisions == []
    status = core.status(T0 + 10)
    assert status.world_budget_exhausted and status.world_tokens_spent == 1500
    _, decisions = perceive(core, Urgency.URGENT, sender="b", at=T0 + 20)
    assert only(decisions, Queued).reason is QueueReason.BUDGET
    assert only(decisions, WakeAt).when == T0 + 10 + 3600  # when the hour frees it
    # The person is not limited, and their cycle carries what waited.
    decisions = core.handle(PersonMessage(5, T0 + 30))
    deliver = only(decisions, Deliver)
    assert deliver.package.person_turns == (5,) and deliver.package.event_count == 1
    # The world cannot interrupt the person's cycle while the budget is spent.
    _, decisions = perceive(core, Urgency.URGENT, sender="c", at=T0 + 31)
    assert only(decisions, Queued).reason is QueueReason.BUDGET
    # ...but the person can.
    core_person = core.handle(PersonStop(T0 + 32))
    assert types(core_person) == ["StopCycle"]


def test_a_zero_budget_leaves_every_event_to_the_person():
    core = reflexes(world_tokens_per_hour=0)
    _, decisions = perceive(core, Urgency.URGENT)
    assert types(decisions) == ["Queued"] and decisions[0].reason is QueueReason.BUDGET
    assert core.status(T0).world_budget_frees_at is None


def test_the_person_s_cycles_do_not_spend_the_world_budget():
    core = reflexes(world_tokens_per_hour=1000)
    running(core)
    core.handle(CycleEnded(1, Outcome.ANSWERED, 5000, T0))
    assert core.status(T0).world_tokens_spent == 0


# -- protocol errors: our bugs, named -------------------------------------------------------


def test_an_input_that_cannot_happen_raises_a_named_bug():
    core = reflexes()
    with pytest.raises(OrchestratorBug, match="ToolStarted cannot happen while idle"):
        core.handle(ToolStarted(1, 10, "x", False, T0))
    running(core)
    with pytest.raises(OrchestratorBug, match="run 2"):
        core.handle(ModelChunk(2, T0))
    with pytest.raises(OrchestratorBug, match="CycleAborted cannot happen while running"):
        core.handle(CycleAborted(1, 0, T0))
    perceive(core, Urgency.URGENT)
    with pytest.raises(OrchestratorBug, match="ToolStarted cannot happen while cancelling"):
        core.handle(ToolStarted(1, 11, "file_write", True, T0))
    with pytest.raises(OrchestratorBug, match="not the running tool"):
        core.handle(ToolFinished(1, 12, True, T0))


def test_every_phase_has_its_transitions_in_the_table():
    for phase in Phase:
        assert any(p is phase for p, _ in TRANSITIONS)
    # The cycle's own reports are only legal while one exists.
    assert not any(p is Phase.IDLE and t in (ToolStarted, ModelChunk, CycleEnded)
                   for p, t in TRANSITIONS)


def test_inputs_cannot_be_built_invalid():
    with pytest.raises(ValueError):
        Tick(float("nan"))
    with pytest.raises(ValueError):
        CycleEnded(0, Outcome.ANSWERED, 0, T0)
    with pytest.raises(ValueError):
        CycleAborted(1, -5, T0)
    with pytest.raises(TypeError):
        Perceived(event(), "urgent", T0)  # type: ignore[arg-type]


def test_time_never_runs_backwards_inside_the_core():
    core = reflexes(idle_quiet_window_s=2.0, idle_max_wait_s=10.0)
    perceive(core, Urgency.NORMAL, sender="a", at=T0 + 5)
    assert core.status().wake_at == T0 + 7
    # An older clock reading counts as now: the burst's window is not moved back.
    _, decisions = perceive(core, Urgency.NORMAL, sender="b", at=T0)
    assert not [d for d in decisions if isinstance(d, WakeAt)]
    assert core.status().wake_at == T0 + 7


def test_a_package_is_ordered_and_cannot_be_empty():
    from noema.orchestrator.decisions import Package

    with pytest.raises(ValueError):
        Package(())
    with pytest.raises(ValueError, match="ordered"):
        Package((PersonEntry(1, Urgency.NORMAL, T0, 1), PersonEntry(2, Urgency.URGENT, T0, 2)))
