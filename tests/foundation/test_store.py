"""The turn store: append-only, immutable in the database itself, searchable."""

import sqlite3

import pytest
from hypothesis import given, settings, strategies as st

from noema.memory.store import COMPRESS_ABOVE, StoreError, TurnStore
from noema.memory.turns import Flag, NewTurn, TurnKind


def user(text: str) -> NewTurn:
    return NewTurn(TurnKind.USER, text)


def test_append_gives_increasing_ids_and_round_trips(store):
    first = store.append(user("hello there"))
    call = store.append(NewTurn(TurnKind.TOOL_CALL, tool_name="get_current_time",
                                call_id="c1", arguments='{"timezone": "UTC"}', cycle_id=3))
    assert call.id == first.id + 1
    again = store.get(call.id)
    assert again == call
    assert again.arguments == '{"timezone": "UTC"}' and again.cycle_id == 3
    assert store.get(999) is None
    assert store.last_id() == call.id and store.count() == 2


def test_a_person_with_a_sqlite_shell_cannot_edit_or_delete_a_turn(store):
    turn = store.append(user("the original words"))
    other = sqlite3.connect(store.path)  # as if from the sqlite3 command line
    for statement in (
        "UPDATE turns SET content = 'rewritten' WHERE id = ?",
        "UPDATE turns SET kind = 'note' WHERE id = ?",
        "UPDATE turns SET ts = 0 WHERE id = ?",
        "UPDATE turns SET id = 777 WHERE id = ?",
        "DELETE FROM turns WHERE id = ?",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            other.execute(statement, (turn.id,))
    other.close()
    assert store.get(turn.id).content == "the original words"


def test_flags_can_be_gained_but_never_lost(store):
    turn = store.append(user("x"))
    store.add_flags([turn.id], Flag.DISCARDED)
    store.add_flags([turn.id], Flag.PRUNED)
    assert store.get(turn.id).flags == Flag.DISCARDED | Flag.PRUNED
    with pytest.raises(sqlite3.IntegrityError, match="only new status flags"):
        store.conn.execute("UPDATE turns SET flags = 0 WHERE id = ?", (turn.id,))
    assert store.get(turn.id).flags == Flag.DISCARDED | Flag.PRUNED


def test_large_results_are_kept_whole_compressed_and_still_searchable(store):
    body = "line of a very long log with zanzibar inside\n" * (COMPRESS_ABOVE // 20)
    turn = store.append(NewTurn(TurnKind.TOOL_RESULT, body, tool_name="file_read", call_id="c9"))
    raw = store.conn.execute("SELECT content, length(content_z) FROM turns WHERE id = ?",
                             (turn.id,)).fetchone()
    assert raw[0] is None and raw[1] < len(body) / 5
    assert store.get(turn.id).content == body
    assert [h.turn.id for h in store.search("zanzibar")] == [turn.id]


def test_search_ranks_and_filters(store):
    a = store.append(user("the red bicycle was stolen from the garage"))
    b = store.append(NewTurn(TurnKind.ASSISTANT, "I am sorry about the bicycle"))
    store.append(user("unrelated words about cooking"))
    hits = store.search("bicycle")
    assert {h.turn.id for h in hits} == {a.id, b.id}
    assert [h.turn.id for h in store.search("bicycle", kinds=[TurnKind.USER])] == [a.id]
    assert store.search("bicycle", since=b.ts + 1) == []
    assert {h.turn.id for h in store.search("bicycles")} == {a.id, b.id}  # porter stemming
    with pytest.raises(StoreError, match="bad search expression"):
        store.search('"unbalanced')


def test_reopening_keeps_everything(tmp_path):
    store = TurnStore(tmp_path / "t.db")
    ids = [store.append(user(f"message {i}")).id for i in range(5)]
    store.close()
    again = TurnStore(tmp_path / "t.db")
    assert [t.content for t in again.get_many(ids)] == [f"message {i}" for i in range(5)]
    assert again.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again.close()


def test_turns_of_a_call_need_their_call_id_and_tool():
    with pytest.raises(ValueError, match="call_id"):
        NewTurn(TurnKind.TOOL_RESULT, "x")


texts = st.text(min_size=0, max_size=300)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([TurnKind.USER, TurnKind.ASSISTANT, TurnKind.NOTE]),
                          texts), min_size=1, max_size=20))
def test_whatever_is_appended_reads_back_identically(tmp_path_factory, items):
    store = TurnStore(tmp_path_factory.mktemp("s") / "t.db")
    appended = [store.append(NewTurn(kind, text)) for kind, text in items]
    assert store.get_many(t.id for t in appended) == appended
    assert [t.id for t in appended] == sorted({t.id for t in appended})
    store.close()


def test_a_store_from_before_sources_gains_the_column_and_keeps_it_immutable(tmp_path):
    """Schema 3: whose outside words a turn holds is a column of its own,
    written once like the rest; older turns read as holding none."""
    import sqlite3

    from noema.memory.turns import Source, SourceKind

    path = tmp_path / "turns.db"
    store = TurnStore(path)
    old = store.append(NewTurn(TurnKind.USER, "from before"))
    store.close()
    with sqlite3.connect(path) as db:  # make it a store of schema 2
        db.execute("DROP TRIGGER turns_never_edited")
        db.execute("ALTER TABLE turns DROP COLUMN sources")
        db.execute("PRAGMA user_version=2")
    store = TurnStore(path)
    try:
        assert store.get(old.id).sources == ()
        mallory = (Source(SourceKind.MAIL, "mallory@example.net"),)
        new = store.append(NewTurn(TurnKind.TOOL_RESULT, "x", tool_name="t", call_id="c",
                                   sources=mallory))
        assert store.get(new.id).sources == mallory
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            store.conn.execute("UPDATE turns SET sources = NULL WHERE id = ?", (new.id,))
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            store.conn.execute("UPDATE turns SET content = 'y' WHERE id = ?", (old.id,))
    finally:
        store.close()
