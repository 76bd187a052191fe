"""Upkeep of the sensory archive's full-text index and WAL, in a background thread.

The archive's group commits are the ingest path: every event waits for one.
Left to themselves, FTS5 merges index segments and SQLite checkpoints the
WAL inside whichever commit crosses a threshold, and that commit then takes
many times longer than its neighbours. While upkeep runs, commits do
neither. This is the turn store's approach (`memory.upkeep`), with merge
steps added during a stream that never pauses:

- FTS5's automatic merging is off, and its crisis merge (the merge a commit
  must do when one level of the index holds too many segments) waits for
  CRISIS_MERGE segments, so commits only ever force merges of small ones;
- the connection that commits never checkpoints the WAL; this thread does
  (PASSIVE, which never blocks a writer) every CHECKPOINT_EVERY_S while
  events keep arriving, and again once they stop;
- merging happens once commits have been quiet for `quiet_s`, a bounded
  step at a time, and also one step every MERGE_EVERY_S during a stream
  that never pauses (a log flood can last hours), so that crisis merges of
  large segments do not pile up for one unlucky commit. A commit that
  arrives during a merge step interrupts it (it rolls back whole) and goes
  first.

The settings live in the index itself: an archive opened without upkeep
(a short command, a test in memory) sets FTS5's defaults back, so that its
commits keep the index merged as they always did.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

CRISIS_MERGE = 64  # segments on one level before a commit must merge them
CHECKPOINT_EVERY_S = 1.0  # how stale the WAL may grow while events keep arriving
MERGE_EVERY_S = 1.0  # one merge step this often while events never pause
MERGE_PAGES = 64  # the work of one merge step, in index pages written
QUIET_S = 0.2  # how long commits must pause before merging runs on

# FTS5's own defaults, for an archive written without upkeep.
_AUTOMERGE_DEFAULT = 4
_CRISIS_MERGE_DEFAULT = 16
_AUTOCHECKPOINT_DEFAULT = 1000


def merge_in_commits(db: sqlite3.Connection, yes: bool) -> None:
    """Inside the caller's transaction: whether commits merge the index (FTS5's
    defaults) or leave it to upkeep. Stored in the index, for every connection."""
    automerge, crisis = (_AUTOMERGE_DEFAULT, _CRISIS_MERGE_DEFAULT) if yes else (0, CRISIS_MERGE)
    db.execute("INSERT INTO events_fts(events_fts, rank) VALUES('automerge', ?)", (automerge,))
    db.execute("INSERT INTO events_fts(events_fts, rank) VALUES('crisismerge', ?)", (crisis,))


def checkpoint_in_commits(db: sqlite3.Connection, yes: bool) -> None:
    """Whether this connection's commits checkpoint the WAL (SQLite's default)."""
    db.execute(f"PRAGMA wal_autocheckpoint={_AUTOCHECKPOINT_DEFAULT if yes else 0}")


class ArchiveUpkeep(threading.Thread):
    """Merges the index and checkpoints the WAL off the commit path.

    `last_write` tells when the archive last committed; the archive calls
    `wrote` after each commit and `give_way` before each. `settled` is set
    whenever the index is fully merged and the WAL checkpointed, and cleared
    by the next commit: tests and benchmarks wait on it.
    """

    def __init__(self, path: Path, last_write: Callable[[], float], *,
                 quiet_s: float = QUIET_S, merge_pages: int = MERGE_PAGES) -> None:
        super().__init__(name="archive-upkeep", daemon=True)
        self.path = path
        self.last_write = last_write
        self.quiet_s = quiet_s
        self.merge_pages = merge_pages
        self.settled = threading.Event()
        self._dirty = threading.Event()  # set by every commit; upkeep sleeps until then
        self._halt = threading.Event()
        self._db: sqlite3.Connection | None = None
        self._merging = False
        self._checkpointed = self._merged = time.monotonic()

    def wrote(self) -> None:
        """A commit happened: there is work once it is quiet."""
        self.settled.clear()
        self._dirty.set()

    def give_way(self) -> None:
        """Abort a merge step in progress (it rolls back whole) so a commit need not wait."""
        if self._merging and self._db is not None:
            self._db.interrupt()

    def stop(self) -> None:
        """Stop after the step in progress (interrupted if it is a merge)."""
        self._halt.set()
        self._dirty.set()
        self.give_way()
        self.join(timeout=5)

    def run(self) -> None:
        try:
            db = self._db = sqlite3.connect(str(self.path), isolation_level=None, timeout=30)
        except sqlite3.Error:
            log.exception("archive upkeep could not open %s", self.path)
            return
        try:
            while not self._halt.is_set():
                self._dirty.wait()
                self._dirty.clear()
                self._through_the_stream(db)
                if not self._halt.is_set():
                    self._merge_while_quiet(db)
        except sqlite3.Error:
            log.exception("archive upkeep stopped")
        finally:
            db.close()

    def _through_the_stream(self, db: sqlite3.Connection) -> None:
        """Until commits pause for `quiet_s`: a checkpoint and a merge step now and then."""
        while not self._halt.is_set():
            calm = time.monotonic() - self.last_write()
            if calm >= self.quiet_s:
                return
            now = time.monotonic()
            if now - self._checkpointed >= CHECKPOINT_EVERY_S:
                self._checkpoint(db)
            if now - self._merged >= MERGE_EVERY_S:
                self._merged = now
                self._merge_step(db)
            self._halt.wait(min(self.quiet_s - calm, CHECKPOINT_EVERY_S, MERGE_EVERY_S))

    def _merge_while_quiet(self, db: sqlite3.Connection) -> None:
        while not self._halt.is_set() and time.monotonic() - self.last_write() >= self.quiet_s:
            worked = self._merge_step(db)
            if worked is None:
                break  # a commit came: finish after the next quiet moment
            if not worked:
                self._checkpoint(db)
                if time.monotonic() - self.last_write() >= self.quiet_s:
                    self.settled.set()
                return
        self._dirty.set()

    def _merge_step(self, db: sqlite3.Connection) -> bool | None:
        """One bounded merge: whether it merged anything (None: a commit interrupted it).
        FTS5 made no change when the total changes grew by less than two."""
        before = db.total_changes
        self._merging = True
        try:
            db.execute("INSERT INTO events_fts(events_fts, rank) VALUES('merge', ?)",
                       (self.merge_pages,))
        except sqlite3.OperationalError:  # interrupted by a commit, or it held the lock
            return None
        finally:
            self._merging = False
        return db.total_changes - before >= 2

    def _checkpoint(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        self._checkpointed = time.monotonic()
