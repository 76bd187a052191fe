"""The sensory archive: every raw event, kept before any treatment.

Events are grouped in batches, one open batch per stream (a channel and a
bucket: a log pattern, a chat sender, a state key, or the events dropped
while the channel was silenced). A batch is sealed when its package is
delivered, so the part of a burst a package leaves out is one run of
offsets in one batch, which `lookup` pages through.

Writes are batched (one transaction per `flush_every` events, WAL,
synchronous=NORMAL): an event is in memory at once and on disk at the next
flush; a lookup flushes first, so it always sees everything. Events are
never edited or deleted (triggers refuse it). One process writes an archive.
"""

from __future__ import annotations

import json
import operator
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .events import Event, Payload

SILENCED_BUCKET = "silenced"
DEFAULT_FLUSH_EVERY = 1000
MAX_PAGE = 200
_BATCH_ID = re.compile(r"^b(\d{1,18})$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    id        INTEGER PRIMARY KEY,
    channel   TEXT    NOT NULL,
    bucket    TEXT    NOT NULL,
    opened_at REAL    NOT NULL,
    sealed_at REAL,
    size      INTEGER NOT NULL,
    dropped   INTEGER NOT NULL CHECK (dropped IN (0, 1))
);
CREATE TABLE IF NOT EXISTS events (
    batch       INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    id          TEXT    NOT NULL,
    sender      TEXT    NOT NULL,
    authorised  INTEGER NOT NULL,
    occurred_at REAL    NOT NULL,
    received_at REAL    NOT NULL,
    key         TEXT    NOT NULL,
    text        TEXT    NOT NULL,
    payload     TEXT,
    PRIMARY KEY (batch, seq)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS events_never_deleted BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'archived events are never deleted'); END;
