"""The agent's schedules, kept in their own SQLite file, `schedules.db`, in the
agent's folder.

A file of its own rather than a table in the turn store or the sensory
archive: schedules are few, edited (cancelled, their progress moved), and
written both by the running agent and by `noema schedule cancel` from
another process; the turn store and the archive are append-only, with
triggers that refuse edits, and each is written by one process. WAL lets the
command and the agent share the file; every change commits at once, so a
schedule the tool confirmed survives a `kill -9`.

IDs are never reused (AUTOINCREMENT), so an ID read from an old list can
never cancel another schedule.

`fired_through` is where the scheduler sensor stands in a schedule (the
latest occurrence it fired). The sensor's durable place is its bookmark in
the sensory archive, committed with the firing's event; this column is kept
for the lists, and as the place when the agent runs without an archive.

`outside` keeps whose words a schedule may carry: set while words from
outside led the conversation (a stranger's mail asked for it, say), it names
them, and its firings come back as an outsider's event, not the person's.
"""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..health import check_file, check_open, opening, private_file
from ..memory.turns import Source, SourceKind, sources_from_text
from ..paths import AgentPaths
from ..perception.events import Urgency

SCHEDULES_FILE = "schedules.db"
MAX_REASON = 2000
SCHEMA_VERSION = 2  # 2: the `outside` column

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    kind          TEXT    NOT NULL CHECK (kind IN ('alarm', 'recurring')),
    reason        TEXT    NOT NULL,
    at            REAL,
    cron          TEXT,
    rule          TEXT    NOT NULL,
    zone          TEXT    NOT NULL,
    urgency       TEXT    NOT NULL CHECK (urgency IN ('normal', 'priority', 'urgent')),
    created_at    REAL    NOT NULL,
    cancelled_at  REAL,
    fired_through REAL,
    fired_count   INTEGER NOT NULL DEFAULT 0,
    fired_at      REAL,
    outside       TEXT    NOT NULL DEFAULT '',
    CHECK ((kind = 'alarm') = (at IS NOT NULL)),
    CHECK ((kind = 'recurring') = (cron IS NOT NULL))
);
"""


def schedules_path(paths: AgentPaths) -> Path:
    """Where an agent's schedules are kept."""
    return paths.root / SCHEDULES_FILE


class Kind(enum.StrEnum):
    """An alarm fires once; a recurring schedule by its cron rule."""

    ALARM = "alarm"
    RECURRING = "recurring"


