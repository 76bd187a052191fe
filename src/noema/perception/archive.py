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

The same transaction commits what the archive keeps beside the events, each
part in its own module: the fate of every event (`perception.deliveries`),
the sensors' places in their sources (`perception.bookmarks`) and their
declarations (`perception.declarations`), and the full-text index of the
events' words (`perception.archive_index`), so an acknowledged event can be
found by `search`. `SensoryArchive` is the one door to all of them.

**Upkeep.** An archive on disk merges its full-text index and checkpoints
its WAL in a background thread (`perception.archive_upkeep`), started by
its first commit and stopped by `close`, so that no group commit pays for
either; `upkeep=False` leaves both to the commits, as SQLite and FTS5 do by
default.

Events are never edited or deleted, nor are settled deliveries (triggers
refuse it). One process writes an archive.
"""

from __future__ import annotations

import json
import logging
import operator
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..health import check_file, check_open, opening, private_file
from . import archive_index, archive_upkeep, bookmarks, declarations, deliveries
from .archive_upkeep import ArchiveUpkeep
from .bookmarks import ArchiveBookmark, Bookmarks
from .declarations import Declarations
from .deliveries import DeliveryRecords, PendingDelivery, Run, complement
from .events import Event, Payload, SensorInfo

log = logging.getLogger(__name__)

SILENCED_BUCKET = "silenced"
DEFAULT_FLUSH_EVERY = 1000
MAX_PAGE = 200
SCHEMA_VERSION = 3  # 3: the full-text index of events
_REPLAY_PAGE = 500
_BATCH_ID = re.compile(r"^b(\d{1,18})$")

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
class ArchiveHit:
    """One event found by words, with its batch and its BM25 score (lower is
    better; 0 when the matches were too many to rank)."""

    batch: BatchInfo
    event: Event
    score: float


@dataclass(frozen=True, slots=True)
class SearchPage:
    """Events found by words, best first (or newest first when there are too
    many to rank), from a rank on."""

    hits: tuple[ArchiveHit, ...]
    offset: int  # the rank of the first hit, 0 for the best
    ranked: int  # matches ranked in all
    next_offset: int | None  # where the next page starts, if any
    newest_only: bool  # more matches exist: these are the newest, newest first, unranked
    unindexed: int  # older events not indexed yet, so not searched
    any_word: bool  # no event holds every word; these hold some of them


@dataclass(frozen=True, slots=True)
class ChannelArchiveCounts:
    """How many events of a channel the archive holds."""

    stored: int
    dropped: int  # of which arrived while the channel was silenced


class _Part(Protocol):
    """What the archive keeps beside the events, committed by the same transaction."""

    @property
    def staged(self) -> bool: ...
    def write(self, db: sqlite3.Connection) -> None: ...
    def clear_staged(self) -> None: ...


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


class SensoryArchive:
    """Raw events in SQLite, in batches, immutable once written, with their fate."""

    def __init__(self, path: Path | str, *, flush_every: int = DEFAULT_FLUSH_EVERY,
                 upkeep: bool = True) -> None:
        """Open (or create) the archive at `path`; ":memory:" keeps it in memory.

        Opening checks the file quickly (`health.sqlite_files`): a damaged
        archive raises `health.DamagedDatabase`, a full disk `health.DiskFull`.
        `upkeep` (on disk only) takes index merging and WAL checkpoints off
        the commits, into a background thread (see the module docstring).
        """
        if flush_every < 1:
            raise ValueError("flush_every must be at least 1")
        self.path = Path(path)
        on_disk = str(path) != ":memory:"
        if on_disk:
            with opening(self.path):
                self.path.parent.mkdir(parents=True, exist_ok=True)
            check_file(self.path)
            private_file(self.path)  # its -wal and -shm files take its mode
        self.flush_every = flush_every
        self.conn = sqlite3.connect(str(path))
        try:
            with opening(self.path):
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
                if on_disk:  # before anything is written into a file that may be damaged
                    check_open(self.conn, self.path)
                _create(self.conn, merge_in_commits=not upkeep if on_disk else None)
                last = self.conn.execute("SELECT MAX(id) FROM batches").fetchone()[0]
                latest = self.conn.execute("SELECT MAX(opened_at) FROM batches").fetchone()[0]
        except BaseException:
            self.conn.close()
            raise
        self._next_batch = (last or 0) + 1
        self._last_opened: float = latest or 0.0
        # An archive from before the full-text index: index it, a bounded
        # amount now and the rest with the group commits and searches.
        self._backfilling = archive_index.backfill_pending(self.conn)
        if self._backfilling:
            self._backfilling = not archive_index.backfill(self.conn, archive_index.OPEN_BUDGET_S)
        self._open: dict[tuple[str, str], _Open] = {}
        self._by_number: dict[int, _Open] = {}
        self._rows: list[tuple] = []
        self._dirty: dict[int, _Open] = {}
        self._deliveries = DeliveryRecords(self.conn)
        self._declarations = Declarations(self.conn)
        self._bookmarks = Bookmarks(self.conn)
        # Written after the events and batches, in this order: settling a
        # delivery counts its events in batches that must already be there.
        self._parts: tuple[_Part, ...] = (self._declarations, self._bookmarks, self._deliveries)
        self.appended = 0  # events appended by this process
        self.committed = 0  # of which committed: acknowledged
        self._wants_upkeep = on_disk and upkeep
        self._last_write = time.monotonic()
        self.upkeep: ArchiveUpkeep | None = None  # started by the first commit

    # -- writing ----------------------------------------------------------

    def append(self, event: Event, bucket: str, now: float, *, dropped: bool = False) -> Event:
        """Stage a raw event in its stream's open batch; the event with its batch ID.

        The event is acknowledged at the next `flush` (see the module docstring).
        """
        stream = (event.channel, SILENCED_BUCKET if dropped else bucket)
        batch = self._open.get(stream)
        if batch is None:
            # Never dated before the batch opened ahead of it (a clock set back):
            # the full-text index finds a time range by batch order.
            self._last_opened = max(now, self._last_opened)
            batch = _Open(self._next_batch, event.channel, stream[1], self._last_opened, dropped)
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
        return bool(self._rows or self._dirty) or any(part.staged for part in self._parts)

    def flush(self) -> None:
        """Commit everything staged in one transaction: events, batches, channel
        declarations, bookmarks and deliveries."""
        if not self.staged:
            return
        if self.upkeep is not None:
            self.upkeep.give_way()
        with self.conn:
            self._write(self.conn)
            for part in self._parts:
                part.write(self.conn)
            indexed_all = not self._backfilling or archive_index.backfill_step(
                self.conn, archive_index.COMMIT_CHUNK)
        self._backfilling = not indexed_all
        self.committed += len(self._rows)
        self._rows = []
        self._dirty = {}
        for part in self._parts:
            part.clear_staged()
        self._committed()

    def _committed(self) -> None:
        """After each commit: tell the upkeep, starting it with the first one."""
        self._last_write = time.monotonic()
        if self.upkeep is None and self._wants_upkeep:
            archive_upkeep.checkpoint_in_commits(self.conn, False)
            self.upkeep = ArchiveUpkeep(self.path, lambda: self._last_write,
                                        quiet_s=archive_upkeep.QUIET_S)
            self.upkeep.start()
        elif self.upkeep is not None and not self.upkeep.is_alive():
            # It stopped on an error (logged): commits keep index and WAL in check again.
            log.warning("archive upkeep is not running: commits merge and checkpoint again")
            self.upkeep, self._wants_upkeep = None, False
            archive_upkeep.checkpoint_in_commits(self.conn, True)
            with self.conn:
                archive_upkeep.merge_in_commits(self.conn, True)
            return
        if self.upkeep is not None:
            self.upkeep.wrote()

    def _write(self, db: sqlite3.Connection) -> None:
        db.executemany(
            "INSERT INTO events (batch, seq, id, sender, authorised, occurred_at,"
            " received_at, key, text, payload) VALUES (?,?,?,?,?,?,?,?,?,?)",
            self._rows,
        )
        archive_index.add(db, self._rows)
        db.executemany(
            "INSERT INTO batches (id, channel, bucket, opened_at, sealed_at, size, dropped,"
            " settled) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET"
            " sealed_at = excluded.sealed_at, size = excluded.size,"
            " settled = CASE WHEN batches.dropped THEN excluded.size ELSE batches.settled END",
            [b.row() for b in self._dirty.values()],
        )

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

    # -- the fate of events (see `perception.deliveries`) -------------------------

    def open_delivery(
        self, token: str, runs: Iterable[Run], now: float, *, after_turn: int = 0
    ) -> int:
        """Stage a pending delivery of the events in `runs`; its ID.

        Flush before writing the turns that carry it, then `settle` it.
        """
        return self._deliveries.open(token, runs, now, after_turn=after_turn)

    def settle(self, delivery_id: int, delivered: bool, now: float) -> None:
        """Stage the end of a pending delivery: its events reached the model, or not
        (void: they are still to deliver). Committed with the next flush."""
        self._deliveries.settle(delivery_id, delivered, now)

    def refuse(self, event: Event, now: float) -> None:
        """Stage that an archived event was refused as a repeat of one already received."""
        if event.batch_id is None or event.batch_seq is None:
            raise ValueError("only an archived event can be refused in the archive")
        seq = event.batch_seq
        self._deliveries.refuse(
            "refused:" + event.id, (parse_batch_id(event.batch_id), seq, seq), now)

    def pending_deliveries(self) -> list[PendingDelivery]:
        """Deliveries opened and never settled (a crash came between), oldest first."""
        self.flush()
        return self._deliveries.pending()

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
            for first, last in complement(self._deliveries.settled_runs(number), size):
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

    # -- what the archive keeps for the senses ---------------------------------

    def remember_channel(self, info: SensorInfo) -> None:
        """Keep a sensor's declaration, so its events can be delivered after a
        restart even if the sensor is no longer configured."""
        self._declarations.remember(info)

    def channels(self) -> dict[str, SensorInfo]:
        """The declarations of every channel the archive has seen declared."""
        self.flush()
        return self._declarations.declared()

    def bookmark(self, source: str) -> ArchiveBookmark:
        """Where a sensor stands in its source, kept with the events it read."""
        return self._bookmarks.bookmark(source)

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

    def search(
        self,
        query: str,
        *,
        channel: str | None = None,
        since: float | None = None,
        until: float | None = None,
        offset: int = 0,
        limit: int = 20,
    ) -> SearchPage:
        """Events whose text, sender, key or data hold the words of `query`, best
        first (see `archive_index`), on channels matching the glob `channel`,
        arrived between `since` and `until`, from rank `offset`, at most `limit`.

        Raises ValueError for a query with no word or a negative offset.
        """
        if offset < 0:
            raise ValueError("offset cannot be negative")
        limit = max(1, min(limit, MAX_PAGE))
        self.flush()
        if self._backfilling:
            if self.upkeep is not None:
                self.upkeep.give_way()
            self._backfilling = not archive_index.backfill(
                self.conn, archive_index.SEARCH_BUDGET_S)
            self._committed()
        found = archive_index.search(self.conn, query, channel=channel, since=since, until=until)
        page = found.places[offset : offset + limit]
        infos = {n: self.batch(f"b{n}") for n in archive_index.places_by_batch(page)}
        hits = []
        for number, seq, score in page:
            row = self.conn.execute(
                "SELECT seq, id, sender, authorised, occurred_at, received_at, key, text,"
                " payload FROM events WHERE batch = ? AND seq = ?", (number, seq),
            ).fetchone()
            hits.append(ArchiveHit(infos[number], _row_event(infos[number], row), score))
        following = offset + len(page)
        return SearchPage(
            tuple(hits), offset, len(found.places),
            following if following < len(found.places) else None,
            found.window_full, found.unindexed, found.any_word,
        )

    def rebuild_index(self) -> None:
        """Index every event again, now, however long it takes. The full-text
        index is derived data: a salvaged archive gets a new one."""
        self.flush()
        if self.upkeep is not None:
            self.upkeep.give_way()
        with self.conn:
            archive_index.start_over(self.conn)
        self._backfilling = not archive_index.backfill(self.conn, float("inf"))
        self._committed()

    def counts(self) -> dict[str, ChannelArchiveCounts]:
        """Per channel, events stored and how many of them were dropped at the gate."""
        self.flush()
        rows = self.conn.execute(
            "SELECT channel, SUM(size), SUM(CASE WHEN dropped THEN size ELSE 0 END)"
            " FROM batches GROUP BY channel"
        ).fetchall()
        return {c: ChannelArchiveCounts(int(s), int(d)) for c, s, d in rows}

    def close(self) -> None:
        """Flush, stop the upkeep and close the database."""
        self.flush()
        if self.upkeep is not None:
            self.upkeep.stop()
            self.upkeep = None
        self.conn.close()

    def __enter__(self) -> SensoryArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _create(conn: sqlite3.Connection, *, merge_in_commits: bool | None) -> None:
    """Create or migrate the archive; `merge_in_commits` (None: as it is) sets
    whether its commits merge the full-text index."""
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
        for script in (_LATER, deliveries.SCHEMA, declarations.SCHEMA, bookmarks.SCHEMA):
            for statement in _statements(script):
                conn.execute(statement)
        archive_index.create(conn)
        if merge_in_commits is not None:
            archive_upkeep.merge_in_commits(conn, merge_in_commits)
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
        payload=Payload(json.loads(payload) if payload else {}),
        batch_id=info.batch_id, batch_seq=seq,
    )
