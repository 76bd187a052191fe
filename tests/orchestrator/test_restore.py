"""After a restart, every archived event the model never received reaches it once.

First the core (restoring holds every start until all is in), then the shell
on real stores: replay with original IDs and times, retired channels,
re-classified urgency, pending deliveries judged by the turn store, the
model's own polls discarded by a safe cancellation, the commit delay.
"""

from __future__ import annotations


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind
from noema.orchestrator.agent import Senses
from noema.orchestrator.core import OrchestratorBug, Phase
from noema.orchestrator.decisions import (
    Deliver,
    HandOver,
    Queued,
    QueueReason,
    StartCycle,
    WakeAt,
)
from noema.orchestrator.delivery import plan_package, write_package
from noema.orchestrator.inputs import (
    Perceived,
    PersonMessage,
    Polled,
    RestoreBegun,
    RestoreDone,
    ToolFinished,
    ToolStarted,
)
from noema.orchestrator.queue import PendingQueue
from noema.perception.archive import SensoryArchive
from noema.perception.deliveries import check_runs
from noema.perception.events import Nature, SensorInfo, TreatmentParams, Urgency
from noema.perception.packing import render_pool_event
from noema.perception.pipeline import Parcel, Pipeline
from noema.perception.tools import pool_event_tool
from noema.providers.scripted import ScriptedProvider, call, say

from .conftest import CATALOGUE, T0, event, reflexes
from .rig import DELIMITER, check_both_protocols, event_ids, make_agent, until, wait

QUICK = {"idle_quiet_window_s": 0, "idle_max_wait_s": 0, "world_tokens_per_hour": None}


def of(decisions, kind) -> list:
    return [d for d in decisions if isinstance(d, kind)]


# -- the core ------------------------------------------------------------------------------


def test_nothing_starts_while_restoring_and_one_package_carries_it_all():
    core = reflexes()
    assert core.handle(RestoreBegun(T0)) == []
    urgent = event("pager", "down")
    decisions = core.handle(Perceived(urgent, Urgency.URGENT, T0))
    assert [d.reason for d in of(decisions, Queued)] == [QueueReason.RESTORING]
    core.handle(Perceived(event("alerts", "old news"), Urgency.NORMAL, T0))
    assert core.handle(PersonMessage(7, T0)) == []
    assert core.phase is Phase.IDLE and core.status().wake_at is None
    decisions = core.handle(RestoreDone(T0))
    [deliver] = of(decisions, Deliver)
    assert of(decisions, StartCycle) and deliver.package.person_turns == (7,)
    assert len(deliver.package.items) == 2 and deliver.package.top is Urgency.URGENT


def test_restored_normal_events_wake_the_agent_after_the_quiet_window():
    core = reflexes(idle_quiet_window_s=2.0, idle_max_wait_s=10.0)
    core.handle(RestoreBegun(T0))
    core.handle(Perceived(event("alerts", "a"), Urgency.NORMAL, T0))
    decisions = core.handle(RestoreDone(T0))
    assert of(decisions, WakeAt) == [WakeAt(T0 + 2)] and not of(decisions, StartCycle)


def test_a_restore_is_only_legal_once_and_while_idle():
    core = reflexes()
    with pytest.raises(OrchestratorBug):
        core.handle(RestoreDone(T0))
    core.handle(RestoreBegun(T0))
    with pytest.raises(OrchestratorBug):
        core.handle(RestoreBegun(T0))
    core.handle(RestoreDone(T0))
    core.handle(PersonMessage(1, T0))
    with pytest.raises(OrchestratorBug):
        core.handle(RestoreBegun(T0))


