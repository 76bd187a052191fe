"""The record of questions asked away (`approvals.db` in the agent's folder).

One row per question sent to the person's channels, written before the
question leaves (and forgotten if no channel could send it), then moved
through its states in single transactions:

    waiting ─┬─ allowed ── running ── ran | failed
             ├─ refused
             └─ expired

An outcome that is final gets the next `outcome_seq`: the approvals sensor
reports outcomes in that order, each once (its bookmark is the last seq it
reported). On open, what a previous process left unfinished is settled
without running anything: a question still waiting expired (nobody can
answer it any more: its buttons and its mail belong to that process), and a
call that was allowed or running is reported as cut short, never run a
second time. The approval numbers are handed out here too, for the
questions asked at the machine as well, so one number names one question.

SQLite in WAL mode with synchronous=FULL: a row committed here is on disk.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..health import open_small_store

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS questions (
    number INTEGER PRIMARY KEY,
    tool TEXT NOT NULL,
    request TEXT NOT NULL,
    call_id TEXT NOT NULL,
    turn_id INTEGER,
    asked_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    channel TEXT NOT NULL,
    place TEXT NOT NULL,
    handle TEXT NOT NULL,
    state TEXT NOT NULL,
    by TEXT,
    outcome TEXT,
    outside INTEGER NOT NULL DEFAULT 0,
    outcome_seq INTEGER UNIQUE,
    settled_at REAL);
CREATE INDEX IF NOT EXISTS questions_open ON questions(state) WHERE outcome_seq IS NULL;
"""
FINAL = frozenset({"ran", "failed", "refused", "expired"})
KEPT = 5000  # reported questions remembered, for telling a late answer why it is closed


@dataclass(frozen=True, slots=True)
class Question:
    """One question asked away, as recorded."""

    number: int
    tool: str
    request: Mapping[str, Any]  # the ApprovalRequest's fields
    call_id: str
    asked_at: float
    expires_at: float
    channel: str
    place: str  # where it was asked, as the model is told: "on Telegram"
    handle: Mapping[str, Any]  # what the channel needs to close it
    state: str
    by: str | None
    outcome: str | None  # the sentence the model gets
    outside: bool  # the outcome holds words from outside the person
    outcome_seq: int | None


class AwayStore:
    """The questions asked away. Opening a damaged file raises sqlite3.DatabaseError."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self._db = open_small_store(path, _SCHEMA)

    def close(self) -> None:
        self._db.close()

    # -- numbers -------------------------------------------------------------------

    def next_number(self) -> int:
        """A number no question of this agent had before, across restarts."""
        with self._transaction():
            row = self._db.execute("SELECT value FROM meta WHERE key='next'").fetchone()
            highest = self._db.execute("SELECT max(number) FROM questions").fetchone()[0] or 0
            number = max(int(row[0]) if row else 1, highest + 1)
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('next', ?)", (str(number + 1),))
        return number

    # -- the questions ---------------------------------------------------------------

    def record(self, number: int, tool: str, request: Mapping[str, Any], call_id: str,
               turn_id: int | None, expires_at: float) -> None:
        """A question about to be sent, waiting from now on (where it went is
        `placed` once a channel took it)."""
        self._db.execute(
            "INSERT INTO questions (number, tool, request, call_id, turn_id, asked_at, "
            "expires_at, channel, place, handle, state) VALUES (?,?,?,?,?,?,?,'','','{}',"
            "'waiting')", (number, tool, json.dumps(dict(request)), call_id, turn_id,
                           time.time(), expires_at))

    def placed(self, number: int, channel: str, place: str, handle: Mapping[str, Any]) -> None:
        """The channel that sent the question, and its own reference to it."""
        self._db.execute("UPDATE questions SET channel=?, place=?, handle=? WHERE number=?",
                         (channel, place, json.dumps(dict(handle)), number))

    def forget(self, number: int) -> None:
        """A question no channel could send: the model was told so at once."""
        self._db.execute("DELETE FROM questions WHERE number=? AND outcome_seq IS NULL",
                         (number,))

    def move(self, number: int, state: str, *, by: str | None = None,
             outcome: str | None = None, outside: bool = False,
             only_from: tuple[str, ...] = ()) -> bool:
        """Move a question to `state` (final ones get their seq); with
        `only_from`, only from one of those states. False when it did not move."""
        with self._transaction():
            row = self._db.execute("SELECT state FROM questions WHERE number=?",
                                   (number,)).fetchone()
            if row is None or (only_from and row[0] not in only_from):
                return False
            seq = None
            if state in FINAL:
                seq = (self._db.execute("SELECT max(outcome_seq) FROM questions")
                       .fetchone()[0] or 0) + 1
            self._db.execute(
                "UPDATE questions SET state=?, by=coalesce(?, by), outcome=coalesce(?, outcome),"
                " outside=?, outcome_seq=coalesce(?, outcome_seq), settled_at=? WHERE number=?",
                (state, by, outcome, int(outside), seq, time.time(), number))
            if seq is not None:
                self._forget_old(seq)
        return True

    def get(self, number: int) -> Question | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM questions WHERE number=?",
                               (number,)).fetchone()
        return _question(row) if row else None

    def unfinished(self) -> list[Question]:
        """Questions whose outcome is not final yet, oldest first."""
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM questions WHERE outcome_seq IS NULL "
                                "ORDER BY number").fetchall()
        return [_question(r) for r in rows]

    def outcomes_after(self, seq: int, limit: int = 100) -> list[Question]:
        """Final outcomes after `seq`, in order."""
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM questions WHERE outcome_seq > ? "
                                "ORDER BY outcome_seq LIMIT ?", (seq, limit)).fetchall()
        return [_question(r) for r in rows]

    # -- the sensor's place, when the sensory archive has none for it -------------------

    def reported(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key='reported'").fetchone()
        return int(row[0]) if row else 0

    def set_reported(self, seq: int) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES ('reported', ?)", (str(seq),))

    # -- inside ---------------------------------------------------------------------------

    def _forget_old(self, seq: int) -> None:
        self._db.execute("DELETE FROM questions WHERE outcome_seq IS NOT NULL AND "
                         "outcome_seq <= ?", (seq - KEPT,))

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")


_COLUMNS = ("number, tool, request, call_id, asked_at, expires_at, channel, place, handle, "
            "state, by, outcome, outside, outcome_seq")


def _question(row: tuple) -> Question:
    (number, tool, request, call_id, asked_at, expires_at, channel, place, handle, state, by,
     outcome, outside, seq) = row
    return Question(number, tool, json.loads(request), call_id, asked_at, expires_at, channel,
                    place, json.loads(handle), state, by, outcome, bool(outside), seq)