CREATE TRIGGER IF NOT EXISTS events_never_edited BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'archived events are never edited'); END;
"""


class UnknownBatch(LookupError):
    """A batch ID that is malformed or names no batch."""


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """What a batch holds: one stream of one channel."""

    batch_id: str
    channel: str
    bucket: str
    opened_at: float
    sealed_at: float | None
    size: int
    dropped: bool  # the events arrived while the channel was silenced


@dataclass(frozen=True, slots=True)
class ArchivePage:
    """Some events of a batch, from an offset, optionally filtered."""

    batch: BatchInfo
    events: tuple[Event, ...]
    matching: int  # events at or after the offset that pass the filter
    next_offset: int | None  # where the next page starts, if any


@dataclass(frozen=True, slots=True)
class ChannelArchiveCounts:
    """How many events of a channel the archive holds."""

    stored: int
    dropped: int  # of which arrived while the channel was silenced


class _Open:
    __slots__ = ("bucket", "channel", "dropped", "number", "opened_at", "sealed_at", "size")

    def __init__(self, number: int, channel: str, bucket: str, opened_at: float, dropped: bool):
        self.number = number
        self.channel = channel
        self.bucket = bucket
        self.opened_at = opened_at
        self.sealed_at: float | None = None
        self.size = 0
        self.dropped = dropped

    def row(self) -> tuple:
        return (self.number, self.channel, self.bucket, self.opened_at, self.sealed_at,
                self.size, int(self.dropped))


def parse_batch_id(batch_id: str) -> int:
    """The number inside a batch ID like "b42"; UnknownBatch if malformed."""
    match = _BATCH_ID.match(batch_id.strip()) if isinstance(batch_id, str) else None
    if not match:
        raise UnknownBatch(f"{batch_id!r} is not a batch ID (they look like 'b42')")
    return int(match.group(1))


class SensoryArchive:
    """Raw events in SQLite, in batches, immutable once written."""

    def __init__(self, path: Path | str, *, flush_every: int = DEFAULT_FLUSH_EVERY) -> None:
        """Open (or create) the archive at `path`; ":memory:" keeps it in memory."""
        if flush_every < 1:
            raise ValueError("flush_every must be at least 1")
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_every = flush_every
        self.conn = sqlite3.connect(str(path))
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(_SCHEMA)
        last = self.conn.execute("SELECT MAX(id) FROM batches").fetchone()[0]
        self._next_batch = (last or 0) + 1
        self._open: dict[tuple[str, str], _Open] = {}
        self._by_number: dict[int, _Open] = {}
        self._rows: list[tuple] = []
        self._dirty: dict[int, _Open] = {}

    # -- writing ----------------------------------------------------------

    def append(self, event: Event, bucket: str, now: float, *, dropped: bool = False) -> Event:
        """Store a raw event in its stream's open batch; the event with its batch ID."""
        stream = (event.channel, SILENCED_BUCKET if dropped else bucket)
        batch = self._open.get(stream)
        if batch is None:
            batch = _Open(self._next_batch, event.channel, stream[1], now, dropped)
            self._next_batch += 1
            self._open[stream] = batch
            self._by_number[batch.number] = batch
        seq = batch.size
        batch.size += 1
        self._dirty[batch.number] = batch
        payload = event.payload.to_json() if len(event.payload) else None
        self._rows.append((
            batch.number, seq, event.id, event.sender, event.authorised, event.occurred_at,
            event.received_at, event.key, event.text, payload,
        ))
        if len(self._rows) >= self.flush_every:
            self.flush()
        return _with_batch(event, f"b{batch.number}", seq)

    def flush(self) -> None:
        """Write everything appended so far in one transaction."""
        if not self._rows and not self._dirty:
            return
        with self.conn:
            self.conn.executemany(
                "INSERT INTO events (batch, seq, id, sender, authorised, occurred_at,"
                " received_at, key, text, payload) VALUES (?,?,?,?,?,?,?,?,?,?)",
                self._rows,
            )
            self.conn.executemany(
                "INSERT INTO batches (id, channel, bucket, opened_at, sealed_at, size, dropped)"
                " VALUES (?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET"
                " sealed_at = excluded.sealed_at, size = excluded.size",
                [b.row() for b in self._dirty.values()],
            )
        self._rows = []
        self._dirty = {}

    def seal(self, batch_ids: Iterable[str | None], now: float) -> None:
        """Close batches whose package was delivered; their streams start new batches."""
        for batch_id in batch_ids:
            if batch_id is None:
                continue
            batch = self._by_number.pop(parse_batch_id(batch_id), None)
            if batch is not None:
                self._close(batch, now)

    def seal_stream(self, channel: str, bucket: str, now: float) -> str | None:
        """Close the open batch of a stream, if any; its ID."""
        batch = self._open.get((channel, bucket))
        if batch is None:
            return None
        self._by_number.pop(batch.number, None)
        self._close(batch, now)
        return f"b{batch.number}"

    def open_batch(self, channel: str, bucket: str) -> str | None:
        """The ID of a stream's open batch, if it has one."""
        batch = self._open.get((channel, bucket))
        return None if batch is None else f"b{batch.number}"

    def _close(self, batch: _Open, now: float) -> None:
        batch.sealed_at = max(now, batch.opened_at)
        self._dirty[batch.number] = batch
        if self._open.get((batch.channel, batch.bucket)) is batch:
            del self._open[(batch.channel, batch.bucket)]

    # -- reading ----------------------------------------------------------

    def batch(self, batch_id: str) -> BatchInfo:
        """What a batch is; UnknownBatch if there is none."""
        number = parse_batch_id(batch_id)
        self.flush()
        row = self.conn.execute(
            "SELECT channel, bucket, opened_at, sealed_at, size, dropped FROM batches"
            " WHERE id = ?",
            (number,),
        ).fetchone()
        if row is None:
            raise UnknownBatch(f"there is no batch {batch_id}")
        return BatchInfo(f"b{number}", row[0], row[1], row[2], row[3], row[4], bool(row[5]))

    def lookup(
        self, batch_id: str, offset: int = 0, limit: int = 20, filter: str | None = None
    ) -> ArchivePage:
        """Events of a batch from `offset` on, at most `limit`, whose text, sender or
        key contains `filter` (case-insensitive for ASCII)."""
        info = self.batch(batch_id)
        if offset < 0:
            raise ValueError("offset cannot be negative")
        limit = max(1, min(limit, MAX_PAGE))
        where = "batch = ? AND seq >= ?"
        args: list = [parse_batch_id(batch_id), offset]
        needle = (filter or "").strip().lower()
        if needle:
            where += (" AND (instr(lower(text), ?) > 0 OR instr(lower(sender), ?) > 0"
                      " OR instr(lower(key), ?) > 0)")
            args += [needle, needle, needle]
        rows = self.conn.execute(
            "SELECT seq, id, sender, authorised, occurred_at, received_at, key, text, payload"
            f" FROM events WHERE {where} ORDER BY seq LIMIT ?",
            [*args, limit + 1],
        ).fetchall()
        matching = self.conn.execute(f"SELECT count(*) FROM events WHERE {where}", args)
        events = tuple(_row_event(info, row) for row in rows[:limit])
        following = rows[limit][0] if len(rows) > limit else None
        return ArchivePage(info, events, matching.fetchone()[0], following)

    def counts(self) -> dict[str, ChannelArchiveCounts]:
        """Per channel, events stored and how many of them were dropped at the gate."""
        self.flush()
        rows = self.conn.execute(
            "SELECT channel, SUM(size), SUM(CASE WHEN dropped THEN size ELSE 0 END)"
            " FROM batches GROUP BY channel"
        ).fetchall()
        return {c: ChannelArchiveCounts(int(s), int(d)) for c, s, d in rows}

    def close(self) -> None:
        """Flush and close the database."""
        self.flush()
        self.conn.close()

    def __enter__(self) -> SensoryArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _with_batch(event: Event, batch_id: str, seq: int) -> Event:
    # The event was validated when built and only gains archive coordinates,
    # so its slots are filled directly, without validating again: this is
    # the hot path of ingestion.
    copy = object.__new__(Event)
    for setter, value in zip(_SETTERS, (*_FIELDS_OF(event), batch_id, seq), strict=True):
        setter(copy, value)
    return copy


_COPIED = tuple(f for f in Event.__slots__ if f not in ("batch_id", "batch_seq"))
_FIELDS_OF = operator.attrgetter(*_COPIED)
_SETTERS = tuple(getattr(Event, name).__set__ for name in (*_COPIED, "batch_id", "batch_seq"))


def _row_event(info: BatchInfo, row: tuple) -> Event:
    seq, event_id, sender, authorised, occurred, received, key, text, payload = row
    return Event(
        id=event_id, channel=info.channel, sender=sender, authorised=bool(authorised),
        occurred_at=occurred, received_at=received, key=key, text=text,
        payload=Payload(_json_object(payload)), batch_id=info.batch_id, batch_seq=seq,
    )


def _json_object(text: str | None) -> dict:
    return json.loads(text) if text else {}
