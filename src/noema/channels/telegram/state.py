"""The Telegram channel's own state file: where it stands in the update
stream, what it took and what it sent, so a restart or a `kill -9` loses no
message and takes or sends none twice.

Telegram forgets an update once a poll asks for a later offset, so an
update is written here, in the transaction that moves the offset past it,
before that next poll. Then:

- `pending`: the person's messages received and not yet given to the agent
  (they wait out the quiet window here, not in memory);
- `batches`: a journal of submissions. A burst is written as a batch (its
  text, and the newest turn the channel knew of) and removed from `pending`
  in one transaction, then submitted, then the batch gets its turn ID. A
  batch without one after a crash was either taken by the agent (a turn of
  this chat with this text, newer than the one recorded, exists) or not;
  `Desk.submitted` tells which, so it is neither lost nor taken twice;
- `outbox`: answers, keyed by the answer's turn ID, written before the first
  part is sent, each part marked once Telegram accepted it;
- `forwarded`: messages the person forwarded from someone else, moved here
  from `pending` when their burst is handed over and emitted as events; a
  row stays until a start finds the sensor's bookmark past it (the sensory
  archive commits the bookmark with the events before it), so one whose
  event was lost is emitted again, and none twice;
- `ignored`: messages from chats that are not the person's, counted.

SQLite in WAL mode, one connection, synchronous=FULL: a row committed here is
on disk.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...health import open_small_store
from .incoming import Incoming

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pending (
    update_id INTEGER PRIMARY KEY, chat_id INTEGER NOT NULL, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    id INTEGER PRIMARY KEY AUTOINCREMENT, chat_id INTEGER NOT NULL, text TEXT NOT NULL,
    after_turn INTEGER NOT NULL, turn_id INTEGER);
CREATE TABLE IF NOT EXISTS outbox (
    answer_id INTEGER PRIMARY KEY, chat_id INTEGER NOT NULL, parts TEXT NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS forwarded (
    update_id INTEGER PRIMARY KEY, chat_id INTEGER NOT NULL, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ignored (
    chat_id INTEGER PRIMARY KEY, count INTEGER NOT NULL, last_at REAL NOT NULL);
"""
_KEEP_BATCHES = 200  # settled batches kept (the newest turn ID lives among them)
_KEEP_SENT = 2000  # answers remembered as sent


@dataclass(frozen=True, slots=True)
class Batch:
    """A burst on its way to the agent."""

    id: int
    chat_id: int
    text: str
    after_turn: int  # the newest turn of this channel known when it was written


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """An answer being sent: its parts (MarkdownV2, plain) and how many went."""

    answer_id: int
    chat_id: int
    parts: tuple[tuple[str, str], ...]
    sent: int
    done: bool


