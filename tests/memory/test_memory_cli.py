"""`noema memory` and `noema lab compact` as text, and the export format."""

from __future__ import annotations

import io
import re

from noema.interfaces.commands.memory import (
    PersonSearch,
    export_turns,
    lab_compact,
    list_save_points,
    read_export,
    search_memory,
    show_save_point,
)
from noema.memory.chronicler import Chronicler
from noema.memory.compaction import Compactor
from noema.memory.search import HistorySearch
from noema.memory.settings import MemorySettings
from noema.memory.turns import Flag
from noema.providers.scripted import ScriptedProvider, say

from .conftest import chat, said_in, save_point_text
from .test_compaction import SETTINGS, ReadingChronicler


async def test_memory_lists_and_shows_save_points_with_resolved_citations(session):
    assert "No save point yet" in list_save_points(session.store, session)
    chat(session, 12)
    compactor = Compactor(session, Chronicler(ReadingChronicler(invent=99)), SETTINGS,
                          context_window=100_000)
    rejected = await compactor.compact()
    chat(session, 6)
    accepted = await Compactor(session, Chronicler(ReadingChronicler(invent=1)), SETTINGS,
                               context_window=100_000).compact()
    listing = list_save_points(session.store, session)
    assert re.search(rf"{accepted.save_point.id}\*\s+accepted", listing)
    assert "rejected: invented_id" in listing
    shown = show_save_point(session.store, accepted.save_point.id)
    assert "{cite:1} -> user" in shown and "question 0 about the garden" in shown
    assert "attempt 1: invented_id" in shown and "attempt 2: valid" in shown
    refused = show_save_point(session.store, rejected.save_point.id)
    assert "Rejected: invented_id" in refused and "987654" in refused
    assert "NO SUCH TURN" in refused
    assert "There is no save point 99" in show_save_point(session.store, 99)


def test_memory_search_prints_ranked_snippets(session):
    chat(session, 3, topic="the bicycle")
    text = search_memory(PersonSearch(HistorySearch(session.store)), "bicycle compost", limit=2)
    assert text.count("\n#") == 2 and "«bicycle»" in text or "«compost»" in text
    assert "ranked by words alone" in text
    assert "Nothing found" in search_memory(PersonSearch(HistorySearch(session.store)),
                                            "submarine")


def test_an_export_reads_back_with_its_ids(session, tmp_path):
    turns = chat(session, 3)
    session.remove([turns[-1].id], Flag.DISCARDED)
    buffer = io.StringIO()
    assert export_turns(session.store, buffer, agent="ana", session=session) == 5
    path = tmp_path / "talk.jsonl"
    path.write_text(buffer.getvalue())
    export = read_export(path)
    assert [t.id for t in export.turns] == [t.id for t in turns[:-1]]
    assert export.turns[0].content == turns[0].content and export.agent == "ana"
    path.write_text('{"noema_export": 1}\n{"id": "x"}\n')
    try:
        read_export(path)
    except ValueError as exc:
        assert "line 2" in str(exc)
    else:
        raise AssertionError("a broken export was accepted")


async def test_lab_compact_reports_what_the_validator_said(session, tmp_path):
    chat(session, 8)
    buffer = io.StringIO()
    export_turns(session.store, buffer)
    path = tmp_path / "talk.jsonl"
    path.write_text(buffer.getvalue())
    export = read_export(path)
    first_block = list(range(1, 9))
    said = said_in(export.turns)
    provider = ScriptedProvider([
        say(save_point_text(first_block + [4242], said=said)),
        say(save_point_text(first_block, said=said)),
        say(save_point_text([1, 9, 10, 11, 12], said=said)),
    ])
    settings = MemorySettings(min_journey_words=20, retries=1)
    report = await lab_compact(export, provider, settings, block_turns=8, max_save_points=2)
    assert "save point 1: turns 1-8 (8 turns): VALID" in report
    assert "attempt 1 - [invented_id]" in report
    assert "save point 2: turns 9-16" in report
    assert "coverage" in report and "validator" in report