def test_what_the_model_polls_carries_the_archive_offsets_of_every_event():
    archive = SensoryArchive(":memory:")
    core = reflexes()
    core.handle(PersonMessage(1, T0))
    core.handle(ToolStarted(1, 9, "file_write", True, T0))  # unsafe: priority waits
    core.handle(ToolFinished(1, 9, True, T0))
    sent = [archive.append(event("logs", f"l{i}", key="k"), "key:k", T0) for i in range(5)]
    for e in sent:
        core.handle(Perceived(e, Urgency.NORMAL if e.batch_seq % 2 else Urgency.PRIORITY, T0))
    core.handle(ToolStarted(1, 10, "pool_event", False, T0))
    [handed] = of(core.handle(Polled(1, T0)), HandOver)
    assert sorted(handed.held) == [(1, 0, 0), (1, 1, 1), (1, 2, 2), (1, 3, 3), (1, 4, 4)]
    assert sum(item.count for item in handed.items) == 5
    archive.close()


# -- the shell on real stores ------------------------------------------------------------------


class Life:
    """One process lifetime of an agent over the same data folder."""

    def __init__(self, folder, provider, *, catalogue=CATALOGUE, reflexes=None, tools=(),
                 commit_delay: float = 0.01) -> None:
        self.store = TurnStore(folder / "turns.db")
        self.session = Session.load(self.store)
        self.archive = SensoryArchive(folder / "archive.db")
        self.pipeline = Pipeline(self.archive, catalogue.values())
        senses = Senses(self.pipeline, lambda items, now: render_pool_event(
            items, DELIMITER, now=now), commit_delay=commit_delay)
        self.agent, self.rec = make_agent(self.session, provider, tools,
                                          reflexes=reflexes or QUICK, senses=senses)

    async def end(self) -> None:
        await self.agent.close()
        self.archive.close()
        self.store.close()

    def kill(self) -> None:
        """Gone without a word: nothing staged reaches the disk."""
        for timer in (self.agent._timer, self.agent._ledger._timer):
            if timer is not None:
                timer.cancel()
        if self.agent._task is not None:
            self.agent._task.cancel()
        self.archive.conn.close()
        self.store.close()


def delivered_events(rec) -> list:
    return [e for d in rec.of(Deliver) for item in d.package.items
            for e in getattr(item, "events", ())]


async def test_events_left_waiting_are_delivered_after_a_restart(tmp_path):
    first = Life(tmp_path, ScriptedProvider([]), reflexes={**QUICK, "world_tokens_per_hour": 0})
    sent = [event("alerts", f"evt-{i} disk", at=T0 + i) for i in range(3)]
    for e in sent:
        first.agent.perceive(e)
    assert first.agent.status().waiting_events == 1  # the world may not start cycles
    await first.end()

    second = Life(tmp_path, ScriptedProvider([say("Three old alerts.")]))
    second.agent.start()
    await second.agent.idle()
    assert sorted(event_ids(second.session.turns)) == ["evt-0", "evt-1", "evt-2"]
    again = delivered_events(second.rec)
    assert [(e.id, e.received_at) for e in again] == [(e.id, e.received_at) for e in sent]
    assert any("3 event(s) received before the restart" in n for n in second.rec.notices)
    check_both_protocols(second.session.turns)
    await second.end()

    third = Life(tmp_path, ScriptedProvider([]))
    third.agent.start()
    assert not third.rec.of(Deliver) and list(third.archive.undelivered()) == []
    await third.end()


async def test_a_channel_no_longer_configured_still_delivers_with_its_nature(tmp_path):
    quick_logs = SensorInfo("logs", "log lines", Nature.AGGREGATABLE,
                            treatment=TreatmentParams(window=0.05))
    first = Life(tmp_path, ScriptedProvider([]), catalogue={**CATALOGUE, "logs": quick_logs},
                 reflexes={**QUICK, "world_tokens_per_hour": 0})
    for i in range(4):
        first.agent.perceive(event("logs", f"evt-{i} timeout", key="timeout"))
    await first.end()

    without_logs = {k: v for k, v in CATALOGUE.items() if k != "logs"}
    second = Life(tmp_path, ScriptedProvider([say("Timeouts, from before.")]),
                  catalogue=without_logs)
    second.agent.start()
    info = second.pipeline.catalogue["logs"]
    assert "no longer configured" in info.description
    assert (info.nature, info.treatment.window) == (Nature.AGGREGATABLE, 0.05)  # as declared
    await wait(second.rec.cycle_started)
    await second.agent.idle()
    [item] = [i for d in second.rec.of(Deliver) for i in d.package.items]
    assert item.count == 4 and item.nature is Nature.AGGREGATABLE
    await second.end()


