"""Words inside delivered events are found by `search_full_history` and by
`noema memory search`, while the model keeps reading the datamarked text.

The events go through the real agent: perceived, archived, packed into a
pool_event result and stored; the searches run on the real store."""

from __future__ import annotations

import asyncio
import json
import sqlite3

from noema.memory.recall_tools import memory_tools
from noema.memory.search import HistorySearch
from noema.memory.session import Session
from noema.memory.store import SCHEMA_VERSION, TurnStore
from noema.memory.turns import NewTurn, TurnKind
from noema.paths import AgentPaths
from noema.perception.untrusted import DEFAULT_MARKER
from noema.providers.scripted import ScriptedProvider, say
from noema.providers.base import ToolCall
from noema.tools.registry import ToolContext, ToolRegistry
from tests.foundation.damage import SCRIPT, config_text, noema
from tests.orchestrator.conftest import event
from tests.orchestrator.rig import DELIMITER, make_agent, wait

LINE = "kernel: panic on disk sda1, I/O error at sector 8812"


async def _deliver(session: Session, text: str) -> None:
    """One event perceived by an idle agent, delivered, answered."""
    provider = ScriptedProvider([say("Noted, the disk is failing.")])
    agent, rec = make_agent(session, provider,
                            reflexes={"idle_quiet_window_s": 0, "idle_max_wait_s": 0})
    agent.perceive(event("alerts", text, sender="syslog"))
    await wait(rec.cycle_started)
    await agent.idle()


def _search(store: TurnStore, query: str) -> str:
    registry = ToolRegistry(memory_tools(store, HistorySearch(store)))
    call = ToolCall("c1", "search_full_history", json.dumps({"query": query}))
    result = asyncio.run(registry.call(call, ToolContext("c1", 0, 1)))
    assert not result.is_error, result.content
    return result.content


def _pool_results(session: Session) -> list:
    return [t for t in session.turns if t.tool_name == "pool_event" and t.is_result]


def test_a_word_of_a_delivered_event_is_found_and_the_model_reads_it_marked(session):
    asyncio.run(_deliver(session, LINE))
    delivered = _pool_results(session)
    assert len(delivered) == 1
    assert DELIMITER.datamark(LINE) in delivered[0].content  # what the model reads
    assert "panic on disk" not in delivered[0].content
    for word in ("panic", "sda1", "sector"):
        found = _search(session.store, word)
        assert f"turn {delivered[0].id} " in found, found
    assert "No turn matches" in _search(session.store, "keyboard")


def test_the_session_token_is_not_a_searchable_word(session):
    asyncio.run(_deliver(session, LINE))
    assert "No turn matches" in _search(session.store, DELIMITER.token)


def test_noema_memory_search_finds_a_word_inside_a_delivered_event(tmp_path):
    paths = AgentPaths.for_agent("default", tmp_path / "home").ensure()
    paths.config_file.write_text(config_text(tmp_path / "workspace"))
    (paths.root / "script.toml").write_text(SCRIPT)
    store = TurnStore(paths.turns_db)
    try:
        asyncio.run(_deliver(Session.load(store), LINE))
    finally:
        store.close()
    result = noema(tmp_path / "home", "memory", "search", "panic")
    assert result.exit_code == 0, result.output
    assert "Nothing found" not in result.output and "pool_event" in result.output


def test_a_store_indexed_with_marks_is_indexed_again_on_open(tmp_path):
    path = tmp_path / "turns.db"
    store = TurnStore(path)
    marked = DELIMITER.datamark(LINE)
    plain = store.append(NewTurn(TurnKind.USER, "the panic button is red"))
    result = store.append(NewTurn(TurnKind.TOOL_RESULT, marked, tool_name="pool_event",
                                  call_id="p1"))
    store.close()
    # Make it a store of schema 1: the marked text in the index, as before.
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO turns_fts (turns_fts, rowid, body) VALUES ('delete', ?, ?)",
                   (result.id, marked.replace(DEFAULT_MARKER, " ")))
        db.execute("INSERT INTO turns_fts (rowid, body) VALUES (?, ?)", (result.id, marked))
        db.execute("PRAGMA user_version=1")
    with sqlite3.connect(path) as db:
        old = db.execute("SELECT rowid FROM turns_fts WHERE turns_fts MATCH 'panic'").fetchall()
    assert old == [(plain.id,)]  # the event's words could not be found

    store = TurnStore(path)
    try:
        hits = store.search("panic")
        assert sorted(h.turn.id for h in hits) == [plain.id, result.id]
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        integrity = "INSERT INTO turns_fts (turns_fts, rank) VALUES ('integrity-check', 1)"
        store.conn.execute(integrity)  # raises if the index disagrees with the turns
    finally:
        store.close()
