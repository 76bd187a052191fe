"""The turn store: SQLite in WAL mode, append-only, with a full-text index.

Immutability is enforced by triggers inside the database, so no code path,
ours or a person's `sqlite3` shell, can edit or delete a turn; the only
permitted update adds status flags. Large contents are kept whole, zlib
compressed. The FTS5 index is contentless (the text lives once, in `turns`)
and uses the porter stemmer. A language with rules of its own (Spanish) gets
a second contentless index, fed with stems made by its Snowball stemmer
(`memory.stemming`): `index_language` builds it once, back-filling every
older turn, and from then on every append feeds it too, whichever language
the process that appends speaks, so the index never has a gap.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..health import check_file, check_open, opening, private_file
from ..perception.untrusted import DEFAULT_MARKER, OPEN, plain_words
from .stemming import INDEX_TABLES, STEMMED_TOKENIZER, WordStemmer, stemmer_for
from .tokens import MESSAGE_OVERHEAD, estimate_tokens
from .turns import Flag, NewTurn, Role, Turn, TurnKind, sources_from_text, sources_to_text
from .upkeep import IndexUpkeep, configure

# 2: outside text indexed without its datamarks; 3: turns' `sources`, save points' support
SCHEMA_VERSION = 3
COMPRESS_ABOVE = 16 * 1024  # bytes of UTF-8 text
BACKFILL_BATCH = 500  # turns indexed per transaction when a language's index is built (appends wait that long)

_IMMUTABLE_COLUMNS = (
    "id", "ts", "kind", "role", "content", "content_z", "tool_name", "call_id",
    "arguments", "channel", "sender", "tokens", "cycle_id", "sources",
)

_IMMUTABLE_TRIGGER = f"""
CREATE TRIGGER IF NOT EXISTS turns_never_edited BEFORE UPDATE ON turns
WHEN {" OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in _IMMUTABLE_COLUMNS)}
     OR (NEW.flags & OLD.flags) <> OLD.flags
BEGIN
    SELECT RAISE(ABORT, 'turns are immutable: only new status flags may be added');
END;
"""

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS turns (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    ts        REAL    NOT NULL,
    kind      TEXT    NOT NULL CHECK (kind IN ({", ".join(repr(k.value) for k in TurnKind)})),
    role      TEXT    NOT NULL CHECK (role IN ({", ".join(repr(r.value) for r in Role)})),
    content   TEXT,
    content_z BLOB,
    tool_name TEXT,
    call_id   TEXT,
    arguments TEXT,
    channel   TEXT,
    sender    TEXT,
    tokens    INTEGER NOT NULL DEFAULT 0,
    cycle_id  INTEGER,
    flags     INTEGER NOT NULL DEFAULT 0,
    sources   TEXT,                     -- whose outside words: JSON [[kind, who], ...]
    CHECK ((content IS NULL) <> (content_z IS NULL))
);
CREATE INDEX IF NOT EXISTS turns_ts ON turns(ts);
CREATE INDEX IF NOT EXISTS turns_call ON turns(call_id) WHERE call_id IS NOT NULL;

CREATE TRIGGER IF NOT EXISTS turns_never_deleted BEFORE DELETE ON turns
BEGIN
    SELECT RAISE(ABORT, 'turns are immutable: a turn can never be deleted');
END;

{_IMMUTABLE_TRIGGER}

CREATE VIRTUAL TABLE IF NOT EXISTS turns_fts USING fts5(
    body, content='', tokenize='porter unicode61 remove_diacritics 2'
);

CREATE TABLE IF NOT EXISTS stem_indexes (
    language TEXT PRIMARY KEY,
    through  INTEGER NOT NULL,          -- every turn up to this ID is in the index
    live     INTEGER NOT NULL DEFAULT 0 -- 1 once back-filled: appends feed it from then on
);

CREATE TABLE IF NOT EXISTS search_language (
    only     INTEGER PRIMARY KEY CHECK (only = 1),
    language TEXT NOT NULL              -- whose rules read the words of a search
);

CREATE TABLE IF NOT EXISTS cycles (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    started REAL NOT NULL,
    ended   REAL,
    origin  TEXT NOT NULL,
    status  TEXT NOT NULL DEFAULT 'open'
);

CREATE TABLE IF NOT EXISTS session_entries (
    pos     INTEGER PRIMARY KEY,
    turn_id INTEGER NOT NULL UNIQUE REFERENCES turns(id)
);

CREATE TABLE IF NOT EXISTS session_pending (
    turn_id INTEGER PRIMARY KEY REFERENCES turns(id)
);

CREATE TABLE IF NOT EXISTS session_state (
    key   TEXT PRIMARY KEY,
    value TEXT
);

CREATE TABLE IF NOT EXISTS save_points (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    created    REAL NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('accepted', 'rejected')),
    previous   INTEGER REFERENCES save_points(id),
    first_turn INTEGER NOT NULL,
    last_turn  INTEGER NOT NULL,
    turn_ids   TEXT NOT NULL,
    text       TEXT NOT NULL,
    report     TEXT NOT NULL,
    support    REAL CHECK (support BETWEEN 0 AND 1) -- supported citations' share; NULL: not checked
);

-- A save point, accepted or rejected, is a record of what the chronicler
-- wrote and what the validator said: history, never rewritten.
CREATE TRIGGER IF NOT EXISTS save_points_never_deleted BEFORE DELETE ON save_points
BEGIN
    SELECT RAISE(ABORT, 'save points are kept: a save point can never be deleted');
END;

CREATE TRIGGER IF NOT EXISTS save_points_never_edited BEFORE UPDATE ON save_points
BEGIN
    SELECT RAISE(ABORT, 'save points are kept: a save point can never be edited');
END;

-- Notes the model pinned with annotate_observation; turn_id is the call.
CREATE TABLE IF NOT EXISTS observations (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    turn_id INTEGER NOT NULL REFERENCES turns(id),
    source  TEXT NOT NULL,
    note    TEXT NOT NULL
);
"""

TURN_COLUMNS = (
    "id, ts, kind, role, content, content_z, tool_name, call_id, arguments, "
    "channel, sender, tokens, cycle_id, flags, sources"
)

PREFIXED_COLUMNS = ", ".join(f"t.{c.strip()}" for c in TURN_COLUMNS.split(","))


class StoreError(Exception):
    """The turn store refused an operation (for example, an edit of a turn)."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One full-text search result."""

    turn: Turn
    score: float  # BM25; lower is better, as SQLite reports it


@dataclass(frozen=True, slots=True)
class StoredCycle:
    """A reasoning cycle as the store recorded it: who it answered ("person" or
    "world") and how it ended ("open" while it runs or if its process died;
    then "answered", "step_limit", "repeating", "no_progress", "failed", "stopped",
    "cancelled_safe", "cancelled_unsafe", "shutdown" or "crashed")."""

    id: int
    origin: str
    status: str


def own_text(turn: NewTurn | Turn) -> str:
    """A turn's own text: its content, or for a call the tool's name and arguments."""
    if turn.kind is TurnKind.TOOL_CALL:
        return f"{turn.tool_name} {turn.arguments or ''}"
    return turn.content


def searchable_text(turn: NewTurn | Turn) -> str:
    """The text the full-text index sees for a turn: its own text and its sender,
    outside text without its datamarks so that its words can be found."""
    return plain_words(_marked_searchable_text(turn))


def _marked_searchable_text(turn: NewTurn | Turn) -> str:
    # What stores of schema 1 indexed; a contentless index forgets a row by its text.
    if turn.sender and turn.kind is not TurnKind.TOOL_CALL:
        return f"{turn.content} {turn.sender}"
    return own_text(turn)


def turn_tokens(turn: NewTurn) -> int:
    """Estimated tokens a turn costs in the context."""
    if turn.tokens is not None:
        return turn.tokens
    return estimate_tokens(own_text(turn)) + MESSAGE_OVERHEAD


class TurnStore:
    """Append-only store of turns, cycles, the session and save points.

    Opening checks the file quickly (`health.sqlite_files`): a damaged file
    raises `health.DamagedDatabase` and a full disk `health.DiskFull`, both
    with a message for the person, and nothing is written into either.
    """

    def __init__(self, path: Path | str, *, durable_to_power_loss: bool = False) -> None:
        self.path = Path(path)
        on_disk = str(path) != ":memory:"
        if on_disk:
            with opening(self.path):
                self.path.parent.mkdir(parents=True, exist_ok=True)
            check_file(self.path)
            private_file(self.path)  # its -wal and -shm files take its mode
        self.conn = sqlite3.connect(
            str(path), isolation_level=None, check_same_thread=False, timeout=30
        )
        self._lock = threading.RLock()
        self._depth = 0
        self._last_write = time.monotonic()
        self._upkeep: IndexUpkeep | None = None
        # The schema version an older store was upgraded from at this open (None: none was).
        self.upgraded_from: int | None = None
        try:
            with opening(self.path):
                self._prepare(durable_to_power_loss, check=on_disk)
        except BaseException:
            self.conn.close()
            raise

    def _prepare(self, durable_to_power_loss: bool, *, check: bool) -> None:
        self.conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL survives a killed process (the WAL is in the OS cache);
        # FULL also survives a power cut, at an fsync per commit.
        sync = "FULL" if durable_to_power_loss else "NORMAL"
        self.conn.execute(f"PRAGMA synchronous={sync}")
        self.conn.execute("PRAGMA foreign_keys=ON")
        if check:  # before anything is written into a file that may be damaged
            check_open(self.conn, self.path)
        # executescript commits on its own, so the schema carries its own
        # transaction: a crash mid-creation leaves no half-made database.
        found = self.conn.execute("PRAGMA user_version").fetchone()[0]
        self.upgraded_from = found if 0 < found < SCHEMA_VERSION else None
        if 0 < found < 3:  # before the schema below names the column
            _add_sources_column(self.conn)
        self.conn.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} COMMIT;")
        if found < SCHEMA_VERSION:
            with self.transaction() as db:
                if found == 1:
                    _index_outside_words(db)
                _add_support_column(db)
                if 0 < found < 3:
                    _mark_old_reads(db)
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _live_indexes(self) -> tuple[tuple[str, WordStemmer], ...]:
        rows = self.conn.execute("SELECT language FROM stem_indexes WHERE live = 1 ORDER BY language")
        return tuple(
            (INDEX_TABLES[lang], stemmer_for(lang)) for (lang,) in rows if lang in INDEX_TABLES
        )

    def index_language(
        self, language: str, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Make sure every turn is in `language`'s full-text index; how many
        turns this call indexed. English is the store's own index: nothing to
        do. The language is recorded as the one searches are read in (see
        `search_language`). The older turns are indexed in batches, each committed
        with how far it got, so a process killed midway resumes where it
        stopped; `progress(done, total)` is told after each batch."""
        if language not in INDEX_TABLES:
            raise ValueError(f"no full-text index for language {language!r}")
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO search_language (only, language) VALUES (1, ?)",
                       (language,))
        if language == "en":
            return 0
        stemmer = stemmer_for(language)
        table = INDEX_TABLES[language]
        with self.transaction() as db:
            db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5("
                f"body, content='', tokenize='{STEMMED_TOKENIZER}')"
            )
            db.execute("INSERT OR IGNORE INTO stem_indexes (language, through) VALUES (?, 0)",
                       (language,))
            (through, live) = db.execute(
                "SELECT through, live FROM stem_indexes WHERE language = ?", (language,)
            ).fetchone()
        if live:
            return 0
        indexed = 0
        total = self.last_id()
        while True:
            with self.transaction() as db:
                rows = db.execute(
                    f"SELECT {TURN_COLUMNS} FROM turns WHERE id > ? ORDER BY id LIMIT ?",
                    (through, BACKFILL_BATCH),
                ).fetchall()
                if not rows:
                    # Done, inside the transaction that makes appends feed it:
                    # no turn can slip between the back-fill and the appends.
                    db.execute("UPDATE stem_indexes SET through = ?, live = 1 WHERE language = ?",
                               (through, language))
                    break
                for row in rows:
                    try:
                        turn = row_to_turn(row)
                    except (zlib.error, UnicodeDecodeError, ValueError):
                        continue  # a garbled turn stays stored, unsearchable
                    db.execute(f"INSERT INTO {table} (rowid, body) VALUES (?, ?)",
                               (turn.id, stemmer.text(searchable_text(turn))))
                    indexed += 1
                through = int(rows[-1][0])
                db.execute("UPDATE stem_indexes SET through = ? WHERE language = ?", (through, language))
            if progress is not None:
                progress(min(through, total), total)
        return indexed

    def indexed_through(self, language: str) -> int:
        """The highest turn ID `language`'s index is known to hold (every turn
        for English and for a complete index)."""
        if language == "en":
            return self.last_id()
        row = self.conn.execute(
            "SELECT through, live FROM stem_indexes WHERE language = ?", (language,)
        ).fetchone()
        if row is None:
            return 0
        return self.last_id() if row[1] else int(row[0])

    def search_language(self) -> str:
        """The language whose index serves searches: the one `index_language`
        was last asked for, once its index holds every turn; English before."""
        row = self.conn.execute("SELECT language FROM search_language").fetchone()
        language = row[0] if row else "en"
        return language if language in self.indexed_languages() else "en"

    def indexed_languages(self) -> frozenset[str]:
        """The languages whose index holds every turn (English always does)."""
        live = {table for table, _ in self._live_indexes()}
        return frozenset({"en", *(lang for lang, table in INDEX_TABLES.items() if table in live)})

    # -- transactions ---------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; nested uses join the outer one."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self.conn
                finally:
                    self._depth -= 1
                return
            if self._upkeep is not None:
                self._upkeep.give_way()
            self.conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield self.conn
            except BaseException:
                self._depth = 0
                self.conn.execute("ROLLBACK")
                raise
            self._depth = 0
            self.conn.execute("COMMIT")
            self._last_write = time.monotonic()
            if self._upkeep is not None:
                self._upkeep.dirty.set()

    def last_write(self) -> float:
        """When this connection last committed (time.monotonic())."""
        return self._last_write

    def close(self) -> None:
        if self._upkeep is not None:
            self._upkeep.stop()
            self._upkeep = None
        with self._lock:
            self.conn.close()

    def start_upkeep(self, *, quiet_s: float = 0.2, merge_pages: int = 64) -> None:
        """Keep the full-text index merged and the WAL checkpointed from a background
        thread (see `memory.upkeep`), working only when no write happened for
        `quiet_s` seconds. With upkeep running, appends only flush their own
        small segment; without it (short commands, other tools) FTS5's crisis
        merges still bound the segments.
        """
        if self._upkeep is not None or str(self.path) == ":memory:":
            return
        with self.transaction() as db:
            configure(db)
        self._upkeep = IndexUpkeep(self.path, lambda: self._last_write, quiet_s, merge_pages)
        self._upkeep.start()

    def rebuild_index(self) -> int:
        """Index every turn again; how many turns are indexed. The full-text
        index is derived data: a salvaged store gets a new one."""
        indexed = 0
        with self.transaction() as db:
            db.execute("INSERT INTO turns_fts(turns_fts) VALUES('delete-all')")
            # The other languages' indexes are built again by index_language.
            for table in INDEX_TABLES.values():
                if table != "turns_fts" and self._has_table(db, table):
                    db.execute(f"INSERT INTO {table}({table}) VALUES('delete-all')")
            db.execute("DELETE FROM stem_indexes")
            rows = db.execute(f"SELECT {TURN_COLUMNS} FROM turns ORDER BY id").fetchall()
            for row in rows:
                try:
                    turn = row_to_turn(row)
                except (zlib.error, UnicodeDecodeError, ValueError):
                    continue  # a garbled turn stays stored, unsearchable
                db.execute("INSERT INTO turns_fts (rowid, body) VALUES (?, ?)",
                           (turn.id, searchable_text(turn)))
                indexed += 1
        return indexed

    @staticmethod
    def _has_table(db: sqlite3.Connection, name: str) -> bool:
        return db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None

    # -- turns ------------------------------------------------------------

    def append(self, new: NewTurn, *, at: float | None = None) -> Turn:
        """Append a turn and index it; returns it with its new ID.

        `at` sets the timestamp instead of the clock, for imports and
        benchmarks that replay dated conversations. IDs follow time, so it
        may not be earlier than the latest turn's.
        """
        ts = time.time() if at is None else at
        tokens = turn_tokens(new)
        content: str | None = new.content
        packed: bytes | None = None
        if len(new.content) > COMPRESS_ABOVE // 4 and len(new.content.encode()) > COMPRESS_ABOVE:
            packed, content = zlib.compress(new.content.encode(), 6), None
        with self.transaction() as db:
            if at is not None:
                latest = db.execute("SELECT ts FROM turns ORDER BY id DESC LIMIT 1").fetchone()
                if latest and at < latest[0]:
                    raise StoreError(
                        f"a turn dated {at} cannot follow one dated {latest[0]}: IDs follow time"
                    )
            cursor = db.execute(
                "INSERT INTO turns (ts, kind, role, content, content_z, tool_name, call_id,"
                " arguments, channel, sender, tokens, cycle_id, flags, sources)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    ts, new.kind.value, new.role.value, content, packed, new.tool_name,
                    new.call_id, new.arguments, new.channel, new.sender, tokens,
                    new.cycle_id, int(new.flags), sources_to_text(new.sources),
                ),
            )
            turn_id = cursor.lastrowid
            assert turn_id is not None
            text = searchable_text(new)
            db.execute("INSERT INTO turns_fts (rowid, body) VALUES (?, ?)", (turn_id, text))
            # Read in the transaction, not kept from the open: another process
            # may have built a language's index since (one row, microseconds).
            for table, stemmer in self._live_indexes():
                db.execute(f"INSERT INTO {table} (rowid, body) VALUES (?, ?)",
                           (turn_id, stemmer.text(text)))
        return Turn(
            id=turn_id, ts=ts, kind=new.kind, role=new.role, content=new.content,
            tool_name=new.tool_name, call_id=new.call_id, arguments=new.arguments,
            channel=new.channel, sender=new.sender, tokens=tokens, cycle_id=new.cycle_id,
            flags=Flag(new.flags), sources=new.sources,
        )

    def get(self, turn_id: int) -> Turn | None:
        """The turn with this ID, or None."""
        row = self.conn.execute(
            f"SELECT {TURN_COLUMNS} FROM turns WHERE id = ?", (turn_id,)
        ).fetchone()
        return row_to_turn(row) if row else None

    def get_many(self, ids: Iterable[int]) -> list[Turn]:
        """The turns with these IDs, in ID order; unknown IDs are skipped."""
        wanted = sorted(set(ids))
        found: list[Turn] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.conn.execute(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE id IN ({marks}) ORDER BY id", chunk
            ).fetchall()
            found.extend(row_to_turn(r) for r in rows)
        return found

    def range(self, first: int, last: int) -> list[Turn]:
        """Turns with first <= id <= last, in order."""
        rows = self.conn.execute(
            f"SELECT {TURN_COLUMNS} FROM turns WHERE id BETWEEN ? AND ? ORDER BY id", (first, last)
        ).fetchall()
        return [row_to_turn(r) for r in rows]

    def last_id(self) -> int:
        row = self.conn.execute("SELECT MAX(id) FROM turns").fetchone()
        return int(row[0] or 0)

    def count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM turns").fetchone()[0])

    def add_flags(self, ids: Sequence[int], flags: Flag) -> None:
        """Give turns new status flags (the only change a turn accepts)."""
        if not ids:
            return
        with self.transaction() as db:
            db.executemany(
                "UPDATE turns SET flags = flags | ? WHERE id = ?",
                [(int(flags), i) for i in ids],
            )

    def taken_up_until(self) -> float:
        """The time of the newest answer the person wrote after: outside words
        stored before it are taken up (see `security.provenance.leading`),
        whatever a compaction folded since; -inf when there is none."""
        # Newest first along the time index: both are found near its end.
        person = self.conn.execute(
            "SELECT ts FROM turns WHERE kind = 'user' AND flags & ? = 0 ORDER BY ts DESC LIMIT 1",
            (int(Flag.SYNTHETIC | Flag.DISCARDED),)).fetchone()
        if person is None:
            return float("-inf")
        answer = self.conn.execute(
            "SELECT ts FROM turns WHERE kind = 'assistant' AND flags & ? = 0 AND ts < ?"
            " AND (content_z IS NOT NULL OR trim(content) != '') ORDER BY ts DESC LIMIT 1",
            (int(Flag.DISCARDED), person[0])).fetchone()
        return answer[0] if answer is not None else float("-inf")

    def folded_outside_untaken(self, since: float | None = None,
                               limit: int = 50) -> list[Turn]:
        """Turns holding outside words (results, events, notes) folded into a
        save point that the person has not taken up (stored after `since`,
        by default `taken_up_until`), the newest `limit`, oldest first."""
        since = self.taken_up_until() if since is None else since
        rows = self.conn.execute(
            f"SELECT {TURN_COLUMNS} FROM turns WHERE ts > ? AND flags & ? = ? AND flags & ? = 0"
            " AND kind IN ('tool_result', 'event', 'note') ORDER BY ts DESC, id DESC LIMIT ?",
            (since, int(Flag.OUTSIDE | Flag.COMPACTED), int(Flag.OUTSIDE | Flag.COMPACTED),
             int(Flag.DISCARDED), limit)).fetchall()
        return [row_to_turn(r) for r in reversed(rows)]

    def first_result(self, call_id: str, after_turn: int = 0) -> Turn | None:
        """The first result (a tool result or an event turn) with this call ID stored
        after turn `after_turn`, or None.

        Model call IDs may repeat across restarts: the first result after the
        call's own turn is the one that answers it.
        """
        row = self.conn.execute(
            f"SELECT {TURN_COLUMNS} FROM turns WHERE call_id = ? AND id > ? AND kind IN (?, ?)"
            " ORDER BY id LIMIT 1",
            (call_id, after_turn, TurnKind.EVENT.value, TurnKind.TOOL_RESULT.value),
        ).fetchone()
        return row_to_turn(row) if row else None

    # -- search -----------------------------------------------------------

    def search(
        self,
        match: str,
        *,
        limit: int = 10,
        kinds: Sequence[TurnKind] | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[SearchHit]:
        """BM25-ranked turns for an FTS5 MATCH expression, filtered."""
        where = ["turns_fts MATCH ?"]
        params: list[object] = [match]
        if kinds:
            where.append(f"t.kind IN ({','.join('?' * len(kinds))})")
            params.extend(k.value for k in kinds)
        if since is not None:
            where.append("t.ts >= ?")
            params.append(since)
        if until is not None:
            where.append("t.ts <= ?")
            params.append(until)
        params.append(limit)
        if len(where) == 1:
            # Rank inside the index first and join only the winners: joining
            # every match before sorting reads rows that are then thrown away.
            sql = (
                f"SELECT {PREFIXED_COLUMNS}, f.score FROM (SELECT rowid, bm25(turns_fts) AS score"
                " FROM turns_fts WHERE turns_fts MATCH ? ORDER BY score LIMIT ?) f"
                " JOIN turns t ON t.id = f.rowid ORDER BY f.score"
            )
        else:
            sql = (
                f"SELECT {PREFIXED_COLUMNS}, bm25(turns_fts) AS score FROM turns_fts"
                f" JOIN turns t ON t.id = turns_fts.rowid WHERE {' AND '.join(where)}"
                " ORDER BY score LIMIT ?"
            )
        try:
            rows = self.conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            raise StoreError(f"bad search expression {match!r}: {exc}") from exc
        return [SearchHit(row_to_turn(r[:-1]), float(r[-1])) for r in rows]

    # -- cycles -----------------------------------------------------------

    def open_cycle(self, origin: str) -> int:
        """Record the start of a reasoning cycle; returns its ID."""
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO cycles (started, origin) VALUES (?, ?)", (time.time(), origin)
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def close_cycle(self, cycle_id: int, status: str) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE cycles SET ended = ?, status = ? WHERE id = ?",
                (time.time(), status, cycle_id),
            )

    def last_cycle(self) -> StoredCycle | None:
        """The most recent cycle, whatever its state; None before the first."""
        row = self.conn.execute(
            "SELECT id, origin, status FROM cycles ORDER BY id DESC LIMIT 1").fetchone()
        return None if row is None else StoredCycle(int(row[0]), str(row[1]), str(row[2]))

    def open_cycles(self) -> list[int]:
        """Cycles that started and never ended (the process died in them)."""
        rows = self.conn.execute("SELECT id FROM cycles WHERE ended IS NULL ORDER BY id")
        return [int(r[0]) for r in rows]


def _index_outside_words(db: sqlite3.Connection) -> None:
    """Index again, without datamarks, the turns a store of schema 1 indexed marked.

    Once per store, at open: one scan of the turns, and work only for those
    that hold marks (delivered events, archive pages) or are compressed.
    """
    rows = db.execute(
        f"SELECT {TURN_COLUMNS} FROM turns WHERE content_z IS NOT NULL"
        " OR instr(content, ?) OR instr(content, ?) OR instr(arguments, ?)",
        (DEFAULT_MARKER, OPEN, DEFAULT_MARKER),
    ).fetchall()
    for row in rows:
        try:
            turn = row_to_turn(row)
        except (zlib.error, UnicodeDecodeError, ValueError):
            continue  # a garbled turn stays stored, unsearchable
        old, new = _marked_searchable_text(turn), searchable_text(turn)
        if old != new:
            db.execute("INSERT INTO turns_fts (turns_fts, rowid, body) VALUES ('delete', ?, ?)",
                       (turn.id, old))
            db.execute("INSERT INTO turns_fts (rowid, body) VALUES (?, ?)", (turn.id, new))


def _add_support_column(db: sqlite3.Connection) -> None:
    # Save points written before their citations were checked keep NULL, "not
    # checked": a record is never edited, so none is judged after the fact.
    columns = {row[1] for row in db.execute("PRAGMA table_info(save_points)")}
    if "support" not in columns:
        db.execute("ALTER TABLE save_points ADD COLUMN support REAL"
                   " CHECK (support BETWEEN 0 AND 1)")


# Tools whose results show stored text that may be anyone's: a turn, an
# event, a schedule's reason, a file, a command's output, a mail, a document.
OLD_READS = ("lookup_turn", "search_full_history", "lookup_sensory_archive", "schedule_list",
             "file_read", "file_grep", "file_find", "file_history", "shell_execute",
             "email_list", "email_read", "document_search", "get_document_structure",
             "get_partial_document")


def _mark_old_reads(db: sqlite3.Connection) -> None:
    """Schema 3 for an older store: a read's result stored before sources were
    kept carried no mark whatever it showed (a stranger's file, a turn of
    theirs), so it is outside words now, read back as "what a tool read"
    (flags are the one thing a turn may gain). Fail closed: a read of the
    person's own file is counted too."""
    marks = ",".join("?" * len(OLD_READS))
    db.execute(
        f"UPDATE turns SET flags = flags | ? WHERE kind = 'tool_result' AND flags & ? = 0"
        f" AND tool_name IN ({marks})",
        (int(Flag.OUTSIDE), int(Flag.OUTSIDE | Flag.ERROR), *OLD_READS))


