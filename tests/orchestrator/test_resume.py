"""A restart answers the question a shutdown or a crash cut short, once.

The core's side (`Resume`): a cycle over the history as it stands, with
nothing delivered, unless a restore runs or a message of the person waits
(the cycle they start answers the question too). The shell's side
(`Agent.start`): Resume is fed only when the store's last cycle answered the
person, ended in a shutdown or a crash, and no answer followed the question.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noema.memory.session import Session
from noema.memory.turns import NewTurn, TurnKind
from noema.orchestrator.core import OrchestratorBug, Phase
from noema.orchestrator.decisions import Deliver, Origin, StartCycle, WakeAt
from noema.orchestrator.inputs import (
    CycleEnded,
    Outcome,
    Perceived,
    PersonMessage,
    PersonStop,
    RestoreBegun,
    RestoreDone,
    Resume,
    Tick,
)
from noema.perception.events import Urgency
from noema.providers.base import MessageRole
from noema.providers.scripted import ScriptedProvider, say

from .conftest import T0, event, reflexes
from .rig import check_both_protocols, make_agent, wait
from .test_core_properties import GUARD, Shell, actions

# -- the core ----------------------------------------------------------------------------


def test_resume_starts_a_person_cycle_with_nothing_delivered():
    core = reflexes()
    out = core.handle(Resume(T0))
    assert out == [StartCycle(1, Origin.PERSON)]
    assert core.phase is Phase.RUNNING
    assert core.cycle().origin is Origin.PERSON


def test_resume_during_a_restore_does_nothing_and_the_restore_starts_the_cycle():
    core = reflexes()
    core.handle(RestoreBegun(T0))
    core.handle(Perceived(event("alerts", at=T0), Urgency.NORMAL, T0))
    assert core.handle(Resume(T0)) == []
    assert core.phase is Phase.IDLE
    out = core.handle(RestoreDone(T0 + 1))
    starts = [d for d in out if isinstance(d, StartCycle)]
    assert len(starts) == 1 and any(isinstance(d, Deliver) for d in out)


def test_resume_with_a_message_waiting_leaves_the_message_to_start_the_cycle():
    core = reflexes()
    core.handle(RestoreBegun(T0))
    core.handle(PersonMessage(7, T0))
    core.handle(RestoreDone(T0))  # the message's cycle starts here
    assert core.phase is Phase.RUNNING
    core.handle(CycleEnded(1, Outcome.ANSWERED, 10, T0 + 1))
    # With the message still queued (a restore under way), Resume adds nothing.
    core.handle(RestoreBegun(T0 + 2))
    core.handle(PersonMessage(8, T0 + 2))
    assert core.handle(Resume(T0 + 2)) == []
    out = core.handle(RestoreDone(T0 + 2))
    (deliver,) = [d for d in out if isinstance(d, Deliver)]
    assert deliver.package.person_turns == (8,)
    assert [d for d in out if isinstance(d, StartCycle)] == [StartCycle(2, Origin.PERSON)]


def test_resume_is_a_bug_while_a_cycle_runs():
    core = reflexes()
    core.handle(Resume(T0))
    with pytest.raises(OrchestratorBug):
        core.handle(Resume(T0))


def test_events_waiting_for_quiet_stay_queued_for_their_own_cycle():
    core = reflexes(idle_quiet_window_s=5.0, idle_max_wait_s=30.0)
    core.handle(Perceived(event("alerts", at=T0), Urgency.NORMAL, T0))
    assert core.phase is Phase.IDLE  # the burst has not gone quiet yet
    out = core.handle(Resume(T0 + 1))
    assert StartCycle(1, Origin.PERSON) in out
    assert not any(isinstance(d, Deliver) for d in out)
    assert WakeAt(None) in out  # no wake-up while a cycle runs
    out = core.handle(CycleEnded(1, Outcome.ANSWERED, 10, T0 + 10))
    (deliver,) = [d for d in out if isinstance(d, Deliver)]
    assert deliver.package.event_count == 1
    assert StartCycle(2, Origin.WORLD) in out


def test_a_resumed_cycle_stops_like_any_other_and_holds_what_waits():
    core = reflexes()
    core.handle(Resume(T0))
    core.handle(PersonStop(T0 + 1))
    assert core.phase is Phase.CANCELLING


_PRELUDE = st.lists(
    st.one_of(
        st.tuples(st.just("event"), st.sampled_from(["alerts", "logs", "chat", "pager"]),
                  st.sampled_from(list(Urgency)), st.sampled_from(["a", "b"])),
        st.just(("message",)),
        st.just(("tick",)),
    ),
    max_size=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prelude=_PRELUDE, restoring=st.booleans(), plan=actions,
       quiet=st.sampled_from([0.0, 2.0]))
def test_resume_on_start_keeps_the_policy_and_every_event_once(prelude, restoring, plan, quiet):
    """As on a start: what a restore feeds, then Resume; then anything."""
    shell = Shell(reflexes(idle_quiet_window_s=quiet, idle_max_wait_s=quiet * 5,
                           progress=GUARD))
    if restoring:
        shell.feed(RestoreBegun(shell.now))
    for name, *args in prelude:
        if name == "event":
            shell.perceive(*args)
        elif name == "message":
            shell.message()
        else:
            shell.now += 1.0
            shell.feed(Tick(shell.now))
    if restoring:
        shell.feed(RestoreDone(shell.now))
    core = shell.core
    if core.phase is Phase.IDLE:  # idle after a restore: no message of the person waits
        out = shell.feed(Resume(shell.now))
        assert not any(isinstance(d, Deliver) for d in out)
        assert [d for d in out if isinstance(d, StartCycle)] == [StartCycle(1, Origin.PERSON)]
        assert core.phase is Phase.RUNNING
    else:  # what the restore fed started a cycle: it answers the question as well
        assert shell.run is not None
    shell.play(plan)
    shell.drain()
    assert core.phase is Phase.IDLE
    assert core.status().waiting.events == 0
    assert shell.delivered + shell.handed == shell.accepted


# -- the shell -----------------------------------------------------------------------------


def _restart(session: Session) -> Session:
    """The session as the next process loads it from the same store."""
    return Session.load(session.store)


async def _start(session: Session, *answers: str):
    provider = ScriptedProvider([say(text) for text in answers])
    agent, rec = make_agent(session, provider)
    agent.start()
    await agent.idle()
    await agent.close()
    return provider, rec


def _user_texts(messages) -> list[str]:
    return [m.content for m in messages if m.role is MessageRole.USER]


async def test_a_shutdown_mid_answer_is_answered_on_the_next_start_and_only_then(session):
    provider = ScriptedProvider([say("word " * 400)], token_delay_s=0.002)
    agent, rec = make_agent(session, provider)
    agent.submit("what is the plan?")
    await wait(rec.streaming)
    await agent.close()
    assert [e[0] for e in rec.ends] == ["shutdown"]

    session = _restart(session)
    provider, rec = await _start(session, "Here is the plan.")
    assert len(provider.requests) == 1
    assert _user_texts(provider.requests[0].messages) == ["what is the plan?"]
    assert [e[0] for e in rec.ends] == ["answered"]
    assert any("answers it now" in n for n in rec.notices)
    texts = [(t.kind, t.content) for t in session.turns]
    assert texts == [(TurnKind.USER, "what is the plan?"),
                     (TurnKind.ASSISTANT, "Here is the plan.")]
    check_both_protocols(session.turns)

    session = _restart(session)  # answered: a third start does nothing
    provider, rec = await _start(session)
    assert provider.requests == [] and rec.ends == []
    assert session.store.last_cycle().status == "answered"


async def test_a_crash_mid_answer_is_answered_on_the_next_start(session):
    session.append(NewTurn(TurnKind.USER, "are the backups fine?"))
    session.store.open_cycle(Origin.PERSON.value)  # the process died in it

    session = _restart(session)
    provider, rec = await _start(session, "They are.")
    assert len(provider.requests) == 1
    assert _user_texts(provider.requests[0].messages)[0] == "are the backups fine?"
    assert session.turns[-1].content == "They are."
    # The crashed cycle was closed on the start, then the resumed one answered.
    assert [e[0] for e in rec.ends] == ["answered"]
    check_both_protocols(session.turns)


@pytest.mark.parametrize("status", ["stopped", "answered", "failed", "cancelled_safe"])
async def test_only_a_shutdown_or_a_crash_is_resumed(session, status):
    session.append(NewTurn(TurnKind.USER, "question"))
    cycle = session.store.open_cycle(Origin.PERSON.value)
    session.store.close_cycle(cycle, status)
    provider, rec = await _start(_restart(session), "answer")
    assert provider.requests == [] and rec.ends == []


async def test_a_world_cycle_cut_short_is_not_resumed(session):
    session.append(NewTurn(TurnKind.USER, "question"))
    session.append(NewTurn(TurnKind.ASSISTANT, "answer"))
    cycle = session.store.open_cycle(Origin.WORLD.value)
    session.store.close_cycle(cycle, "shutdown")
    provider, rec = await _start(_restart(session), "more")
    assert provider.requests == [] and rec.ends == []


async def test_a_question_answered_before_the_crash_is_not_answered_again(session):
    session.append(NewTurn(TurnKind.USER, "question"))
    session.append(NewTurn(TurnKind.ASSISTANT, "the answer, stored just before the crash"))
    session.store.open_cycle(Origin.PERSON.value)
    provider, rec = await _start(_restart(session), "a second answer")
    assert provider.requests == [] and rec.ends == []
    assert session.store.last_cycle().status == "crashed"


async def test_a_message_written_since_makes_one_cycle_that_sees_both(session):
    session.append(NewTurn(TurnKind.USER, "first question"))
    cycle = session.store.open_cycle(Origin.PERSON.value)
    session.store.close_cycle(cycle, "shutdown")
    session.stage(NewTurn(TurnKind.USER, "and a second one"))  # stored, never delivered
    provider, rec = await _start(_restart(session), "Both answered.")
    assert len(provider.requests) == 1
    assert _user_texts(provider.requests[0].messages) == ["first question", "and a second one"]
    assert [e[0] for e in rec.ends] == ["answered"]


async def test_with_no_cycle_ever_run_nothing_is_resumed(session):
    session.append(NewTurn(TurnKind.USER, "imported, never asked"))
    provider, rec = await _start(_restart(session), "answer")
    assert provider.requests == [] and rec.ends == []
