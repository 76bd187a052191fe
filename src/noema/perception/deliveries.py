"""Delivery records: what became of each archived event, exactly once across a crash.

Every archived event ends one way: dropped at a closed gate (its batch is a
silenced one), delivered to the model (a delivery whose offset runs cover
it), or refused as a repeat of an event already received. A delivery is
recorded in two steps around the turn store's commit: `open` (pending,
committed before the pool_event turns are written), then `settle` as
delivered or void. On start, a pending delivery is settled by asking the
turn store whether its pool_event result exists and counts (the
orchestrator does this), so across a crash every event is delivered exactly
once. Settling counts the events in their batches (`batches.settled`), so
the archive replays only the batches that still hold some.

Settled deliveries are history: triggers refuse to edit or delete them.
The records live in the sensory archive's database and are committed with
its group commit (see `perception.archive`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Run = tuple[int, int, int]
"""(batch number, first offset, last offset): consecutive events of one batch, inclusive."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    id         INTEGER PRIMARY KEY,
    token      TEXT    NOT NULL,
    after_turn INTEGER NOT NULL,
    state      TEXT    NOT NULL
               CHECK (state IN ('pending', 'delivered', 'void', 'refused')),
    opened_at  REAL    NOT NULL,
    settled_at REAL
);
CREATE TABLE IF NOT EXISTS delivery_runs (
    delivery INTEGER NOT NULL REFERENCES deliveries(id),
    batch    INTEGER NOT NULL,
    first    INTEGER NOT NULL,
    last     INTEGER NOT NULL,
    CHECK (0 <= first AND first <= last),
    PRIMARY KEY (delivery, batch, first)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS delivery_runs_batch ON delivery_runs(batch);
CREATE TRIGGER IF NOT EXISTS deliveries_settle_once BEFORE UPDATE ON deliveries
WHEN OLD.state <> 'pending' OR NEW.id IS NOT OLD.id OR NEW.token IS NOT OLD.token
     OR NEW.after_turn IS NOT OLD.after_turn
BEGIN SELECT RAISE(ABORT, 'a settled delivery is history'); END;
CREATE TRIGGER IF NOT EXISTS deliveries_never_deleted BEFORE DELETE ON deliveries
BEGIN SELECT RAISE(ABORT, 'deliveries are never deleted'); END;
CREATE TRIGGER IF NOT EXISTS delivery_runs_fixed BEFORE UPDATE ON delivery_runs
BEGIN SELECT RAISE(ABORT, 'a delivery carries what it carried'); END;
CREATE TRIGGER IF NOT EXISTS delivery_runs_never_deleted BEFORE DELETE ON delivery_runs
BEGIN SELECT RAISE(ABORT, 'a delivery carries what it carried'); END;
"""


@dataclass(frozen=True, slots=True)
class PendingDelivery:
    """A delivery opened but not settled: its pool_event turn may or may not exist.

    `token` is the call ID of the pool_event call that carries it, and
    `after_turn` the turn that call is (0 for the orchestrator's own
    synthetic calls, whose IDs are unique), so the result can be found.
    """

    delivery_id: int
    token: str
    after_turn: int


def check_runs(runs: Iterable[Run]) -> tuple[Run, ...]:
    """Runs sorted by batch and offset; ValueError if any is malformed or two overlap."""
    ordered = sorted(runs)
    for index, (batch, first, last) in enumerate(ordered):
        if batch < 1 or not 0 <= first <= last:
            raise ValueError(f"({batch}, {first}, {last}) is not a run of archived offsets")
        if index and ordered[index - 1][0] == batch and ordered[index - 1][2] >= first:
            raise ValueError(f"runs overlap in batch b{batch}: an event counted twice")
    return tuple(ordered)


def complement(runs: Sequence[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """The offsets of a batch of `size` events that sorted, disjoint `runs` leave out,
    as inclusive (first, last) ranges."""
    left: list[tuple[int, int]] = []
    at = 0
    for first, last in runs:
        if first > at:
            left.append((at, min(first, size) - 1))
        at = max(at, last + 1)
        if at >= size:
            break
    if at < size:
        left.append((at, size - 1))
    return [(a, b) for a, b in left if a <= b]


class DeliveryRecords:
    """The archive's deliveries: staged here, written by the archive's group commit."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        last = conn.execute("SELECT MAX(id) FROM deliveries").fetchone()[0]
        self._next = (last or 0) + 1
        self._opened: list[tuple[tuple, tuple[Run, ...]]] = []
        self._settling: list[tuple[int, str, float]] = []

    def open(self, token: str, runs: Iterable[Run], now: float, *, after_turn: int = 0) -> int:
        """Stage a pending delivery of the events in `runs`; its ID."""
        if not isinstance(token, str) or not token:
            raise ValueError("a delivery is named by the call ID that carries it")
        checked = check_runs(runs)
        if not checked:
            raise ValueError("a delivery carries at least one archived event")
        delivery_id = self._next
        self._next += 1
        self._opened.append(((delivery_id, token, after_turn, now), checked))
        return delivery_id

    def settle(self, delivery_id: int, delivered: bool, now: float) -> None:
        """Stage the end of a pending delivery: delivered, or void (still to deliver)."""
        self._settling.append((delivery_id, "delivered" if delivered else "void", now))

    def refuse(self, token: str, run: Run, now: float) -> None:
        """Stage that the events of `run` were refused as repeats of ones already received."""
        delivery_id = self.open(token, [run], now)
        self._settling.append((delivery_id, "refused", now))

    def pending(self) -> list[PendingDelivery]:
        """Committed deliveries never settled (a crash came between), oldest first."""
        rows = self._conn.execute(
            "SELECT id, token, after_turn FROM deliveries WHERE state = 'pending' ORDER BY id"
        ).fetchall()
        return [PendingDelivery(*row) for row in rows]

    def settled_runs(self, batch: int) -> list[tuple[int, int]]:
        """The offsets of a batch that committed deliveries took to the model or
        refused, as (first, last) ranges sorted by offset."""
        return self._conn.execute(
            "SELECT r.first, r.last FROM delivery_runs r JOIN deliveries d"
            " ON d.id = r.delivery WHERE r.batch = ? AND d.state IN ('delivered', 'refused')"
            " ORDER BY r.first",
            (batch,),
        ).fetchall()

    # -- the archive's group commit ------------------------------------------

    @property
    def staged(self) -> bool:
        return bool(self._opened or self._settling)

    def write(self, db: sqlite3.Connection) -> None:
        """Write what is staged, inside the archive's transaction (after the batches)."""
        for row, runs in self._opened:
            db.execute(
                "INSERT INTO deliveries (id, token, after_turn, state, opened_at)"
                " VALUES (?, ?, ?, 'pending', ?)", row,
            )
            db.executemany(
                "INSERT INTO delivery_runs (delivery, batch, first, last) VALUES (?,?,?,?)",
                [(row[0], *run) for run in runs],
            )
        for delivery_id, state, at in self._settling:
            _settle_row(db, delivery_id, state, at)

    def clear_staged(self) -> None:
        """Forget what the archive's transaction has just committed."""
        self._opened = []
        self._settling = []


def _settle_row(db: sqlite3.Connection, delivery_id: int, state: str, at: float) -> None:
    changed = db.execute(
        "UPDATE deliveries SET state = ?, settled_at = ? WHERE id = ? AND state = 'pending'",
        (state, at, delivery_id),
    ).rowcount
    if changed and state != "void":
        db.execute(
            "UPDATE batches SET settled = settled + (SELECT SUM(r.last - r.first + 1)"
            " FROM delivery_runs r WHERE r.delivery = ? AND r.batch = batches.id)"
            " WHERE id IN (SELECT batch FROM delivery_runs WHERE delivery = ?)",
            (delivery_id, delivery_id),
        )