async def test_restored_events_are_classified_by_the_rules_of_today(tmp_path):
    first = Life(tmp_path, ScriptedProvider([]), reflexes={**QUICK, "world_tokens_per_hour": 0})
    first.agent.perceive(event("alerts", "evt-1 raid degraded"))
    await first.end()

    second = Life(tmp_path, ScriptedProvider([say("On it.")]), reflexes={
        "rules": [{"channel": "alerts", "text": "raid", "urgency": "urgent"}],
        "idle_quiet_window_s": 60, "idle_max_wait_s": 600})
    second.agent.start()
    assert second.rec.of(StartCycle)  # urgent now: no quiet window to wait for
    assert second.rec.of(Deliver)[0].package.top is Urgency.URGENT
    await second.agent.idle()
    await second.end()


async def test_a_waiting_message_and_restored_events_make_one_package(tmp_path):
    first = Life(tmp_path, ScriptedProvider([]), reflexes={**QUICK, "world_tokens_per_hour": 0})
    first.agent.perceive(event("pager", "evt-1 disk failing"))
    first.archive.flush()  # acknowledged: from now on it must not be lost
    first.session.stage(NewTurn(TurnKind.USER, "are you there?"))
    first.kill()

    second = Life(tmp_path, ScriptedProvider([say("Yes, and the disk is failing.")]))
    second.agent.start()
    [deliver] = second.rec.of(Deliver)
    assert len(second.rec.of(StartCycle)) == 1
    assert deliver.package.person_turns and len(deliver.package.items) == 1
    await second.agent.idle()
    check_both_protocols(second.session.turns)
    await second.end()


async def test_a_kill_between_the_two_commits_is_judged_by_the_turn_store(tmp_path):
    """Delivered (turns committed) but the archive never heard: not replayed.
    Opened in the archive but the turns never written: replayed."""
    first = Life(tmp_path, ScriptedProvider([say("Noted.")]), commit_delay=5.0)
    first.agent.perceive(event("pager", "evt-1 written"))
    await first.agent.idle()
    assert event_ids(first.session.turns) == ["evt-1"]
    assert first.archive.staged  # the settlement waits for the commit timer
    first.kill()

    second = Life(tmp_path, ScriptedProvider([]), reflexes={**QUICK, "world_tokens_per_hour": 0})
    second.agent.start()
    assert not second.rec.of(Deliver) and list(second.archive.undelivered()) == []
    # Now the other window: the archive records a delivery, the turns never come.
    second.agent.perceive(event("alerts", "evt-2 never written"))
    package = second.agent.core._queue.take(T0 + 10**9)
    steps = plan_package(package)
    second.pipeline.open_deliveries([s.parcel() for s in steps], T0)
    second.kill()

    third = Life(tmp_path, ScriptedProvider([say("Seen now.")]))
    third.agent.start()
    await third.agent.idle()
    assert event_ids(third.session.turns) == ["evt-1", "evt-2"]
    third.archive.flush()
    states = third.archive.conn.execute(
        "SELECT state, count(*) FROM deliveries GROUP BY state ORDER BY state").fetchall()
    assert states == [("delivered", 2), ("void", 1)]
    await third.end()