class TelegramState:
    """The channel's state file (`telegram.db` in the agent's folder).
    Opening a damaged file raises `sqlite3.DatabaseError`."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self.fresh = str(path) == ":memory:" or not Path(path).exists()  # nothing to resume
        self._db = open_small_store(path, _SCHEMA)

    def close(self) -> None:
        self._db.close()

    # -- the update stream -----------------------------------------------------

    @property
    def offset(self) -> int:
        """The next update to ask Telegram for (0: whatever it holds)."""
        row = self._db.execute("SELECT value FROM meta WHERE key='offset'").fetchone()
        return int(row[0]) if row else 0

    def take(self, last_update: int, messages: Iterable[Incoming],
             strangers: Iterable[int]) -> None:
        """Record a poll's updates in one transaction: the person's messages to
        be submitted, the strangers counted, the offset past `last_update`."""
        now = time.time()
        with self._transaction():
            self._db.executemany(
                "INSERT OR IGNORE INTO pending VALUES (?, ?, ?)",
                [(m.update_id, m.chat_id, json.dumps(m.to_json())) for m in messages])
            for chat in strangers:
                self._db.execute(
                    "INSERT INTO ignored VALUES (?, 1, ?) ON CONFLICT(chat_id) DO UPDATE SET "
                    "count = count + 1, last_at = excluded.last_at", (chat, now))
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('offset', ?)",
                             (str(max(self.offset, last_update + 1)),))

    def pending(self) -> dict[int, list[Incoming]]:
        """Messages received and not yet submitted, by chat, oldest first."""
        found: dict[int, list[Incoming]] = {}
        for chat, raw in self._db.execute(
                "SELECT chat_id, message FROM pending ORDER BY update_id"):
            found.setdefault(chat, []).append(Incoming.from_json(json.loads(raw)))
        return found

    # -- submissions -----------------------------------------------------------

    def open_batch(self, chat_id: int, text: str,
                   update_ids: Iterable[int] | None = None) -> Batch:
        """Move a chat's pending messages (those of `update_ids`; all by default)
        into a batch about to be submitted."""
        with self._transaction():
            after = self.last_turn()
            cursor = self._db.execute(
                "INSERT INTO batches (chat_id, text, after_turn) VALUES (?, ?, ?)",
                (chat_id, text, after))
            if update_ids is None:
                self._db.execute("DELETE FROM pending WHERE chat_id = ?", (chat_id,))
            else:
                self._db.executemany("DELETE FROM pending WHERE update_id = ?",
                                     [(u,) for u in update_ids])
        return Batch(int(cursor.lastrowid or 0), chat_id, text, after)

    def settle(self, batch: Batch, turn_id: int) -> None:
        """The agent took `batch` as turn `turn_id`."""
        with self._transaction():
            self._db.execute("UPDATE batches SET turn_id = ? WHERE id = ?", (turn_id, batch.id))
            self._db.execute(
                "DELETE FROM batches WHERE turn_id IS NOT NULL AND id NOT IN "
                "(SELECT id FROM batches ORDER BY id DESC LIMIT ?)", (_KEEP_BATCHES,))

    def unsettled(self) -> list[Batch]:
        """Batches a crash left between their writing and their turn ID."""
        return [Batch(*row) for row in self._db.execute(
            "SELECT id, chat_id, text, after_turn FROM batches WHERE turn_id IS NULL "
            "ORDER BY id")]

    def last_turn(self) -> int:
        row = self._db.execute("SELECT max(turn_id) FROM batches").fetchone()
        return int(row[0] or 0)

    # -- answers ---------------------------------------------------------------

    @property
    def horizon(self) -> int:
        """Answers older than this turn ID are not this file's to send (0: none)."""
        row = self._db.execute("SELECT value FROM meta WHERE key='horizon'").fetchone()
        return int(row[0]) if row else 0

    def set_horizon(self, turn_id: int) -> None:
        """A new file over an old conversation: what was answered before it is
        not known, and must not all be sent again."""
        with self._transaction():
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('horizon', ?)", (str(turn_id),))

    def outbox(self, answer_id: int) -> OutboxEntry | None:
        row = self._db.execute(
            "SELECT answer_id, chat_id, parts, sent, done FROM outbox WHERE answer_id = ?",
            (answer_id,)).fetchone()
        if row is None:
            return None
        parts = tuple((m, p) for m, p in json.loads(row[2]))
        return OutboxEntry(row[0], row[1], parts, row[3], bool(row[4]))

    def queue_answer(self, answer_id: int, chat_id: int,
                     parts: Iterable[tuple[str, str]]) -> OutboxEntry:
        """Write an answer before its first part is sent (kept if already there)."""
        with self._transaction():
            self._db.execute("INSERT OR IGNORE INTO outbox (answer_id, chat_id, parts) "
                             "VALUES (?, ?, ?)", (answer_id, chat_id, json.dumps(list(parts))))
        entry = self.outbox(answer_id)
        assert entry is not None
        return entry

    def part_sent(self, answer_id: int, sent: int, done: bool) -> None:
        with self._transaction():
            self._db.execute("UPDATE outbox SET sent = ?, done = ? WHERE answer_id = ?",
                             (sent, int(done), answer_id))
            if done:
                self._db.execute(
                    "DELETE FROM outbox WHERE done = 1 AND answer_id NOT IN "
                    "(SELECT answer_id FROM outbox ORDER BY answer_id DESC LIMIT ?)",
                    (_KEEP_SENT,))

    # -- forwarded messages ------------------------------------------------------

    def forward_out(self, messages: Iterable[Incoming]) -> None:
        """Move forwarded messages from `pending` to `forwarded`, about to be emitted."""
        rows = [(m.update_id, m.chat_id, json.dumps(m.to_json())) for m in messages]
        with self._transaction():
            self._db.executemany("INSERT OR IGNORE INTO forwarded VALUES (?, ?, ?)", rows)
            self._db.executemany("DELETE FROM pending WHERE update_id = ?",
                                 [(r[0],) for r in rows])

    def forwarded(self, after: int) -> list[Incoming]:
        """Forwarded messages past `after` (the update ID whose event is known
        committed), oldest first; those up to it are forgotten."""
        with self._transaction():
            self._db.execute("DELETE FROM forwarded WHERE update_id <= ?", (after,))
        return [Incoming.from_json(json.loads(raw)) for (raw,) in self._db.execute(
            "SELECT message FROM forwarded WHERE update_id > ? ORDER BY update_id", (after,))]

    # -- a bookmark, for when the sensory archive keeps none --------------------

    def load_mark(self, name: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?",
                               (f"mark:{name}",)).fetchone()
        return json.loads(row[0]) if row else None

    def save_mark(self, name: str, state: Mapping[str, Any]) -> None:
        with self._transaction():
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                             (f"mark:{name}", json.dumps(dict(state))))

    # -- strangers ---------------------------------------------------------------

    def ignored(self) -> dict[int, int]:
        """Messages ignored, by the chat they came from."""
        return dict(self._db.execute("SELECT chat_id, count FROM ignored ORDER BY chat_id"))

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, *rest: object) -> None:
        self._db.execute("COMMIT" if kind is None else "ROLLBACK")
