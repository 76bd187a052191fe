"""Save points kept in the store: accepted ones and rejected ones, with their reports.

Every compaction leaves one record. An accepted save point is what the
context shows; a rejected one keeps what the chronicler wrote and why the
validator refused it, for a person to review. Records are never edited or
deleted (the store's triggers see to it).

Each record keeps the share of its citations the support check found
supported (`support`, a column of its own; None for records written before
the check existed, or with no citation to judge) and, in its report, the
counts behind it.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from .store import TurnStore


class Status(enum.StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One try of the chronicler and what the validator said of it."""

    number: int
    failures: tuple[tuple[str, str], ...]  # (code, message)
    chars: int
    chronicler_s: float
    validator_ms: float
    text: str = ""  # kept only for rejected attempts, for review
    support_ms: float = 0.0  # reading the cited turns and their vectors, embedding the clauses
    turns: int = 0  # the turns it narrated (a retry may take fewer); 0 in older records
    asked_tokens: int = 0  # the longest answer it asked for; 0: what the window left
    structured: bool = False  # asked as structured data (a schema), not as free text


@dataclass(frozen=True, slots=True)
class Report:
    """What a person needs to judge a save point."""

    cited: tuple[int, ...]
    covered: int
    coverable: int
    chars: int
    words: int
    tokens: int
    retries: int
    chronicler: str  # provider/model
    language: str
    attempts: tuple[AttemptRecord, ...] = ()
    error: str | None = None  # the chronicler could not be reached, or the session moved on
    session_last: int | None = None  # the newest session turn when the compaction ended
    notes: tuple[str, ...] = field(default=())
    # The support check of the last attempt: citations judged, and how.
    judged: int = 0
    supported: int = 0
    weak: int = 0
    unsupported: int = 0
    words_only: int = 0  # judged without vectors

    @property
    def coverage(self) -> float:
        return self.covered / self.coverable if self.coverable else 1.0

    @property
    def support(self) -> float | None:
        """Supported citations over judged ones; None when none was judged."""
        return self.supported / self.judged if self.judged else None

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> Report:
        data = json.loads(raw)
        data["cited"] = tuple(data.get("cited", ()))
        data["notes"] = tuple(data.get("notes", ()))
        data["attempts"] = tuple(
            AttemptRecord(**{**a, "failures": tuple(tuple(f) for f in a.get("failures", ()))})
            for a in data.get("attempts", ())
        )
        return cls(**data)


@dataclass(frozen=True, slots=True)
class SavePoint:
    """A stored save point."""

    id: int
    created: float
    status: Status
    previous: int | None
    turn_ids: tuple[int, ...]
    text: str
    report: Report
    support: float | None = None  # the share of supported citations; None: not checked

    @property
    def first_turn(self) -> int:
        return self.turn_ids[0]

    @property
    def last_turn(self) -> int:
        return self.turn_ids[-1]

    @property
    def accepted(self) -> bool:
        return self.status is Status.ACCEPTED


_COLUMNS = "id, created, status, previous, turn_ids, text, report, support"


def record(
    store: TurnStore,
    *,
    status: Status,
    previous: int | None,
    turn_ids: Sequence[int],
    text: str,
    report: Report,
) -> SavePoint:
    """Store a save point record; joins the caller's transaction if there is one."""
    if not turn_ids:
        raise ValueError("a save point narrates at least one turn")
    ids = tuple(sorted(turn_ids))
    created = time.time()
    with store.transaction() as db:
        cursor = db.execute(
            "INSERT INTO save_points (created, status, previous, first_turn, last_turn, turn_ids,"
            " text, report, support) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (created, status.value, previous, ids[0], ids[-1], json.dumps(ids), text,
             report.to_json(), report.support),
        )
    assert cursor.lastrowid is not None
    return SavePoint(cursor.lastrowid, created, status, previous, ids, text, report, report.support)


def get(store: TurnStore, save_point_id: int) -> SavePoint | None:
    row = store.conn.execute(
        f"SELECT {_COLUMNS} FROM save_points WHERE id = ?", (save_point_id,)
    ).fetchone()
    return _from_row(row) if row else None


def listing(store: TurnStore, *, limit: int | None = None) -> list[SavePoint]:
    """Save points, newest first."""
    sql = f"SELECT {_COLUMNS} FROM save_points ORDER BY id DESC"
    params: tuple = ()
    if limit is not None:
        sql += " LIMIT ?"
        params = (limit,)
    return [_from_row(r) for r in store.conn.execute(sql, params).fetchall()]


def latest(store: TurnStore) -> SavePoint | None:
    found = listing(store, limit=1)
    return found[0] if found else None


def _from_row(row: Sequence) -> SavePoint:
    sp_id, created, status, previous, turn_ids, text, report, support = row
    return SavePoint(
        id=int(sp_id),
        created=float(created),
        status=Status(status),
        previous=previous,
        turn_ids=tuple(json.loads(turn_ids)),
        text=text,
        report=Report.from_json(report),
        support=None if support is None else float(support),
    )
