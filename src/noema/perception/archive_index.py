"""The sensory archive's full-text index: the words of every raw event,
searchable by channel and by the time the events arrived.

The index is contentless FTS5 (the text lives once, in `events`) and is
written by the transaction that writes the events, so an acknowledged event
is a searchable one. Its row ID is the event's place in the archive,
`batch << 32 | offset`: batches are numbered in the order they open, so a
time range is a row ID range and the newest matches come first cheaply.

An archive from before the index is indexed after it opens, oldest first,
a bounded amount at a time (`backfill`): at open, with each group commit,
and before each search. Until that is done a search says how many older
events it could not reach yet.

A search reads the newest `RANK_WINDOW` matches inside the filters. When
they are all the matches, they are ranked by BM25; when there are more, they
are shown newest first, unranked, and the result says so, so that the caller
can narrow the time or the channel. FTS5's BM25 counts every row holding
each word, however old, before it scores a single one: over 10M log lines,
hundreds of milliseconds for a common word, while reading the newest
matches in row order takes one or two.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS events_fts USING fts5(
    body, content='', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE INDEX IF NOT EXISTS batches_opened ON batches(opened_at, id);
CREATE INDEX IF NOT EXISTS batches_sealed ON batches(sealed_at, id);
CREATE TABLE IF NOT EXISTS events_fts_backfill (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    batch     INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    end_batch INTEGER NOT NULL
);
"""

RANK_WINDOW = 2_000  # newest matches ranked by one search: 10 pages of the largest
OPEN_BUDGET_S = 1.0  # indexing an older archive at open, before the agent starts
SEARCH_BUDGET_S = 0.5  # indexing an older archive before a search
COMMIT_CHUNK = 500  # older events indexed with each group commit: a few ms more
_CHUNK = 5_000  # older events indexed per transaction outside commits
# How much earlier than its batch opened an event may have arrived (a sensor
# stamps it, then the pipeline archives it): the row range is widened by
# this much and the times of events are checked one by one.
_ARRIVAL_SKEW_S = 300.0
_SEQ_BITS = 32
_SEQ_MASK = (1 << _SEQ_BITS) - 1
_TERM = re.compile(r'"([^"]*)"|([^\W_]+)')


@dataclass(frozen=True, slots=True)
class Candidates:
    """What one search found: event places, best first, and what it left out."""

    places: tuple[tuple[int, int, float], ...]  # (batch, offset, BM25 score) best first
    window_full: bool  # more matches exist than were read: newest first, not ranked
    unindexed: int  # older events not indexed yet, so not searched
    any_word: bool  # no event holds every word; these hold some of them


def row_id(batch: int, seq: int) -> int:
    """The index row of the event at `seq` in `batch`."""
    return (batch << _SEQ_BITS) | seq


def body(sender: str, key: str, text: str, payload: str | None) -> str:
    """What the index reads of an event: its text, sender, key and data."""
    return f"{text} {sender} {key} {payload or ''}"


def create(db: sqlite3.Connection) -> None:
    """Create the index inside the archive's creation transaction; an archive
    that already holds events is marked for a backfill."""
    existed = db.execute(
        "SELECT 1 FROM sqlite_master WHERE name = 'events_fts'").fetchone() is not None
    for statement in filter(str.strip, SCHEMA.split(";")):
        db.execute(statement)
    if not existed:
        last = db.execute("SELECT MAX(id) FROM batches").fetchone()[0]
        if last:
            db.execute("INSERT INTO events_fts_backfill VALUES (1, 0, 0, ?)", (last + 1,))


def start_over(db: sqlite3.Connection) -> None:
    """Empty the index and mark every event for the backfill, inside the
    caller's transaction: for events copied in without their index."""
    db.execute("INSERT INTO events_fts (events_fts) VALUES ('delete-all')")
    db.execute("DELETE FROM events_fts_backfill")
    last = db.execute("SELECT MAX(id) FROM batches").fetchone()[0]
    if last:
        db.execute("INSERT INTO events_fts_backfill VALUES (1, 0, 0, ?)", (last + 1,))


def add(db: sqlite3.Connection, rows: Sequence[tuple]) -> None:
    """Index newly written event rows (as `SensoryArchive` stages them)."""
    db.executemany(
        "INSERT INTO events_fts (rowid, body) VALUES (?, ?)",
        [((r[0] << _SEQ_BITS) | r[1], body(r[3], r[7], r[8], r[9])) for r in rows],
    )


def backfill_pending(db: sqlite3.Connection) -> bool:
    """Whether older events still wait to be indexed."""
    return db.execute("SELECT 1 FROM events_fts_backfill").fetchone() is not None


def backfill_step(db: sqlite3.Connection, limit: int) -> bool:
    """Index up to `limit` older events inside the caller's transaction;
    True once every older event is indexed."""
    state = db.execute("SELECT batch, seq, end_batch FROM events_fts_backfill").fetchone()
    if state is None:
        return True
    batch, seq, end = state
    rows = db.execute(
        "SELECT batch, seq, sender, key, text, payload FROM events"
        " WHERE (batch, seq) >= (?, ?) AND batch < ? ORDER BY batch, seq LIMIT ?",
        (batch, seq, end, limit),
    ).fetchall()
    db.executemany(
        "INSERT INTO events_fts (rowid, body) VALUES (?, ?)",
        [(row_id(b, s), body(sender, key, text, payload))
         for b, s, sender, key, text, payload in rows],
    )
    if len(rows) < limit:
        db.execute("DELETE FROM events_fts_backfill")
        return True
    db.execute("UPDATE events_fts_backfill SET batch = ?, seq = ?", (rows[-1][0], rows[-1][1] + 1))
    return False


