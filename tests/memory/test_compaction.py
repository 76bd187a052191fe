"""Compaction: valid save points replace, invalid ones never enter, nothing is lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from noema.identity import Identity
from noema.memory import savepoints
from noema.memory.chronicle import chronicle_text
from noema.memory.chronicler import Chronicler
from noema.interfaces.commands.memory import format_report
from noema.memory.compaction import Compactor
from noema.memory.session import Session
from noema.memory.settings import MemorySettings
from noema.memory.store import TurnStore
from noema.memory.turns import Flag, NewTurn, TurnKind
from noema.orchestrator.context import build_messages
from noema.orchestrator.prompt import build_system_prompt
from noema.providers.base import (
    Finish,
    ModelRequest,
    ProviderUnavailable,
    StreamEvent,
    TextDelta,
)
from noema.providers.scripted import ScriptedProvider, say

from .conftest import chat, said_in_request, save_point_text, tool_round

SETTINGS = MemorySettings(trigger_turns=20, keep_recent_turns=4, min_block_turns=4,
                          block_fraction=0.5, min_journey_words=20, retries=2,
                          retry_after_turns=6)


class ReadingChronicler:
    """A chronicler model that cites the turns it is shown (or invents, when told),
    optionally waiting for a signal before it answers."""

    name = "test"
    model = "reader"
    context_window = 200_000

    def __init__(self, *, invent: int = 0, gate: asyncio.Event | None = None,
                 fail: bool = False, misplace: int = 0) -> None:
        self.invent = invent  # this many first attempts cite a turn that does not exist
        self.misplace = misplace  # this many first attempts cite, for each turn, the next one
        self.gate = gate
        self.fail = fail
        self.requests: list[ModelRequest] = []
        self.started = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise ProviderUnavailable("the chronicler's endpoint is down")
        shown = request.messages[1].content.split("# Citable IDs")[0]
        said = said_in_request(shown)
        ids = list(said)
        if len(self.requests) <= self.misplace:
            said = dict(zip(ids[1:] + ids[:1], said.values(), strict=True))
        if len(self.requests) <= self.invent:
            ids.append(987_654)
        yield TextDelta(save_point_text(ids, said=said))
        yield Finish("stop")


def make(session: Session, chronicler, settings: MemorySettings = SETTINGS,
         window: int = 100_000) -> Compactor:
    return Compactor(session, Chronicler(chronicler), settings, context_window=window)


async def test_a_valid_save_point_replaces_the_block_and_the_previous_one(session):
    chat(session, 12)
    compactor = make(session, ReadingChronicler())
    assert compactor.due()
    first = await compactor.maybe_start()
    assert first.status == "accepted"
    sp1 = first.save_point
    assert session.save_point_id == sp1.id
    assert not set(sp1.turn_ids) & set(session.ids())
    assert all(t.has(Flag.COMPACTED) for t in session.store.get_many(sp1.turn_ids))

    chat(session, 12)
    second = await compactor.compact()
    assert second.status == "accepted"
    sp2 = second.save_point
    assert sp2.previous == sp1.id and session.save_point_id == sp2.id
    assert sp2.first_turn > sp1.last_turn
    text = chronicle_text(session)
    assert text is not None and sp2.text.strip() in text and sp1.text.strip() not in text
    kept = savepoints.listing(session.store)
    assert [sp.id for sp in kept] == [sp2.id, sp1.id]
    assert kept[0].report.cited and kept[0].report.coverage > 0


async def test_an_invalid_save_point_never_enters_the_context(session, tmp_path):
    chat(session, 12)
    before = session.ids()
    chronicler = ReadingChronicler(invent=99)
    compactor = make(session, chronicler)
    outcome = await compactor.compact()
    assert outcome.status == "rejected"
    assert len(chronicler.requests) == SETTINGS.retries + 1
    assert session.ids() == before and session.save_point_id is None
    reloaded = Session.load(TurnStore(session.store.path))
    assert reloaded.ids() == before and reloaded.save_point_id is None
    assert chronicle_text(session) is None
    prompt = build_system_prompt(Identity(tmp_path / "identity"), agent_name="t",
                                 chronicle=chronicle_text(session))
    everything = " ".join(m.content for m in build_messages(prompt, session.turns))
    assert "987654" not in everything
    record = savepoints.get(session.store, outcome.save_point.id)
    assert record.status is savepoints.Status.REJECTED
    assert len(record.report.attempts) == SETTINGS.retries + 1
    assert all(a.failures and a.failures[0][0] == "invented_id" for a in record.report.attempts)
    assert not any(t.has(Flag.COMPACTED) for t in session.turns)


async def test_the_retry_names_the_failures_and_can_succeed(session):
    chat(session, 12)
    chronicler = ReadingChronicler(invent=1)
    outcome = await make(session, chronicler).compact()
    assert outcome.status == "accepted" and outcome.save_point.report.retries == 1
    retry = chronicler.requests[1].messages
    assert "987654" in retry[-2].content  # the rejected attempt is shown back
    assert "validator rejected" in retry[-1].content and "987654" in retry[-1].content


TRIP = ["I want to take the night train to Lisbon next Friday",
        "The night train leaves Madrid at 21:40 and reaches Lisbon at 7:20",
        "Book a sleeper cabin for two on that train",
        "Done: cabin 12 on the Friday train, two berths, 180 euros",
        "Also remind me to water the tomatoes before I leave",
        "I will remind you on Friday at 18:00 to water the tomatoes",
        "What should I pack for a week in Lisbon in March",
        "A raincoat, good walking shoes and a light jumper for the evenings"]


async def test_citations_that_do_not_rest_on_their_turns_are_sent_back_and_the_share_is_kept(session):
    for n, text in enumerate(TRIP * 2):
        session.append(NewTurn(TurnKind.USER if n % 2 == 0 else TurnKind.ASSISTANT, text))
    chronicler = ReadingChronicler(misplace=1)
    outcome = await make(session, chronicler).compact()
    assert outcome.status == "accepted"
    record = savepoints.get(session.store, outcome.save_point.id)
    first, second = record.report.attempts
    assert [code for code, _ in first.failures] == ["unsupported_citations"]
    assert second.failures == ()
    retry = chronicler.requests[1].messages[-1].content  # what the chronicler is told
    assert "do not rest on the turn they cite" in retry
    assert ('spoke about Done: cabin 12 on the Friday train, two berths, 180 {cite:5}": turn 5 '
            'says "Also remind me to water the tomatoes before I leave"') in retry
    # the share of supported citations is stored with the save point
    report = record.report
    assert report.judged == len(report.cited) and report.unsupported == 0
    assert record.support == report.supported / report.judged and record.support >= 0.75


async def test_after_a_failure_the_next_try_waits_even_across_a_restart(session):
    chat(session, 12)
    await make(session, ReadingChronicler(invent=99)).compact()
    assert make(session, ReadingChronicler()).due() is None
    restarted = Session.load(TurnStore(session.store.path))
    assert make(restarted, ReadingChronicler()).due() is None
    chat(restarted, SETTINGS.retry_after_turns // 2 + 1)
    assert make(restarted, ReadingChronicler()).due()


async def test_a_chronicler_that_cannot_be_reached_is_recorded(session):
    chat(session, 12)
    outcome = await make(session, ReadingChronicler(fail=True)).compact()
    assert outcome.status == "rejected" and session.save_point_id is None
    assert "down" in outcome.save_point.report.error


async def test_turns_arriving_during_compaction_all_stay(session):
    chat(session, 12)
    gate = asyncio.Event()
    chronicler = ReadingChronicler(gate=gate)
    compactor = make(session, chronicler)
    task = compactor.maybe_start()
    await chronicler.started.wait()
    assert compactor.maybe_start() is None  # one compaction at a time
    arrived = chat(session, 10, topic="the roof")
    arrived += tool_round(session, "read_file", "contents " * 50, "late_call")
    staged = session.stage(NewTurn(TurnKind.USER, "written while the chronicler works"))
    session.admit([staged])
    arrived.append(staged)
    gate.set()
    outcome = await task
    assert outcome.status == "accepted"
    kept = set(session.ids())
    assert {t.id for t in arrived} <= kept
    everything = {t.id for t in session.store.range(1, session.store.last_id())}
    assert kept | set(outcome.save_point.turn_ids) == everything
    assert Session.load(session.store).ids() == session.ids()


async def test_compaction_while_the_agent_keeps_talking(session, tmp_path):
    from noema.orchestrator.agent import Agent
    from noema.orchestrator.cycle import ReasoningCycle
    from noema.tools.registry import ToolRegistry

    chat(session, 12)
    gate = asyncio.Event()
    chronicler = ReadingChronicler(gate=gate)
    compactor = make(session, chronicler)
    model = ScriptedProvider([say(f"reply {n}") for n in range(5)])
    agent = Agent(session, ReasoningCycle(session, model, ToolRegistry(), lambda: "system"),
                  context_window=100_000)
    agent.start()
    task = compactor.maybe_start()
    await chronicler.started.wait()
    sent = []
    for n in range(3):
        sent.append(agent.submit(f"message {n}"))
        await agent.idle()
    gate.set()
    outcome = await task
    assert outcome.status == "accepted"
    texts = [t.content for t in session.turns]
    assert all(t.id in session.ids() for t in sent)
    assert "reply 0" in texts and "reply 2" in texts
    await agent.close()


async def test_a_session_changed_under_the_chronicler_is_not_replaced(session):
    chat(session, 12)
    gate = asyncio.Event()
    chronicler = ReadingChronicler(gate=gate)
    task = make(session, chronicler).maybe_start()
    await chronicler.started.wait()
    session.remove([session.turns[1].id], Flag.DISCARDED)
    gate.set()
    outcome = await task
    assert outcome.status == "abandoned" and session.save_point_id is None
    assert savepoints.listing(session.store) == []


async def test_a_process_stopped_mid_compaction_leaves_the_session_as_it_was(session):
    chat(session, 12)
    before = session.ids()
    chronicler = ReadingChronicler(gate=asyncio.Event())
    compactor = make(session, chronicler)
    compactor.maybe_start()
    await chronicler.started.wait()
    await compactor.close()  # the shell's shutdown; a crash writes even less
    session.store.close()

    store = TurnStore(session.store.path)
    restored = Session.load(store)
    assert restored.ids() == before and restored.save_point_id is None
    assert savepoints.listing(store) == []
    outcome = await make(restored, ReadingChronicler()).compact()
    assert outcome.status == "accepted"
    store.close()


async def test_a_crash_inside_the_swap_rolls_everything_back(session, monkeypatch):
    chat(session, 12)
    before = session.ids()

    def broken(ids, save_point_id):
        raise RuntimeError("power cut")

    monkeypatch.setattr(session, "replace_with_save_point", broken)
    with pytest.raises(RuntimeError):
        await make(session, ReadingChronicler()).compact()
    store = TurnStore(session.store.path)
    assert savepoints.listing(store) == []
    assert Session.load(store).ids() == before
    store.close()


def test_the_trigger_counts_tokens_turns_and_pruning(session):
    compactor = make(session, ReadingChronicler(), window=4_000,
                     settings=SETTINGS.model_copy(update={"trigger_turns": 100}))
    chat(session, 3)
    assert compactor.due() is None
    for n in range(4):
        tool_round(session, "read_file", "line of a long file " * 150, f"c{n}")
    chat(session, 5)
    assert "tokens" in (compactor.due() or "")
    heavy = compactor.context_tokens()
    pruned = compactor.prune()
    assert len(pruned) == 4
    assert compactor.context_tokens() < heavy / 2
    assert compactor.due() is None  # pruning delayed the compaction
    many = make(session, ReadingChronicler(), settings=SETTINGS.model_copy(update={"trigger_turns": 12}))
    assert "turns" in (many.due() or "")


CHILD = """
import asyncio, sys
from noema.memory.chronicler import Chronicler
from noema.interfaces.commands.memory import format_report
from noema.memory.compaction import Compactor
from noema.memory.session import Session
from noema.memory.settings import MemorySettings
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind

