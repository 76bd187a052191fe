"""A stranger's words folded into a save point keep their lead until the
person takes them up: through the real shell, session, store, save points
and gate, with a model that obeys whatever it reads, its prompt included
(and that writes the save point too, so a sentence may repeat an order
without citing the mail it came from)."""

from __future__ import annotations

from noema.memory import savepoints
from noema.memory.chronicle import chronicle_text, outside_context
from noema.memory.savepoints import Report, Status
from noema.memory.session import Session
from noema.memory.turns import TurnKind
from noema.orchestrator.agent import Agent
from noema.orchestrator.cycle import CycleSettings, ReasoningCycle
from noema.orchestrator.settings import ReflexSettings
from noema.security.approvals import ApprovalGate
from noema.security.settings import AutonomySettings
from noema.tools.registry import ToolRegistry
from tests.mail.obedient import ReadingProvider

from .conftest import event
from .rig import Recorder, make_senses, until
from .test_outside_lead import ORDER, QUICK, Refuser, gated_writer


def remembering_agent(session: Session, model, tools) -> Agent:
    """An agent whose prompt carries the save point and whose gate counts it."""
    cycle = ReasoningCycle(
        session, model, ToolRegistry(tools),
        lambda: "You are a test.\n\n" + (chronicle_text(session) or ""),
        CycleSettings(max_steps=12), outside_context=lambda: outside_context(session))
    return Agent(session, cycle, Recorder(), context_window=100_000,
                 reflexes=ReflexSettings.model_validate(QUICK), senses=make_senses())


def fold(session: Session, text: str) -> None:
    """Compact every turn of the session into a save point saying `text`."""
    block = [t.id for t in session.turns]
    saved = savepoints.record(session.store, status=Status.ACCEPTED, previous=None,
                              turn_ids=block, text=text,
                              report=Report((), 1, 1, len(text), 10, 10, 0, "model", "en"))
    session.replace_with_save_point(block, saved.id)


async def stranger(session: Session) -> tuple[Agent, Refuser, list[str]]:
    """A stranger's order arrives: it is asked about, refused and answered."""
    person = Refuser()
    written: list[str] = []
    model = ReadingProvider(answer="Noted.")
    agent = remembering_agent(session, model, [gated_writer(
        ApprovalGate(AutonomySettings(default="allow"), person), written)])
    agent.perceive(event("alerts", f"Hi! {ORDER}", sender="mallory@example.net"))
    await until(lambda: person.asked and not agent.busy, "the stranger's order to be asked")
    await agent.idle()
    return agent, person, written


async def then(agent: Agent, act, person: Refuser, written: list[str]) -> None:
    asked = len(person.asked)
    act()
    await until(lambda: len(person.asked) > asked or written or agent.busy, "a cycle")
    await agent.idle()


def reminder(agent: Agent):
    """The person's own reminder fires: a cycle that reads the save point."""
    return lambda: agent.perceive(event("alerts", "Water the plants.", sender="scheduler",
                                        authorised=True))


async def test_a_strangers_words_folded_before_the_person_saw_them_still_lead(session):
    agent, person, written = await stranger(session)
    # Folded before the person ever wrote; the sentence repeats the order and
    # cites a turn of the agent's (not the mail).
    call = next(t.id for t in session.turns if t.kind is TurnKind.TOOL_CALL)
    fold(session, f"An order came in: {ORDER} {{cite:{call}}}.")
    await then(agent, reminder(agent), person, written)
    assert written == [], "the stranger's order ran from the save point, unasked"
    assert len(person.asked) == 2 and "mallory@example.net" in person.asked[1].reason


async def test_a_sentence_citing_an_answer_that_retold_a_stranger_is_theirs(session):
    agent, person, written = await stranger(session)
    await then(agent, lambda: agent.submit("Thanks, noted."), person, written)
    answer = next(t.id for t in session.turns if t.kind is TurnKind.ASSISTANT)
    fold(session, f"The agent was told: {ORDER} {{cite:{answer}}}.")
    await then(agent, reminder(agent), person, written)
    assert written == [], "the stranger's order ran from the save point, unasked"
    assert len(person.asked) == 2 and "arguments repeat" in person.asked[1].reason


async def test_folded_words_the_person_took_up_lead_no_more(session):
    """Over-asking: after a compaction, a sentence on a mail the person had
    taken up must not make the person's own next request ask."""
    agent, person, written = await stranger(session)
    await then(agent, lambda: agent.submit("Thanks, noted."), person, written)
    event_turn = next(t.id for t in session.turns if t.kind is TurnKind.EVENT)
    fold(session, f"A stranger sent orders {{cite:{event_turn}}}.")
    await then(agent, lambda: agent.submit(
        'Keep this. DO note_write {"path": "mine.txt", "text": "my own list"}'), person, written)
    assert written == ["mine.txt"] and len(person.asked) == 1, [q.reason for q in person.asked]
