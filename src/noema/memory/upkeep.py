"""Upkeep of the turn store's full-text index and WAL, in a background thread.

Left to themselves, FTS5 merges index segments and SQLite checkpoints the
WAL inside the commit of whichever append crosses a threshold, and that
append takes tens to hundreds of milliseconds. With upkeep running, the
store's appends do neither (see `configure`):

- FTS5's automatic merging is off; what remains inside appends is its
  crisis merge, the merge an append must do when one level of the index
  holds CRISIS_MERGE segments. Its size sets the tail of a burst: with a
  threshold c, one append in c merges c one-turn segments, one in c² merges
  c segments of c turns, and so on. When c² exceeds a hundred, only the
  small first-level merges are frequent enough to reach the 99th
  percentile, and a smaller c makes each of them cheaper; a larger c (we
  had 64) makes every such merge dearer and leaves more segments, which
  every commit pays for (FTS5 rewrites its list of segments on each) and
  every search walks. At a million turns, 3,000 store appends back to back
  cost p99 0.85 ms of CPU with 16 against 1.75 ms with 64 and 1.3 ms with
  4 (through the session, `bench/append_at_scale.py`: 2.0 ms against 2.3);
- the WAL is never checkpointed by an append; this thread checkpoints it
  (PASSIVE, which never blocks a writer) every CHECKPOINT_EVERY_S while
  turns keep arriving, and again once they stop.

The thread merges the index while the conversation is quiet, a bounded
step at a time; a write that arrives meanwhile interrupts the merge (it
rolls back whole) and goes first.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

CRISIS_MERGE = 16  # segments on one level before an append must merge them (see above)
CHECKPOINT_EVERY_S = 1.0  # how stale the WAL may grow during a burst of writes


def configure(conn: sqlite3.Connection) -> None:
    """Take merging and checkpointing off the append path of this connection.

    The FTS5 settings are stored in the index and hold for every connection
    from now on; without upkeep, the crisis merge still bounds the segments.
    The checkpoint setting is this connection's only.
    """
    conn.execute("INSERT INTO turns_fts(turns_fts, rank) VALUES('automerge', 0)")
    conn.execute("INSERT INTO turns_fts(turns_fts, rank) VALUES('crisismerge', ?)", (CRISIS_MERGE,))
    conn.execute("PRAGMA wal_autocheckpoint=0")


class IndexUpkeep(threading.Thread):
    """Merges index segments and checkpoints the WAL when writes are quiet."""

    def __init__(
        self, path: Path, last_write: Callable[[], float], quiet_s: float, merge_pages: int
    ) -> None:
        super().__init__(name="turn-store-upkeep", daemon=True)
        self.path = path
        self.last_write = last_write
        self.quiet_s = quiet_s
        self.merge_pages = merge_pages
        self._halt = threading.Event()
        self.dirty = threading.Event()  # set by every commit; upkeep sleeps until then
        self._db: sqlite3.Connection | None = None
        self._merging = False
        self._checkpointed = time.monotonic()

    def give_way(self) -> None:
        """Abort a merge in progress (it rolls back whole) so a write need not wait."""
        if self._merging and self._db is not None:
            self._db.interrupt()

    def stop(self) -> None:
        self._halt.set()
        self.dirty.set()
        self.join(timeout=5)

    def run(self) -> None:
        try:
            db = self._db = sqlite3.connect(str(self.path), isolation_level=None, timeout=30)
        except sqlite3.Error:
            return
        try:
            while not self._halt.is_set():
                self.dirty.wait()
                self.dirty.clear()
                while not self._halt.is_set():
                    calm = time.monotonic() - self.last_write()
                    if calm >= self.quiet_s:
                        break
                    if time.monotonic() - self._checkpointed >= CHECKPOINT_EVERY_S:
                        self._checkpoint(db)  # a long burst: keep the WAL short meanwhile
                    self._halt.wait(min(self.quiet_s - calm, CHECKPOINT_EVERY_S))
                if not self._halt.is_set():
                    self._step(db)
        except sqlite3.Error:
            log.exception("turn store upkeep stopped")
        finally:
            db.close()

    def _step(self, db: sqlite3.Connection) -> None:
        # One bounded merge at a time, so an append that arrives meanwhile
        # waits for a few milliseconds at most; FTS5 made no change when the
        # total changes grew by less than two.
        while not self._halt.is_set() and time.monotonic() - self.last_write() >= self.quiet_s:
            before = db.total_changes
            self._merging = True
            try:
                db.execute("INSERT INTO turns_fts(turns_fts, rank) VALUES('merge', ?)",
                           (self.merge_pages,))
            except sqlite3.OperationalError:  # interrupted by a write: it comes first
                break
            finally:
                self._merging = False
            if db.total_changes - before < 2:
                self._checkpoint(db)
                return
        self.dirty.set()  # interrupted by a write: finish after the next quiet moment

    def _checkpoint(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        self._checkpointed = time.monotonic()