class Hanging:
    name, model, context_window = "test", "hanging", 100_000
    async def stream(self, request):
        print("WRITING", flush=True)
        await asyncio.sleep(3600)
        yield None

async def main():
    session = Session.load(TurnStore(sys.argv[1]))
    for n in range(12):
        session.append(NewTurn(TurnKind.USER, f"question {n}"))
        session.append(NewTurn(TurnKind.ASSISTANT, f"answer {n}"))
    settings = MemorySettings(trigger_turns=20, keep_recent_turns=4)
    await Compactor(session, Chronicler(Hanging()), settings, context_window=100_000).compact()

asyncio.run(main())
"""


@pytest.mark.slow
async def test_kill_9_during_compaction_loses_nothing(tmp_path):
    import signal
    import sys

    path = tmp_path / "turns.db"
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(path), stdout=asyncio.subprocess.PIPE
    )
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), timeout=60)
    assert line.strip() == b"WRITING"
    child.send_signal(signal.SIGKILL)
    await child.wait()

    store = TurnStore(path)
    session = Session.load(store)
    assert len(session) == 24 and session.save_point_id is None
    assert savepoints.listing(store) == []
    assert not any(t.has(Flag.COMPACTED) for t in session.turns)
    outcome = await make(session, ReadingChronicler()).compact()
    assert outcome.status == "accepted"
    store.close()


async def test_with_the_searchs_embeddings_the_support_check_reads_meaning_too(session):
    from noema.memory.embeddings import EmbeddingTable, Meaning, embed_text
    from noema.memory.embeddings_local import OnnxEmbedder

    for n, text in enumerate(TRIP * 2):
        session.append(NewTurn(TurnKind.USER if n % 2 == 0 else TurnKind.ASSISTANT, text))
    model = OnnxEmbedder()
    turns = session.turns
    EmbeddingTable(session.store, model.name).put(  # as the background writer would
        [t.id for t in turns], model.embed([embed_text(t) for t in turns]))
    meaning = Meaning(session.store, model)
    compactor = Compactor(session, Chronicler(ReadingChronicler()), SETTINGS,
                          context_window=100_000, meaning=lambda: meaning)
    outcome = await compactor.compact()
    assert outcome.status == "accepted"
    report = outcome.save_point.report
    assert report.judged == len(report.cited) and report.words_only == 0
    assert not any("words alone" in note for note in report.notes)
    assert report.attempts[-1].support_ms > 0  # what reading the turns and embedding cost
    assert "cited turns and clause vectors" in format_report(report)