async def test_a_poll_discarded_by_a_safe_cancellation_is_delivered_once(tmp_path):
    holder = {}
    poll = pool_event_tool(lambda: holder["agent"].pending_events())
    provider = ScriptedProvider([
        say("Looking.", call("pool_event")),
        say("word " * 300),
        say("Both seen."),
    ], token_delay_s=0.002)
    life = Life(tmp_path, provider, tools=[poll], reflexes={
        **QUICK, "rules": [{"channel": "alerts", "text": "prio", "urgency": "priority"}]})
    holder["agent"] = life.agent
    life.agent.submit("anything?")
    life.agent.perceive(event("chat", "evt-1 polled", sender="ana"))
    await wait(life.rec.streaming)
    await until(lambda: len(provider.requests) >= 2, "the request after the poll")
    life.agent.perceive(event("alerts", "evt-2 prio"))  # cancels the safe thought
    await life.agent.idle()
    assert sorted(event_ids(life.session.turns)) == ["evt-1", "evt-2"]
    await life.agent.close()
    states = dict(life.archive.conn.execute(
        "SELECT state, count(*) FROM deliveries GROUP BY state").fetchall())
    assert states == {"void": 1, "delivered": 1}
    assert list(life.archive.undelivered()) == []
    check_both_protocols(life.session.turns)
    await life.end()


async def test_an_event_is_acknowledged_within_the_commit_delay(tmp_path):
    life = Life(tmp_path, ScriptedProvider([]), commit_delay=0.01,
                reflexes={**QUICK, "world_tokens_per_hour": 0})
    life.agent.perceive(event("alerts", "evt-1"))
    assert (life.archive.appended, life.archive.committed) == (1, 0)
    await until(lambda: life.archive.committed, "the archive's group commit")
    assert life.archive.committed == 1 and not life.archive.staged
    await life.end()


async def test_a_repeat_of_an_event_is_neither_archived_nor_delivered_again(tmp_path):
    life = Life(tmp_path, ScriptedProvider([say("Seen.")]))
    alert = event("pager", "evt-1")
    life.agent.perceive(alert)
    life.agent.perceive(alert)
    await life.agent.idle()
    assert life.archive.appended == 1 and event_ids(life.session.turns) == ["evt-1"]
    await life.end()


async def test_a_package_that_fails_to_be_written_stays_owed(tmp_path, monkeypatch):
    life = Life(tmp_path, ScriptedProvider([]), reflexes={**QUICK, "world_tokens_per_hour": 0})
    life.agent.perceive(event("alerts", "evt-1"))

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("noema.orchestrator.agent.write_package", broken)
    life.agent.submit("hello")  # stored: the failed delivery is the cycle's, told and survived
    await life.agent.idle()
    assert any("disk full" in notice for notice in life.rec.notices)
    monkeypatch.setattr("noema.orchestrator.agent.write_package", write_package)
    life.archive.flush()
    assert [e.text for e in life.archive.undelivered()] == ["evt-1"]
    assert life.archive.conn.execute("SELECT state FROM deliveries").fetchall() == [("void",)]
    life.kill()


# -- the queue's packages account for their events exactly ---------------------------------


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(CATALOGUE)), st.sampled_from(list(Urgency)),
                          st.integers(0, 2), st.booleans()), max_size=60))
def test_every_package_taken_names_exactly_its_events_in_the_archive(steps):
    """However a stream is split between urgency classes and packages, the
    deliveries recorded cover every archived event once, and nothing else."""
    archive = SensoryArchive(":memory:")
    pipeline = Pipeline(archive, CATALOGUE.values())
    queue = PendingQueue(pipeline.catalogue)
    now, all_runs = T0, []

    def deliver(entries) -> None:
        runs = tuple(run for entry in entries for run in entry.held)
        assert sum(last - first + 1 for _, first, last in runs) == sum(
            entry.item.count for entry in entries)
        all_runs.extend(runs)
        pipeline.settle(pipeline.open_deliveries(
            [Parcel("t", tuple(e.item for e in entries), runs)], now), True, now)

    for channel, urgency, who, take in steps:
        archived = pipeline.admit(event(channel, "x", sender=f"s{who}", key=f"k{who}"), now)
        queue.add_event(archived, urgency, now)
        now += 1
        package = queue.take(now) if take else None
        if package is not None:
            deliver(package.world)
    rest = queue.take_world(now + 10**6)
    if rest:
        deliver(rest)
    assert list(archive.undelivered()) == []
    check_runs(all_runs)  # raises if an event was counted twice
    assert sum(last - first + 1 for _, first, last in all_runs) == len(steps)
    archive.close()
