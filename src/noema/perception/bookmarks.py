"""Where each sensor stands in its source, kept in the sensory archive.

A sensor that can read its source again (a log file) keeps its place with a
bookmark instead of trusting `emit`. A bookmark is committed in the same
transaction as the events read before it (the archive's group commit), so
after a kill the sensor reads again exactly the lines whose events were
lost. Sensors that cannot read again (a folder watch, a webhook) lose at
most the archive's commit window.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS bookmarks (
    source   TEXT PRIMARY KEY,
    state    TEXT NOT NULL
);
"""


class Bookmarks:
    """Every source's place: staged here, written by the archive's group commit."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._staged: dict[str, dict[str, Any]] = {}

    def bookmark(self, source: str) -> ArchiveBookmark:
        """The bookmark of one source."""
        return ArchiveBookmark(self, source)

    def load(self, source: str) -> dict[str, Any] | None:
        """The last place saved for `source` (staged or committed), or None."""
        staged = self._staged.get(source)
        if staged is not None:
            return dict(staged)
        row = self._conn.execute(
            "SELECT state FROM bookmarks WHERE source = ?", (source,)).fetchone()
        return json.loads(row[0]) if row else None

    def save(self, source: str, state: Mapping[str, Any]) -> None:
        """Stage the current place of `source` (JSON data)."""
        self._staged[source] = dict(state)

    # -- the archive's group commit ------------------------------------------

    @property
    def staged(self) -> bool:
        return bool(self._staged)

    def write(self, db: sqlite3.Connection) -> None:
        """Write what is staged, inside the archive's transaction."""
        db.executemany(
            "INSERT INTO bookmarks (source, state) VALUES (?, ?)"
            " ON CONFLICT(source) DO UPDATE SET state = excluded.state",
            [(s, json.dumps(m, separators=(",", ":"))) for s, m in self._staged.items()],
        )

    def clear_staged(self) -> None:
        """Forget what the archive's transaction has just committed."""
        self._staged = {}


class ArchiveBookmark:
    """A sensor's place in its source, durable with the events read before it.

    `save` only stages the place: it is committed in the archive's next
    transaction, together with every event appended before it. A sensor that
    saves the place after a line *before* emitting that line can never have
    a committed place ahead of its committed events.
    """

    __slots__ = ("_bookmarks", "source")

    def __init__(self, bookmarks: Bookmarks, source: str) -> None:
        if not source:
            raise ValueError("a bookmark needs the name of its source")
        self._bookmarks = bookmarks
        self.source = source

    def load(self) -> dict[str, Any] | None:
        """The last place saved (staged or committed), or None."""
        return self._bookmarks.load(self.source)

    def save(self, state: Mapping[str, Any]) -> None:
        """Stage the current place (JSON data)."""
        self._bookmarks.save(self.source, state)
