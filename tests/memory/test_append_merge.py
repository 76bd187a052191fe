"""Index merging and WAL checkpoints happen in the store's upkeep, not in appends."""

from __future__ import annotations

import time

from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind
from noema.memory.upkeep import CRISIS_MERGE

DEADLINE_S = 20  # only stops a hang; the upkeep needs a fraction of a second


def segments(store: TurnStore) -> int:
    return int(store.conn.execute("SELECT COUNT(DISTINCT segid) FROM turns_fts_idx").fetchone()[0])


def fts_config(store: TurnStore) -> dict[str, int]:
    return {k: int(v) for k, v in store.conn.execute("SELECT k, v FROM turns_fts_config")}


def test_upkeep_takes_merging_and_checkpoints_off_the_append_path(store):
    assert "automerge" not in fts_config(store)  # FTS5's defaults until upkeep starts
    store.start_upkeep(quiet_s=0.05)
    config = fts_config(store)
    assert config["automerge"] == 0 and config["crisismerge"] == CRISIS_MERGE
    assert store.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    reopened = TurnStore(store.path)  # the index settings are stored with the index
    assert fts_config(reopened)["crisismerge"] == CRISIS_MERGE
    reopened.close()


def test_back_to_back_appends_leave_segments_that_the_upkeep_merges_consistently(store):
    # No quiet moment during the burst, however slowly a loaded machine runs it.
    store.start_upkeep(quiet_s=60)
    for n in range(CRISIS_MERGE - 1):  # one segment each, under the crisis merge
        store.append(NewTurn(TurnKind.USER, f"turn {n} about the lighthouse keeper"))
    assert segments(store) >= 8  # with automerge off, appends merged nothing
    upkeep = store._upkeep
    assert upkeep is not None
    upkeep.quiet_s = 0.05  # the burst is over: quiet from now on (looked at every second)
    deadline = time.monotonic() + DEADLINE_S
    while segments(store) > 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert segments(store) <= 3, f"{segments(store)} segments left unmerged"
    store.conn.execute("INSERT INTO turns_fts(turns_fts) VALUES('integrity-check')")
    found = store.conn.execute(
        "SELECT COUNT(*) FROM turns_fts WHERE turns_fts MATCH 'lighthouse'").fetchone()[0]
    assert found == CRISIS_MERGE - 1


def test_a_long_burst_keeps_few_segments_while_upkeep_waits(store):
    store.start_upkeep(quiet_s=60)  # the upkeep never finds a quiet moment during this test
    burst = CRISIS_MERGE * CRISIS_MERGE + 5  # long enough for a merge of merged segments
    for n in range(burst):
        store.append(NewTurn(TurnKind.USER, f"turn {n} about the harbour pilot"))
    # Appends merge each level once it holds CRISIS_MERGE segments: fewer than that per level.
    assert segments(store) < 3 * CRISIS_MERGE
    store.conn.execute("INSERT INTO turns_fts(turns_fts) VALUES('integrity-check')")
    found = store.conn.execute(
        "SELECT COUNT(*) FROM turns_fts WHERE turns_fts MATCH 'harbour'").fetchone()[0]
    assert found == burst