def backfill(db: sqlite3.Connection, budget_s: float) -> bool:
    """Index older events, a transaction at a time, for about `budget_s`;
    True once every older event is indexed."""
    deadline = time.monotonic() + budget_s
    while True:
        with db:
            done = backfill_step(db, _CHUNK)
        if done or time.monotonic() >= deadline:
            return done


def unindexed(db: sqlite3.Connection) -> int:
    """How many older events wait to be indexed."""
    state = db.execute("SELECT batch, seq, end_batch FROM events_fts_backfill").fetchone()
    if state is None:
        return 0
    batch, seq, end = state
    waiting = db.execute(
        "SELECT COALESCE(SUM(size), 0) FROM batches WHERE id >= ? AND id < ?", (batch, end)
    ).fetchone()[0]
    return max(int(waiting) - seq, 0)


def expression(query: str, *, every: bool) -> str:
    """An FTS5 expression for a person's query: its words and "quoted phrases",
    all of them (`every`) or any. Nothing in the query is read as an operator."""
    terms = []
    for phrase, word in _TERM.findall(query):
        words = re.findall(r"[^\W_]+", phrase) if phrase else [word]
        if words:
            terms.append('"' + " ".join(words) + '"')
    return (" AND " if every else " OR ").join(terms)


def search(
    db: sqlite3.Connection,
    query: str,
    *,
    channel: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Candidates:
    """Events whose words match `query`, best first, among the newest
    RANK_WINDOW matches that arrived between `since` and `until` on channels
    matching the glob `channel`. Raises ValueError for a query with no word."""
    every = expression(query, every=True)
    if not every:
        raise ValueError("the query has no word to look for")
    places, full = _ranked(db, every, channel, since, until)
    any_word = False
    if not places and " AND " in every:
        places, full = _ranked(db, expression(query, every=False), channel, since, until)
        any_word = bool(places)
    return Candidates(tuple(places), full, unindexed(db), any_word)


def _ranked(
    db: sqlite3.Connection, match: str, channel: str | None, since: float | None,
    until: float | None,
) -> tuple[list[tuple[int, int, float]], bool]:
    low, high = _rows_between(db, since, until)
    if low > high:
        return [], False
    where = ["events_fts MATCH ?", "f.rowid BETWEEN ? AND ?"]
    args: list[object] = [match, low, high]
    join = ""
    if since is not None or until is not None:
        # Batches at the edges of the range hold events on both sides of it.
        join += (" JOIN events e ON e.batch = (f.rowid >> 32)"
                 " AND e.seq = (f.rowid & 4294967295)")
        where.append("e.received_at BETWEEN ? AND ?")
        args += [since if since is not None else float("-inf"),
                 until if until is not None else float("inf")]
    if channel:
        # Checked match by match, newest first: one lookup each, however many batches.
        join += " JOIN batches b ON b.id = (f.rowid >> 32)"
        where.append("b.channel GLOB ?")
        args.append(channel)
    def read(score: str) -> list[tuple[int, float]]:
        return db.execute(
            f"SELECT f.rowid, {score} FROM events_fts f{join} WHERE {' AND '.join(where)}"
            " ORDER BY f.rowid DESC LIMIT ?",
            [*args, RANK_WINDOW],
        ).fetchall()

    rows = read("0.0")
    full = len(rows) == RANK_WINDOW
    if rows and not full:  # every match is here: worth ranking
        rows = read("bm25(events_fts)")
        rows.sort(key=lambda r: (r[1], -r[0]))  # best score first, newer first among equals
    return [(r >> _SEQ_BITS, r & _SEQ_MASK, score) for r, score in rows], full


def _rows_between(db: sqlite3.Connection, since: float | None, until: float | None
                  ) -> tuple[int, int]:
    """The index rows of the batches that may hold events arrived in the range.

    The first is the oldest batch still open at `since`; the last, the newest
    opened by `until` (batches open in the order of their IDs: the archive
    never dates a batch before the one opened ahead of it).
    """
    low, high = 0, (1 << 62)
    if since is not None:
        sealed = db.execute("SELECT MIN(id) FROM batches WHERE sealed_at >= ?", (since,)
                            ).fetchone()[0]
        still_open = db.execute("SELECT MIN(id) FROM batches WHERE sealed_at IS NULL"
                                ).fetchone()[0]
        first = min((n for n in (sealed, still_open) if n is not None), default=None)
        if first is None:
            return 1, 0
        low = row_id(first, 0)
    if until is not None:
        last = db.execute(
            "SELECT id FROM batches WHERE opened_at <= ? ORDER BY opened_at DESC, id DESC"
            " LIMIT 1", (until + _ARRIVAL_SKEW_S,)).fetchone()
        if last is None:
            return 1, 0
        high = row_id(last[0], _SEQ_MASK)
    return low, high


def places_by_batch(places: Iterable[tuple[int, int, float]]) -> dict[int, list[int]]:
    """The offsets wanted from each batch."""
    wanted: dict[int, list[int]] = {}
    for batch, seq, _ in places:
        wanted.setdefault(batch, []).append(seq)
    return wanted