class ScheduleNotFound(LookupError):
    """No schedule has this ID."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """One schedule as stored; times are seconds since the epoch."""

    id: int
    kind: Kind
    reason: str
    rule: str  # what was asked: the words, or the cron, as given
    zone: str  # IANA zone the rule is read in
    urgency: Urgency
    created_at: float
    at: float | None = None  # alarms
    cron: str | None = None  # recurring schedules
    cancelled_at: float | None = None
    fired_through: float | None = None
    fired_count: int = 0
    # Whose outside words led when it was set, or its reason repeats ("" for
    # the person's): JSON [[kind, who], ...], or a sentence in older files.
    outside: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind(self.kind))
        object.__setattr__(self, "urgency", Urgency(self.urgency))
        if (self.kind is Kind.ALARM) != (self.at is not None):
            raise ValueError("an alarm, and only an alarm, has a time `at`")
        if (self.kind is Kind.RECURRING) != (self.cron is not None):
            raise ValueError("a recurring schedule, and only one, has a cron rule")

    @property
    def sources(self) -> tuple[Source, ...]:
        """Whose outside words it carries (none: the person's own)."""
        if not self.outside:
            return ()
        if self.outside.startswith("["):
            return sources_from_text(self.outside)
        return (Source(SourceKind.TOOL, self.outside),)  # a file from before sources

    @property
    def active(self) -> bool:
        """Not cancelled, and (for an alarm) not fired yet."""
        if self.cancelled_at is not None:
            return False
        return self.kind is Kind.RECURRING or self.fired_through is None


def _check_reason(reason: str) -> str:
    text = " ".join(reason.split())
    if not text:
        raise ValueError("a schedule needs a reason: what should be remembered or done")
    if len(text) > MAX_REASON:
        raise ValueError(f"a reason has at most {MAX_REASON} characters")
    return text


class ScheduleStore:
    """Schedules in SQLite; `subscribe` to hear of changes made through this object."""

    def __init__(self, path: Path | str) -> None:
        """Open (or create) the store; ":memory:" keeps it in memory."""
        self.path = Path(path)
        on_disk = str(path) != ":memory:"
        if on_disk:
            with opening(self.path):
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            check_file(self.path)
            private_file(self.path)  # its -wal and -shm files take its mode
        self.conn = sqlite3.connect(str(path), isolation_level=None)
        try:
            with opening(self.path):
                self.conn.execute("PRAGMA busy_timeout=5000")  # the command and the agent share it
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
                if on_disk:
                    check_open(self.conn, self.path)
                self.conn.executescript(_SCHEMA)
                columns = {r[1] for r in self.conn.execute("PRAGMA table_info(schedules)")}
                if "outside" not in columns:  # a file of version 1: its schedules were the person's
                    self.conn.execute("ALTER TABLE schedules ADD COLUMN outside TEXT NOT NULL "
                                      "DEFAULT ''")
                self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except BaseException:
            self.conn.close()
            raise
        self._listeners: list[Callable[[], None]] = []

    # -- changes -------------------------------------------------------------

    def add_alarm(self, reason: str, at: float, *, rule: str, zone: str,
                  urgency: Urgency = Urgency.NORMAL, now: float, outside: str = "") -> Schedule:
        """Keep an alarm that fires once at `at`; `outside` names the outside
        words that led when it was set."""
        return self._add(Kind.ALARM, _check_reason(reason), rule, zone, urgency, now,
                         outside, at=at)

    def add_recurring(self, reason: str, cron: str, *, rule: str, zone: str,
                      urgency: Urgency = Urgency.NORMAL, now: float,
                      outside: str = "") -> Schedule:
        """Keep a schedule that fires by `cron` (read in `zone`) from `now` on."""
        return self._add(Kind.RECURRING, _check_reason(reason), rule, zone, urgency, now,
                         outside, cron=cron)

    def _add(self, kind: Kind, reason: str, rule: str, zone: str, urgency: Urgency,
             now: float, outside: str, *, at: float | None = None,
             cron: str | None = None) -> Schedule:
        with opening(self.path):
            cursor = self.conn.execute(
                "INSERT INTO schedules (kind, reason, at, cron, rule, zone, urgency, created_at,"
                " outside) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (kind.value, reason, at, cron, rule, zone, urgency.value, now, outside))
        schedule = self.get(int(cursor.lastrowid or 0))
        self._changed()
        return schedule

    def cancel(self, schedule_id: int, now: float) -> Schedule:
        """Cancel a schedule; cancelling one already ended changes nothing.
        Raises ScheduleNotFound."""
        current = self.get(schedule_id)
        if current.active:
            with opening(self.path):
                self.conn.execute("UPDATE schedules SET cancelled_at = ? WHERE id = ? "
                                  "AND cancelled_at IS NULL", (now, schedule_id))
            self._changed()
        return self.get(schedule_id)

    def record_firing(self, schedule_id: int, through: float, count: int, now: float) -> None:
        """Note that a schedule fired at `now` up to its occurrence at `through`
        (`count` occurrences)."""
        with opening(self.path):
            self.conn.execute(
                "UPDATE schedules SET fired_through = MAX(COALESCE(fired_through, 0), ?),"
                " fired_count = fired_count + ?, fired_at = ? WHERE id = ?",
                (through, count, now, schedule_id))

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every schedule added or cancelled through this store."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    # -- reading ---------------------------------------------------------------

    def get(self, schedule_id: int) -> Schedule:
        """The schedule with this ID; raises ScheduleNotFound."""
        row = self.conn.execute(f"SELECT {_COLUMNS} FROM schedules WHERE id = ?",
                                (schedule_id,)).fetchone()
        if row is None:
            raise ScheduleNotFound(f"there is no schedule #{schedule_id}")
        return _schedule(row)

    def active(self) -> list[Schedule]:
        """The schedules that may still fire, oldest first."""
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM schedules WHERE cancelled_at IS NULL"
            " AND (kind = 'recurring' OR fired_through IS NULL) ORDER BY id").fetchall()
        return [_schedule(r) for r in rows]

    def candidates(self, ended_since: float) -> list[Schedule]:
        """What the scheduler sensor looks at: the active schedules, and the alarms
        fired at or after `ended_since` (whose firing it checks against its own place)."""
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM schedules WHERE cancelled_at IS NULL AND"
            " (kind = 'recurring' OR fired_through IS NULL OR fired_at >= ?) ORDER BY id",
            (ended_since,)).fetchall()
        return [_schedule(r) for r in rows]

    def recent(self, limit: int = 50) -> list[Schedule]:
        """Every schedule, active or ended, newest first."""
        rows = self.conn.execute(f"SELECT {_COLUMNS} FROM schedules ORDER BY id DESC LIMIT ?",
                                 (limit,)).fetchall()
        return [_schedule(r) for r in rows]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ScheduleStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_COLUMNS = ("id, kind, reason, rule, zone, urgency, created_at, at, cron, cancelled_at,"
            " fired_through, fired_count, outside")


def _schedule(row: tuple) -> Schedule:
    (id_, kind, reason, rule, zone, urgency, created_at, at, cron, cancelled_at,
     fired_through, fired_count, outside) = row
    return Schedule(int(id_), Kind(kind), reason, rule, zone, Urgency(urgency), created_at,
                    at=at, cron=cron, cancelled_at=cancelled_at, fired_through=fired_through,
                    fired_count=int(fired_count), outside=outside or "")
