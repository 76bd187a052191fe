"""The sensory archive: every raw event, kept before any treatment, and what became of it.

Events are grouped in batches, one open batch per stream (a channel and a
bucket: a log pattern, a chat sender, a state key, or the events dropped
while the channel was silenced). A batch is sealed when its package is
delivered, so the part of a burst a package leaves out is one run of
offsets in one batch, which `lookup` pages through.

**Acknowledged.** An event is acknowledged once the transaction that writes
it has committed. `append` only stages the row; `flush` writes everything
staged in one transaction (WAL, synchronous=NORMAL: it survives a killed
process, not a power cut). This is a group commit: `append` flushes by
itself every `flush_every` events, the owner flushes at most a short delay
after the first staged event (the agent's timer, `archive_commit_ms`,
50 ms by default), and every delivery flushes before its turns are
written, so nothing reaches the model that the archive could forget. A
kill therefore loses only events that were never acknowledged: those that
arrived in the last commit delay (50 ms, longer only while the event loop
is blocked), and never more than `flush_every` of them (1000 by default).
A sensor that can read its source again keeps its place with `bookmark`,
and a bookmark is committed in the same transaction as the events read
before it, so the log-file sensor loses nothing: it reads those lines again
after the restart. Sensors that cannot (a folder watch, a webhook) lose at
most that window; the clock sensor simply notices the silence again.

**Fate.** Every archived event ends one way: dropped at a closed gate (its
batch is a silenced one), delivered to the model (a delivery whose offset
runs cover it), or refused as a repeat of an event already received. A
delivery is recorded in two steps around the turn store's commit:
`open_delivery` (pending, committed before the pool_event turns are
written), then `settle` as delivered or void. On start, a pending delivery
is settled by asking the turn store whether its pool_event result exists
and counts (the orchestrator does this), so across a crash every event is
delivered exactly once. Each batch counts its settled events, so
`undelivered` reads only the batches that still hold some.

Events are never edited or deleted, nor are settled deliveries (triggers
refuse it). One process writes an archive.
"""

from __future__ import annotations

import json
import operator
import re
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .events import Event, Nature, Payload, SensorInfo, TreatmentParams, Urgency

SILENCED_BUCKET = "silenced"
DEFAULT_FLUSH_EVERY = 1000
MAX_PAGE = 200
SCHEMA_VERSION = 2
_REPLAY_PAGE = 500
_BATCH_ID = re.compile(r"^b(\d{1,18})$")

Run = tuple[int, int, int]
"""(batch number, first offset, last offset): consecutive events of one batch, inclusive."""

