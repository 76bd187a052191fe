"""The turn store's record of cycles: the most recent one, as a typed record."""

from __future__ import annotations

from noema.memory.store import StoredCycle, TurnStore


def test_no_cycle_yet(tmp_path):
    store = TurnStore(tmp_path / "turns.db")
    try:
        assert store.last_cycle() is None
    finally:
        store.close()


def test_the_most_recent_cycle_with_its_origin_and_status(tmp_path):
    store = TurnStore(tmp_path / "turns.db")
    try:
        first = store.open_cycle("person")
        store.close_cycle(first, "answered")
        second = store.open_cycle("world")
        assert store.last_cycle() == StoredCycle(second, "world", "open")
        store.close_cycle(second, "shutdown")
        assert store.last_cycle() == StoredCycle(second, "world", "shutdown")
    finally:
        store.close()


def test_it_survives_reopening_the_store(tmp_path):
    store = TurnStore(tmp_path / "turns.db")
    cycle = store.open_cycle("person")
    store.close_cycle(cycle, "crashed")
    store.close()
    again = TurnStore(tmp_path / "turns.db")
    try:
        last = again.last_cycle()
        assert last is not None and (last.id, last.origin, last.status) == (cycle, "person",
                                                                            "crashed")
    finally:
        again.close()
