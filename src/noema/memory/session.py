"""The session: the turns currently in the model's context (memory level 1).

The session is a list of turn IDs plus the current save point, kept in the
same SQLite database as the turns. Appending a turn and adding it to the
session is one transaction, so after a `kill -9` the session on disk is
exactly the one that was acknowledged.

A write refused because the disk is full raises `StorageFull`: the
transaction rolled back, so nothing is half-written, and the same call works
again once there is room (SQLite needs no reopening).
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from ..diskspace import free_bytes, full_message, is_disk_full
from .store import PREFIXED_COLUMNS, TurnStore, row_to_turn
from .turns import Flag, NewTurn, Turn

_AT_THE_END = (
    "INSERT INTO session_entries (pos, turn_id)"
    " VALUES ((SELECT COALESCE(MAX(pos), 0) + 1 FROM session_entries), ?)"
)


class StorageFull(OSError):
    """The disk holding the agent's data is full: the write was refused whole."""

    def __init__(self, folder: Path, free: int | None = None) -> None:
        free = free_bytes(folder) if free is None else free
        super().__init__(errno.ENOSPC, f"{full_message(folder, free)}; nothing was lost")
        self.folder = folder
        self.free = free

    def __str__(self) -> str:
        return self.strerror


@contextmanager
def _refused_when_full(folder: Path) -> Iterator[None]:
    """Turn SQLite's "database or disk is full" into `StorageFull` (other errors pass)."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if not disk_full(exc):
            raise
        raise StorageFull(folder) from exc


def disk_full(exc: BaseException | None) -> bool:
    """Whether a failure comes from a full disk (SQLite's or the system's)."""
    return isinstance(exc, StorageFull) or is_disk_full(exc)


class Session:
    """Ordered turns in context and the current save point (level 1)."""

    def __init__(self, store: TurnStore, turns: list[Turn], save_point_id: int | None) -> None:
        self.store = store
        self._turns = turns
        self.save_point_id = save_point_id

    @classmethod
    def load(cls, store: TurnStore) -> Session:
        """Restore the session persisted in the store."""
        rows = store.conn.execute(
            f"SELECT {PREFIXED_COLUMNS} FROM session_entries s JOIN turns t ON t.id = s.turn_id"
            " ORDER BY s.pos"
        ).fetchall()
        row = store.conn.execute(
            "SELECT value FROM session_state WHERE key = 'save_point'"
        ).fetchone()
        save_point = int(row[0]) if row and row[0] is not None else None
        return cls(store, [row_to_turn(r) for r in rows], save_point)

    # -- reading ----------------------------------------------------------

    @property
    def turns(self) -> Sequence[Turn]:
        return tuple(self._turns)

    def __len__(self) -> int:
        return len(self._turns)

    def ids(self) -> list[int]:
        return [t.id for t in self._turns]

    def tokens(self) -> int:
        """Estimated tokens of the session's turns (save point not included)."""
        return sum(t.tokens for t in self._turns)

    # -- changing ---------------------------------------------------------

    @property
    def folder(self) -> Path:
        """The folder holding the turn store (what a full disk is reported against)."""
        return self.store.path.parent

    def append(self, new: NewTurn) -> Turn:
        """Store a turn and put it at the end of the session, atomically."""
        with _refused_when_full(self.folder), self.store.transaction() as db:
            turn = self.store.append(new)
            db.execute(_AT_THE_END, (turn.id,))
        self._turns.append(turn)
        return turn

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Several changes as one: on failure the database rolls back and the
        in-memory session returns to what it was, so the two never disagree."""
        turns, save_point = list(self._turns), self.save_point_id
        try:
            with _refused_when_full(self.folder), self.store.transaction():
                yield
        except BaseException:
            self._turns, self.save_point_id = turns, save_point
            raise

    def append_all(self, news: Iterable[NewTurn]) -> list[Turn]:
        """Append several turns in one transaction (all or none)."""
        with self.transaction():
            return [self.append(new) for new in news]

    def stage(self, new: NewTurn) -> Turn:
        """Store a turn now (it is acknowledged) but keep it out of the context
        until `admit`: a message that arrives mid-cycle must not land between a
        tool call and its result. Staged turns survive a restart.

        Raises `StorageFull` (nothing stored) when the disk is full."""
        with _refused_when_full(self.folder), self.store.transaction() as db:
            turn = self.store.append(new)
            db.execute("INSERT INTO session_pending (turn_id) VALUES (?)", (turn.id,))
        return turn

    def staged(self) -> list[Turn]:
        """Turns stored but not yet admitted to the session, oldest first."""
        rows = self.store.conn.execute(
            f"SELECT {PREFIXED_COLUMNS} FROM session_pending p JOIN turns t ON t.id = p.turn_id"
            " ORDER BY t.id"
        ).fetchall()
        return [row_to_turn(r) for r in rows]

    def admit(self, turns: Sequence[Turn]) -> None:
        """Move staged turns to the end of the session, in one transaction."""
        if not turns:
            return
        with _refused_when_full(self.folder), self.store.transaction() as db:
            for turn in turns:
                db.execute("DELETE FROM session_pending WHERE turn_id = ?", (turn.id,))
                db.execute(_AT_THE_END, (turn.id,))
        self._turns.extend(turns)

    def remove(self, ids: Iterable[int], flag: Flag = Flag.NONE) -> None:
        """Take turns out of the session (they stay in the store), flagging them."""
        gone = set(ids)
        if not gone:
            return
        with _refused_when_full(self.folder), self.store.transaction() as db:
            db.executemany("DELETE FROM session_entries WHERE turn_id = ?", [(i,) for i in gone])
            if flag:
                self.store.add_flags(sorted(gone), flag)
        self._turns = [t for t in self._turns if t.id not in gone]

    def mark(self, ids: Iterable[int], flag: Flag) -> None:
        """Give turns in the session a status flag (for example, pruned)."""
        marked = set(ids)
        with _refused_when_full(self.folder):
            self.store.add_flags(sorted(marked), flag)
        self._turns = [_with_flags(t, flag) if t.id in marked else t for t in self._turns]

    def replace_with_save_point(self, ids: Iterable[int], save_point_id: int) -> None:
        """Swap a compacted block for the save point that narrates it."""
        gone = set(ids)
        with _refused_when_full(self.folder), self.store.transaction() as db:
            db.executemany("DELETE FROM session_entries WHERE turn_id = ?", [(i,) for i in gone])
            db.execute(
                "INSERT INTO session_state (key, value) VALUES ('save_point', ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(save_point_id),),
            )
            self.store.add_flags(sorted(gone), Flag.COMPACTED)
        self._turns = [t for t in self._turns if t.id not in gone]
        self.save_point_id = save_point_id


def _with_flags(turn: Turn, flag: Flag) -> Turn:
    return replace(turn, flags=turn.flags | flag)