_TABLES = """
CREATE TABLE IF NOT EXISTS batches (
    id        INTEGER PRIMARY KEY,
    channel   TEXT    NOT NULL,
    bucket    TEXT    NOT NULL,
    opened_at REAL    NOT NULL,
    sealed_at REAL,
    size      INTEGER NOT NULL,
    dropped   INTEGER NOT NULL CHECK (dropped IN (0, 1)),
    settled   INTEGER NOT NULL DEFAULT 0
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

# Created after the migration: the partial index needs `settled`.
_LATER = """
CREATE INDEX IF NOT EXISTS batches_unsettled ON batches(id) WHERE settled < size;
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
CREATE TABLE IF NOT EXISTS channels (
    channel TEXT PRIMARY KEY,
    info    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS bookmarks (
    source   TEXT PRIMARY KEY,
    state    TEXT NOT NULL
);
"""


class UnknownBatch(LookupError):
    """A batch ID that is malformed or names no batch."""


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """What a batch is: one stream of one channel."""

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
        # A silenced batch is settled as it grows: its events were dropped at the gate.
        settled = self.size if self.dropped else 0
        return (self.number, self.channel, self.bucket, self.opened_at, self.sealed_at,
                self.size, int(self.dropped), settled)


def parse_batch_id(batch_id: str) -> int:
    """The number inside a batch ID like "b42"; UnknownBatch if malformed."""
    match = _BATCH_ID.match(batch_id.strip()) if isinstance(batch_id, str) else None
    if not match:
        raise UnknownBatch(f"{batch_id!r} is not a batch ID (they look like 'b42')")
    return int(match.group(1))


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


class SensoryArchive:
    """Raw events in SQLite, in batches, immutable once written, with their fate."""

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
        _create(self.conn)
        last = self.conn.execute("SELECT MAX(id) FROM batches").fetchone()[0]
        self._next_batch = (last or 0) + 1
        last = self.conn.execute("SELECT MAX(id) FROM deliveries").fetchone()[0]
        self._next_delivery = (last or 0) + 1
        self._open: dict[tuple[str, str], _Open] = {}
        self._by_number: dict[int, _Open] = {}
        self._rows: list[tuple] = []
        self._dirty: dict[int, _Open] = {}
        self._channels: dict[str, str] = {}
        self._marks: dict[str, dict[str, Any]] = {}
        self._opened: list[tuple[tuple, tuple[Run, ...]]] = []
        self._settling: list[tuple[int, str, float]] = []
        self.appended = 0  # events appended by this process
        self.committed = 0  # of which committed: acknowledged

    # -- writing ----------------------------------------------------------

    def append(self, event: Event, bucket: str, now: float, *, dropped: bool = False) -> Event:
        """Stage a raw event in its stream's open batch; the event with its batch ID.

        The event is acknowledged at the next `flush` (see the module docstring).
        """
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
        self.appended += 1
        if len(self._rows) >= self.flush_every:
            self.flush()
        return _with_batch(event, f"b{batch.number}", seq)

    @property
    def staged(self) -> bool:
        """Whether something waits for the next `flush`."""
        return bool(self._rows or self._dirty or self._channels or self._marks
                    or self._opened or self._settling)

    def flush(self) -> None:
        """Commit everything staged in one transaction: events, batches, channel
        declarations, bookmarks and deliveries."""
        if not self.staged:
            return
        with self.conn:
            self._write(self.conn)
        self.committed += len(self._rows)
        self._rows = []
        self._dirty = {}
        self._channels = {}
        self._marks = {}
        self._opened = []
        self._settling = []

    def _write(self, db: sqlite3.Connection) -> None:
        db.executemany(
            "INSERT INTO events (batch, seq, id, sender, authorised, occurred_at,"
            " received_at, key, text, payload) VALUES (?,?,?,?,?,?,?,?,?,?)",
            self._rows,
        )
        db.executemany(
            "INSERT INTO batches (id, channel, bucket, opened_at, sealed_at, size, dropped,"
            " settled) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET"
            " sealed_at = excluded.sealed_at, size = excluded.size,"
            " settled = CASE WHEN batches.dropped THEN excluded.size ELSE batches.settled END",
            [b.row() for b in self._dirty.values()],
        )
        db.executemany(
            "INSERT INTO channels (channel, info) VALUES (?, ?)"
            " ON CONFLICT(channel) DO UPDATE SET info = excluded.info",
            self._channels.items(),
        )
        db.executemany(
            "INSERT INTO bookmarks (source, state) VALUES (?, ?)"
            " ON CONFLICT(source) DO UPDATE SET state = excluded.state",
            [(s, json.dumps(m, separators=(",", ":"))) for s, m in self._marks.items()],
        )
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

    # -- deliveries ---------------------------------------------------------

    def open_delivery(
        self, token: str, runs: Iterable[Run], now: float, *, after_turn: int = 0
    ) -> int:
        """Stage a pending delivery of the events in `runs`; its ID.

        Flush before writing the turns that carry it, then `settle` it.
        """
        if not isinstance(token, str) or not token:
            raise ValueError("a delivery is named by the call ID that carries it")
        checked = check_runs(runs)
        if not checked:
            raise ValueError("a delivery carries at least one archived event")
        delivery_id = self._next_delivery
        self._next_delivery += 1
        self._opened.append(((delivery_id, token, after_turn, now), checked))
        return delivery_id

    def settle(self, delivery_id: int, delivered: bool, now: float) -> None:
        """Stage the end of a pending delivery: its events reached the model, or not
        (void: they are still to deliver). Committed with the next flush."""
        self._settling.append((delivery_id, "delivered" if delivered else "void", now))

    def refuse(self, event: Event, now: float) -> None:
        """Stage that an archived event was refused as a repeat of one already received."""
        if event.batch_id is None or event.batch_seq is None:
            raise ValueError("only an archived event can be refused in the archive")
        seq = event.batch_seq
        delivery_id = self.open_delivery(
            "refused:" + event.id, [(parse_batch_id(event.batch_id), seq, seq)], now)
        self._settling.append((delivery_id, "refused", now))

    def pending_deliveries(self) -> list[PendingDelivery]:
        """Deliveries opened and never settled (a crash came between), oldest first."""
        self.flush()
        rows = self.conn.execute(
            "SELECT id, token, after_turn FROM deliveries WHERE state = 'pending' ORDER BY id"
        ).fetchall()
        return [PendingDelivery(*row) for row in rows]

    def undelivered(self) -> Iterator[Event]:
        """Every archived event neither dropped, delivered nor refused, batch by batch,
        in offset order. Call it on start, before new events arrive: pending
        deliveries count as not delivered, so settle them first."""
        self.flush()
        batches = self.conn.execute(
            "SELECT id, channel, bucket, opened_at, sealed_at, size FROM batches"
            " WHERE settled < size AND NOT dropped ORDER BY id"
        ).fetchall()
        for number, channel, bucket, opened, sealed, size in batches:
            info = BatchInfo(f"b{number}", channel, bucket, opened, sealed, size, False)
            done = self.conn.execute(
                "SELECT r.first, r.last FROM delivery_runs r JOIN deliveries d"
                " ON d.id = r.delivery WHERE r.batch = ? AND d.state IN ('delivered', 'refused')"
                " ORDER BY r.first",
                (number,),
            ).fetchall()
            for first, last in complement(done, size):
                yield from self._events_between(info, number, first, last)

    def _events_between(self, info: BatchInfo, number: int, first: int, last: int
                        ) -> Iterator[Event]:
        # Paged, so no read cursor stays open while the caller writes.
        while first <= last:
            rows = self.conn.execute(
                "SELECT seq, id, sender, authorised, occurred_at, received_at, key, text,"
                " payload FROM events WHERE batch = ? AND seq BETWEEN ? AND ?"
                " ORDER BY seq LIMIT ?",
                (number, first, last, _REPLAY_PAGE),
            ).fetchall()
            if not rows:
                return
            for row in rows:
                yield _row_event(info, row)
            first = rows[-1][0] + 1

    # -- what the archive remembers for the senses ---------------------------

    def remember_channel(self, info: SensorInfo) -> None:
        """Keep a sensor's declaration, so its events can be delivered after a
        restart even if the sensor is no longer configured."""
        self._channels[info.channel] = json.dumps(_info_data(info), separators=(",", ":"))

    def channels(self) -> dict[str, SensorInfo]:
        """The declarations of every channel the archive has seen declared."""
        self.flush()
        rows = self.conn.execute("SELECT channel, info FROM channels").fetchall()
        return {channel: _info_from(channel, json.loads(info)) for channel, info in rows}

    def bookmark(self, source: str) -> ArchiveBookmark:
        """Where a sensor stands in its source, kept with the events it read."""
        return ArchiveBookmark(self, source)

    def _load_mark(self, source: str) -> dict[str, Any] | None:
        staged = self._marks.get(source)
        if staged is not None:
            return dict(staged)
        row = self.conn.execute(
            "SELECT state FROM bookmarks WHERE source = ?", (source,)).fetchone()
        return json.loads(row[0]) if row else None

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


class ArchiveBookmark:
    """A sensor's place in its source, durable with the events read before it.

    `save` only stages the place: it is committed in the archive's next
    transaction, together with every event appended before it. A sensor that
    saves the place after a line *before* emitting that line can never have
    a committed place ahead of its committed events.
    """

    __slots__ = ("_archive", "source")

    def __init__(self, archive: SensoryArchive, source: str) -> None:
        if not source:
            raise ValueError("a bookmark needs the name of its source")
        self._archive = archive
        self.source = source

    def load(self) -> dict[str, Any] | None:
        """The last place saved (staged or committed), or None."""
        return self._archive._load_mark(self.source)

    def save(self, state: Mapping[str, Any]) -> None:
        """Stage the current place (JSON data)."""
        self._archive._marks[self.source] = dict(state)


def _create(conn: sqlite3.Connection) -> None:
    # One transaction: a crash mid-creation or mid-migration leaves no half-made archive.
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _statements(_TABLES):
            conn.execute(statement)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(batches)")}
        if "settled" not in columns:
            # An archive from before fates were recorded: nothing says what was
            # delivered, and replaying weeks of events would be worse than none.
            conn.execute("ALTER TABLE batches ADD COLUMN settled INTEGER NOT NULL DEFAULT 0")
            conn.execute("UPDATE batches SET settled = size")
        for statement in _statements(_LATER):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _statements(script: str) -> Iterator[str]:
    buffer = ""
    for line in script.strip().splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer
            buffer = ""


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


def _info_data(info: SensorInfo) -> dict[str, Any]:
    t = info.treatment
    return {
        "description": info.description, "nature": info.nature.value,
        "parameters": info.parameters.thaw(), "can_silence": info.can_silence,
        "default_urgency": info.default_urgency.value,
        "treatment": {"window": t.window, "quiet_gap": t.quiet_gap,
                      "max_hold": t.max_hold, "hold": t.hold},
    }


def _info_from(channel: str, data: Mapping[str, Any]) -> SensorInfo:
    return SensorInfo(
        channel, data["description"], Nature(data["nature"]),
        parameters=Payload(data.get("parameters") or {}),
        can_silence=bool(data.get("can_silence", True)),
        default_urgency=Urgency(data.get("default_urgency", "normal")),
        treatment=TreatmentParams(**data.get("treatment", {})),
    )
