"""The mail channel's own record, one SQLite file in the agent's folder.

- `taken`: each of the person's mails handed to the agent, written as
  *pending* before `Desk.submit` and *taken* (with the turn's ID) after, so
  a crash in between is settled against the stored turns, never guessed;
  it also remembers what a reply needs (Message-ID, References, subject).
- `outbox`: each answer going back by mail, written (the whole message)
  before it is sent and marked after, so a restart sends what is owed and
  never composes it twice.
- `known`: the addresses the person wrote with (learnt from the person's
  authenticated mails): sending elsewhere asks first (the exfiltration
  guard). An approval is for one mail and is not kept here.
- `received`: the Message-IDs of the person's mail (mail that passed the
  checks of `authresults.py`), per address, and where each was received,
  the newest `MESSAGES_KEPT`: the person's mail whose Message-ID came from
  the same address at another place is a replay. Nobody else's mail is
  recorded, so a stranger who sends the person's Message-ID first cannot
  make the person's own mail look like a copy.
- `messages`: the Message-IDs the agent sent (and where from), the newest
  `MESSAGES_KEPT`: a mail from the agent's own address is its own copy only
  if the agent sent that Message-ID.
- `places`: where the sensor stands when the sensory archive keeps no
  bookmark for it (the senses off), and the last unread count reported.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...health import open_small_store

MESSAGES_KEPT = 50_000  # Message-IDs remembered for replays: years of an ordinary inbox
_PRUNE_EVERY = 500  # insertions between trims of the record

SCHEMA = """
CREATE TABLE IF NOT EXISTS taken (
    folder      TEXT NOT NULL,
    uidvalidity INTEGER NOT NULL,
    uid         INTEGER NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'taken')),
    turn_id     INTEGER,
    header      TEXT NOT NULL,
    sender      TEXT NOT NULL,
    subject     TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    refs        TEXT NOT NULL,
    at          REAL NOT NULL,
    PRIMARY KEY (folder, uidvalidity, uid)
);
CREATE INDEX IF NOT EXISTS taken_turn ON taken (turn_id);
CREATE TABLE IF NOT EXISTS outbox (
    answer_id   INTEGER PRIMARY KEY,
    question_id INTEGER NOT NULL,
    recipients  TEXT NOT NULL,
    message     BLOB NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('owed', 'sent')),
    at          REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS known (
    address TEXT PRIMARY KEY,
    how     TEXT NOT NULL,
    at      REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    message_id  TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('received', 'sent')),
    place       TEXT NOT NULL,
    at          REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS received (
    identity    TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    place       TEXT NOT NULL,
    at          REAL NOT NULL,
    PRIMARY KEY (identity, message_id)
);
CREATE TABLE IF NOT EXISTS places (
    name  TEXT PRIMARY KEY,
    state TEXT NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class Taken:
    """One of the person's mails as the channel recorded it."""

    folder: str
    uidvalidity: int
    uid: int
    state: str  # pending, taken
    turn_id: int | None
    header: str  # the first line of the turn's text
    sender: str
    subject: str
    message_id: str
    references: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Owed:
    """An answer in the outbox."""

    answer_id: int
    question_id: int
    recipients: tuple[str, ...]
    message: bytes
    sent: bool


class MailState:
    """The channel's SQLite file (WAL, every change committed at once).
    Opening a damaged file raises `sqlite3.DatabaseError`."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self._conn = open_small_store(path, SCHEMA)  # a taken mail survives power loss
        self._lock = threading.Lock()
        self._since_prune = 0
        try:
            # Older versions kept an address for ever once one mail there was approved;
            # a yes is for one mail now, so those grants are taken back.
            self._conn.execute("DELETE FROM known WHERE how = 'approved'")
            # The person's own addresses are read from the configuration each time, so an
            # address taken out of allow_from is not still known from an older start.
            self._conn.execute("DELETE FROM known WHERE how = 'allow_from'")
            # Older versions recorded every received Message-ID, a stranger's too, so a
            # stranger could claim the person's first: those records are dropped, and the
            # person's mails that became turns are recorded again, by their address.
            if self._conn.execute("SELECT 1 FROM messages WHERE kind = 'received' "
                                  "LIMIT 1").fetchone():
                self._conn.executescript(
                    "BEGIN IMMEDIATE; INSERT OR IGNORE INTO received SELECT sender, message_id, "
                    "folder || '/' || uidvalidity || '/' || uid, at FROM taken "
                    "WHERE message_id <> '' AND sender <> ''; "
                    "DELETE FROM messages WHERE kind = 'received'; COMMIT;")
        except BaseException:
            self._conn.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _do(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, tuple(args)).fetchall()

    # -- the person's mails ------------------------------------------------------

    def begin(self, folder: str, uidvalidity: int, uid: int, *, header: str, sender: str,
              subject: str, message_id: str, references: tuple[str, ...]) -> None:
        """Record a mail about to be handed to the agent (pending)."""
        self._do("INSERT OR IGNORE INTO taken VALUES (?, ?, ?, 'pending', NULL, ?, ?, ?, ?, ?, ?)",
                 (folder, uidvalidity, uid, header, sender, subject, message_id,
                  json.dumps(references), time.time()))

    def finish(self, folder: str, uidvalidity: int, uid: int, turn_id: int) -> None:
        """The mail is the stored turn `turn_id`."""
        self._do("UPDATE taken SET state = 'taken', turn_id = ? "
                 "WHERE folder = ? AND uidvalidity = ? AND uid = ?",
                 (turn_id, folder, uidvalidity, uid))

    def taken(self, folder: str, uidvalidity: int, uid: int) -> Taken | None:
        rows = self._do("SELECT * FROM taken WHERE folder = ? AND uidvalidity = ? AND uid = ?",
                        (folder, uidvalidity, uid))
        return _taken(rows[0]) if rows else None

    def by_turn(self, turn_id: int) -> Taken | None:
        """The mail that became turn `turn_id`, if this channel took it."""
        rows = self._do("SELECT * FROM taken WHERE turn_id = ? AND state = 'taken'", (turn_id,))
        return _taken(rows[0]) if rows else None

    def pending(self) -> list[Taken]:
        return [_taken(r) for r in self._do("SELECT * FROM taken WHERE state = 'pending'")]

    # -- the outbox --------------------------------------------------------------

    def owe(self, answer_id: int, question_id: int, recipients: tuple[str, ...],
            message: bytes) -> Owed:
        """Keep an answer's message before it is sent; the one kept wins."""
        self._do("INSERT OR IGNORE INTO outbox VALUES (?, ?, ?, ?, 'owed', ?)",
                 (answer_id, question_id, json.dumps(recipients), message, time.time()))
        found = self.owed(answer_id)
        assert found is not None
        return found

    def owed(self, answer_id: int) -> Owed | None:
        rows = self._do("SELECT * FROM outbox WHERE answer_id = ?", (answer_id,))
        return _owed(rows[0]) if rows else None

    def unsent(self) -> list[Owed]:
        return [_owed(r) for r in
                self._do("SELECT * FROM outbox WHERE state = 'owed' ORDER BY answer_id")]

    def mark_sent(self, answer_id: int) -> None:
        self._do("UPDATE outbox SET state = 'sent' WHERE answer_id = ?", (answer_id,))

    # -- addresses the person wrote with -------------------------------------------

    def know(self, addresses: Iterable[str], how: str) -> None:
        now = time.time()
        with self._lock:
            self._conn.executemany("INSERT OR IGNORE INTO known VALUES (?, ?, ?)",
                                   [(a.lower(), how, now) for a in addresses if a])

    def known(self, address: str) -> bool:
        return bool(self._do("SELECT 1 FROM known WHERE address = ?", (address.lower(),)))

    # -- Message-IDs ----------------------------------------------------------------

    def sent_from(self, message_id: str) -> str | None:
        """Where the agent sent `message_id` from ("outbox", "approval"…), or None
        when the agent never sent it."""
        rows = self._do("SELECT place FROM messages WHERE message_id = ? AND kind = 'sent'",
                        (message_id,))
        return rows[0][0] if rows else None

    def record_sent(self, message_id: str, place: str) -> None:
        """Remember a Message-ID the agent sends from `place`; the first record stays."""
        if not message_id:
            return
        self._do("INSERT OR IGNORE INTO messages VALUES (?, 'sent', ?, ?)",
                 (message_id, place, time.time()))
        self._pruned()

    def received_at(self, identity: str, message_id: str) -> str | None:
        """Where the person's mail from `identity` with `message_id` was first
        received, or None."""
        rows = self._do("SELECT place FROM received WHERE identity = ? AND message_id = ?",
                        (identity.lower(), message_id))
        return rows[0][0] if rows else None

    def record_received(self, identity: str, message_id: str, place: str) -> None:
        """Remember the person's mail (one that passed the checks) from `identity`,
        received at `place`; the first record stays. Nobody else's is recorded."""
        if not message_id or not identity:
            return
        self._do("INSERT OR IGNORE INTO received VALUES (?, ?, ?, ?)",
                 (identity.lower(), message_id, place, time.time()))
        self._pruned()

    def _pruned(self) -> None:
        self._since_prune += 1
        if self._since_prune >= _PRUNE_EVERY:
            self._since_prune = 0
            for name in ("messages", "received"):
                self._do(f"DELETE FROM {name} WHERE rowid IN (SELECT rowid FROM {name} "
                         "ORDER BY at DESC LIMIT -1 OFFSET ?)", (MESSAGES_KEPT,))

    def count(self, name: str) -> int:
        """A counter kept in `places` (e.g. forged mails from the agent's address)."""
        return int((self.load_place(f"count:{name}") or {}).get("n", 0))

    def bump(self, name: str) -> int:
        n = self.count(name) + 1
        self.save_place(f"count:{name}", {"n": n})
        return n

    # -- places --------------------------------------------------------------------

    def load_place(self, name: str) -> dict[str, Any] | None:
        rows = self._do("SELECT state FROM places WHERE name = ?", (name,))
        return json.loads(rows[0][0]) if rows else None

    def save_place(self, name: str, state: Mapping[str, Any]) -> None:
        self._do("INSERT INTO places VALUES (?, ?) ON CONFLICT(name) "
                 "DO UPDATE SET state = excluded.state", (name, json.dumps(dict(state))))


class StateBookmark:
    """A sensor's place kept in the channel's own file: for when the archive
    keeps none. Saved at once, so a mail whose event was not yet committed
    when the process died is not announced again (at most once)."""

    def __init__(self, state: MailState, name: str) -> None:
        self._state = state
        self._name = name

    def load(self) -> Mapping[str, Any] | None:
        return self._state.load_place(self._name)

    def save(self, state: Mapping[str, Any]) -> None:
        self._state.save_place(self._name, state)


def _taken(row: tuple) -> Taken:
    folder, validity, uid, state, turn_id, header, sender, subject, message_id, refs, _ = row
    return Taken(folder, validity, uid, state, turn_id, header, sender, subject, message_id,
                 tuple(json.loads(refs)))


def _owed(row: tuple) -> Owed:
    answer_id, question_id, recipients, message, state, _ = row
    return Owed(answer_id, question_id, tuple(json.loads(recipients)), bytes(message),
                state == "sent")