def row_to_turn(row: Sequence) -> Turn:
    (tid, ts, kind, role, content, packed, tool_name, call_id, arguments, channel,
     sender, tokens, cycle_id, flags, sources) = row
    if content is None:
        content = zlib.decompress(packed).decode()
    return Turn(
        id=tid, ts=ts, kind=TurnKind(kind), role=Role(role), content=content,
        tool_name=tool_name, call_id=call_id, arguments=arguments, channel=channel,
        sender=sender, tokens=tokens, cycle_id=cycle_id, flags=Flag(flags),
        sources=sources_from_text(sources),
    )


def _add_sources_column(conn: sqlite3.Connection) -> None:
    """Schema 3 for an older store: the `sources` column, and the trigger that
    keeps it immutable like the rest, in one transaction. Older turns have
    none: a turn marked `OUTSIDE` without sources names no one."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(turns)")}
        if "sources" not in columns:
            conn.execute("ALTER TABLE turns ADD COLUMN sources TEXT")
        conn.execute("DROP TRIGGER IF EXISTS turns_never_edited")
        conn.execute(_IMMUTABLE_TRIGGER)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


INLINE_BACKFILL = 5_000  # turns: fewer than this are indexed before the agent starts


def start_language_index(
    store: TurnStore, language: str, notice: Callable[[str], None]
) -> threading.Thread | None:
    """Build `language`'s full-text index for an agent that speaks it (see
    `TurnStore.index_language`). A small store is indexed at once; a large one
    in a background thread while the agent runs, searches read by English
    rules until it is complete, and the person is told when it starts and ends."""
    missing = store.last_id() - store.indexed_through(language)
    if missing <= INLINE_BACKFILL:
        store.index_language(language)
        return None
    notice(f"Indexing {missing:,} turns for search in {language!r}; until it is done, "
           "searches read words by English rules.")

    def build() -> None:
        try:
            store.index_language(language)
        except (sqlite3.Error, StoreError):  # the store closed under it: resumed at the next start
            return
        notice(f"Search now reads words in {language!r}.")

    worker = threading.Thread(target=build, name=f"index-{language}", daemon=True)
    worker.start()
    return worker
