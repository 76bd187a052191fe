"""The session: persisted on every change, restored identically."""

import pytest

from noema.memory.session import Session
from noema.memory.turns import Flag, NewTurn, TurnKind


def test_every_change_is_on_disk_at_once(store, session):
    a = session.append(NewTurn(TurnKind.USER, "one"))
    b = session.append(NewTurn(TurnKind.ASSISTANT, "two"))
    c = session.append(NewTurn(TurnKind.USER, "three"))
    assert Session.load(store).ids() == [a.id, b.id, c.id]
    session.remove([b.id], Flag.DISCARDED)
    restored = Session.load(store)
    assert restored.ids() == [a.id, c.id]
    assert store.get(b.id).has(Flag.DISCARDED)  # left the context, kept in the store


def test_staged_turns_are_stored_but_join_the_context_only_when_admitted(store, session):
    session.append(NewTurn(TurnKind.USER, "start"))
    waiting = session.stage(NewTurn(TurnKind.USER, "typed while busy"))
    assert waiting.id not in session.ids()
    assert [t.id for t in Session.load(store).staged()] == [waiting.id]  # survives a restart
    session.admit(session.staged())
    assert session.ids()[-1] == waiting.id
    assert Session.load(store).staged() == []
    assert Session.load(store).ids() == session.ids()


def test_append_all_is_all_or_nothing(store, session, monkeypatch):
    session.append(NewTurn(TurnKind.USER, "before"))
    real_append = store.append
    calls = []

    def failing(new):
        calls.append(new)
        if len(calls) == 2:
            raise OSError("disk full")
        return real_append(new)

    monkeypatch.setattr(store, "append", failing)
    with pytest.raises(OSError):
        session.append_all([NewTurn(TurnKind.ASSISTANT, "a"), NewTurn(TurnKind.ASSISTANT, "b")])
    monkeypatch.undo()
    assert [t.content for t in session.turns] == ["before"]
    assert [t.content for t in Session.load(store).turns] == ["before"]
    assert store.count() == 1


def test_a_save_point_replaces_its_block(store, session):
    turns = [session.append(NewTurn(TurnKind.USER, f"m{i}")) for i in range(4)]
    session.replace_with_save_point([turns[0].id, turns[1].id], save_point_id=7)
    restored = Session.load(store)
    assert restored.ids() == [turns[2].id, turns[3].id]
    assert restored.save_point_id == 7
    assert store.get(turns[0].id).has(Flag.COMPACTED)


def test_marks_apply_to_the_session_copy_and_the_store(store, session):
    t = session.append(NewTurn(TurnKind.TOOL_RESULT, "big", tool_name="file_read", call_id="x"))
    session.mark([t.id], Flag.PRUNED)
    assert session.turns[0].has(Flag.PRUNED)
    assert Session.load(store).turns[0].has(Flag.PRUNED)


def test_a_failed_transaction_leaves_memory_and_disk_in_agreement(store, session):
    session.append(NewTurn(TurnKind.USER, "kept"))
    waiting = session.stage(NewTurn(TurnKind.USER, "staged"))
    with pytest.raises(RuntimeError):
        with session.transaction():
            session.admit([waiting])
            session.append(NewTurn(TurnKind.ASSISTANT, "half"))
            raise RuntimeError("crash in the middle of a delivery")
    assert [t.content for t in session.turns] == ["kept"]
    assert Session.load(store).ids() == session.ids()
    assert [t.id for t in session.staged()] == [waiting.id]
