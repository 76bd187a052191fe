"""What the memory work added to the turn store."""

from __future__ import annotations

import sqlite3

import pytest

from noema.memory import savepoints
from noema.memory.savepoints import Report, Status
from noema.memory.store import StoreError
from noema.memory.turns import NewTurn, TurnKind

from .conftest import chat


def test_save_points_can_be_neither_edited_nor_deleted(session):
    chat(session, 2)
    report = Report(cited=(1,), covered=1, coverable=2, chars=10, words=2, tokens=3, retries=0,
                    chronicler="t/m", language="en")
    sp = savepoints.record(session.store, status=Status.ACCEPTED, previous=None,
                           turn_ids=[2, 1], text="## State\n", report=report)
    assert savepoints.get(session.store, sp.id).turn_ids == (1, 2)
    assert savepoints.get(session.store, sp.id).report == report
    with pytest.raises(sqlite3.IntegrityError):
        session.store.conn.execute("UPDATE save_points SET text = 'forged' WHERE id = ?", (sp.id,))
    with pytest.raises(sqlite3.IntegrityError):
        session.store.conn.execute("DELETE FROM save_points WHERE id = ?", (sp.id,))


def test_dated_appends_must_follow_time(store):
    store.append(NewTurn(TurnKind.USER, "first"), at=1000.0)
    assert store.append(NewTurn(TurnKind.USER, "same time"), at=1000.0).ts == 1000.0
    with pytest.raises(StoreError):
        store.append(NewTurn(TurnKind.USER, "earlier"), at=999.0)


def test_the_fast_unfiltered_search_ranks_like_the_filtered_one(store):
    for n in range(40):
        store.append(NewTurn(TurnKind.USER, f"apple {'pear ' * (n % 5)} note {n}"))
    fast = store.search('"pear" OR "apple"', limit=10)
    filtered = store.search('"pear" OR "apple"', limit=10, kinds=[TurnKind.USER])
    assert [h.turn.id for h in fast] == [h.turn.id for h in filtered]
    assert [h.score for h in fast] == sorted(h.score for h in fast)


def test_upkeep_merges_the_index_while_writes_are_quiet(store):
    import threading
    import time

    def segments() -> int:
        return store.conn.execute("SELECT COUNT(DISTINCT segid) FROM turns_fts_idx").fetchone()[0]

    before = set(threading.enumerate())
    store.start_upkeep(quiet_s=0.05, merge_pages=16)
    for n in range(120):  # one transaction each: one small index segment each
        store.append(NewTurn(TurnKind.USER, f"turn {n} about merging segments"))
    # Appends alone (automatic merging off, crisis merges of 16) leave 8 + 7
    # segments: three or fewer is the upkeep's work, whether it merged after
    # the burst or in a pause a loaded machine made during it.
    deadline = time.monotonic() + 30
    while segments() > 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert segments() <= 3, f"{segments()} index segments left unmerged after 30 s"
    assert len(store.search('"merging"', limit=200)) == 120
    ours = [t for t in threading.enumerate() if t.name == "turn-store-upkeep"
            and t not in before]  # other tests' stores may still be open
    store.close()
    assert ours and not any(t.is_alive() for t in ours)
