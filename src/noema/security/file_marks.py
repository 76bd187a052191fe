"""Which files hold outside words, kept by the agent where no command reaches.

A file the agent wrote while a stranger's words led (with the person's yes,
since such a write asks), an attachment saved from a stranger's mail, a
copy a command made of such a file: reading any of them later is reading
the stranger's words again. The mark is kept in the agent's own folder
(`file_marks.db`, private to the person), never on the file, so a command
can neither remove it nor set it on the person's files.

Marks follow **content**: each is kept under the id git gives the bytes (a
blob id), so a version of the history, a restore of that version and any
copy of the same bytes are marked alike, whatever their name, and a reader
that hashes what it read gets content and mark from one read (no window
between the two for a rename to slip through). Each mark also remembers the
path it was written to, so a listing of names (which a stranger may have
chosen) is marked too. An edit the agent makes of marked content (a
replacement, a patch) derives from it and keeps its sources; the person's
own edits are the person's.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..health import check_file, opening, private_file
from ..memory.turns import Source, SourceKind, sources_from_text, sources_to_text, sources_union

_SCHEMA = """
CREATE TABLE IF NOT EXISTS contents (
    blob    TEXT PRIMARY KEY,   -- git's id of the bytes
    sources TEXT NOT NULL,      -- whose outside words: JSON [[kind, who], ...]
    path    TEXT NOT NULL,      -- where it was first written, as the person reads it
    marked  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS paths (
    path    TEXT PRIMARY KEY,
    sources TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS versions (
    id      TEXT PRIMARY KEY,   -- a version of a workspace's history
    sources TEXT NOT NULL       -- whose outside words led to it (its note repeats them)
);
"""


# Before `file_marks.db`, a mark was this extended attribute on the file
# itself (value b"1"), with no record of whose words it held.
LEGACY_XATTR = "user.noema.outside"

# How much a command's reads are judged by content before all marks are assumed.
READ_FILES = 2_000
READ_BYTES = 64 * 1024 * 1024


def content_id(data: bytes) -> str:
    """The id git gives these bytes as a blob (the history's own id for them)."""
    digest = hashlib.sha1(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


class FileMarks:
    """The marks of one agent's files; `None` as the path keeps them in memory.

    The file is made at the first mark: an agent that never met outside words
    holds none (and a check of one that exists finds damage at start)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if path is None or path.exists() or path.with_name(path.name + "-wal").exists():
            self._open()

    def _open(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        path = self.path
        if path is not None:
            with opening(path):
                path.parent.mkdir(parents=True, exist_ok=True)
            check_file(path)
            private_file(path)
        db = sqlite3.connect(str(path) if path else ":memory:", isolation_level=None,
                             check_same_thread=False, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} COMMIT;")
        self._db = db
        return db

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        """A query's rows; none while no mark was ever made."""
        with self._lock:
            if self._db is None:
                return []
            return self._db.execute(sql, params).fetchall()

    def mark(self, data: bytes | str, sources: Iterable[Source], path: str) -> None:
        """Mark content (bytes, or their blob id) written to `path` as holding
        outside words; marks only grow (new sources join the old)."""
        sources = tuple(sources)
        if not sources:
            return
        blob = data if isinstance(data, str) else content_id(data)
        with self._lock:
            db = self._open()
            db.execute("BEGIN IMMEDIATE")
            try:
                before = db.execute("SELECT sources FROM contents WHERE blob = ?",
                                    (blob,)).fetchone()
                joined = sources_union(sources, sources_from_text(before[0]) if before else ())
                db.execute(
                    "INSERT INTO contents (blob, sources, path, marked) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT(blob) DO UPDATE SET sources = excluded.sources",
                    (blob, sources_to_text(joined), path, time.time()))
                row = db.execute("SELECT sources FROM paths WHERE path = ?", (path,)).fetchone()
                at_path = sources_union(sources, sources_from_text(row[0]) if row else ())
                db.execute(
                    "INSERT INTO paths (path, sources) VALUES (?, ?) ON CONFLICT(path)"
                    " DO UPDATE SET sources = excluded.sources", (path, sources_to_text(at_path)))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def mark_version(self, version: str, sources: Iterable[Source]) -> None:
        """A version made while outside words led: its note (a command line, a
        summary) may repeat them when the history is listed."""
        sources = tuple(sources)
        if not sources:
            return
        with self._lock:
            self._open().execute("INSERT OR REPLACE INTO versions (id, sources) VALUES (?, ?)",
                                 (version, sources_to_text(sources)))

    def of_versions(self, versions: Iterable[str]) -> tuple[Source, ...]:
        """Whose outside words led to any of these versions."""
        return sources_union(*(sources_from_text(text) for (text,) in
                               self._among("SELECT sources FROM versions WHERE id IN", versions)))

    def of_content(self, data: bytes | str, shown: str = "") -> tuple[Source, ...]:
        """Whose outside words these bytes (or this blob id) hold; with
        `shown`, the file they were read from is named among the sources."""
        blob = data if isinstance(data, str) else content_id(data)
        rows = self._rows("SELECT sources, path FROM contents WHERE blob = ?", (blob,))
        if not rows:
            return ()
        sources, path = rows[0]
        return sources_union(sources_from_text(sources),
                             (Source(SourceKind.FILE, shown or path),))

    def of_paths(self, paths: Iterable[str]) -> tuple[Source, ...]:
        """Whose outside words were ever written under these names."""
        found: list[Source] = []
        for path, sources in self._among("SELECT path, sources FROM paths WHERE path IN",
                                         paths):
            found.extend(sources_from_text(sources))
            found.append(Source(SourceKind.FILE, path))
        return sources_union(found)

    def _among(self, select: str, keys: Iterable[str]) -> list[tuple]:
        """`select … IN (keys)`, in chunks the SQL limits allow."""
        wanted = list(dict.fromkeys(keys))
        rows: list[tuple] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            rows += self._rows(f"{select} ({','.join('?' * len(chunk))})", chunk)
        return rows

    def of_paths_content(self, paths: Iterable[str]) -> tuple[Source, ...]:
        """Whose outside words the files at these paths hold now, judged by
        their content (a copy of marked bytes under any name counts). Past
        `READ_FILES` files or `READ_BYTES` bytes, every source any marked
        content holds is assumed (the reader cannot be cleared cheaply)."""
        if not self.any_marked():
            return ()
        found: list[Source] = []
        files = read = 0
        for path in dict.fromkeys(paths):
            files += 1
            try:
                with open(path, "rb") as file:
                    data = file.read(READ_BYTES - read + 1)
            except OSError:  # gone since, or never a file: what was at the name counts
                found.extend(self.of_paths([path]))
                continue
            read += len(data)
            if files > READ_FILES or read > READ_BYTES:
                return self.all_sources()
            found.extend(self.of_content(data, path))
        return sources_union(found)

    def all_sources(self) -> tuple[Source, ...]:
        """Every source any marked content holds (what a reader with no view
        of what it read must assume it read)."""
        return sources_union(*(sources_from_text(r[0])
                               for r in self._rows("SELECT sources FROM contents")))

    def any_marked(self) -> bool:
        """Whether any content was ever marked (a cheap test before a walk)."""
        return bool(self._rows("SELECT 1 FROM contents LIMIT 1"))

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def import_legacy_marks(marks: FileMarks, roots: Iterable[Path]) -> int:
    """Carry the marks an earlier version set on files (`LEGACY_XATTR`) into
    `marks`; run once, when that version's agent is first opened (its turn
    store is upgraded then). Each marked file's content is marked as outside
    words of the file itself (who wrote them was never recorded). Returns how
    many were carried.

    An attribute a command set on the person's own files is carried too: a
    wrong mark costs a question, a lost one an order obeyed unasked."""
    carried = 0
    for root in roots:
        for folder, folders, names in os.walk(root):
            folders[:] = [f for f in folders if f != ".git"]
            for name in names:
                path = os.path.join(folder, name)
                data = _legacy_marked(path)
                if data is not None:
                    marks.mark(data, (Source(SourceKind.FILE, path),), path)
                    carried += 1
    return carried


def _legacy_marked(path: str) -> bytes | None:
    """The content of a regular file that bears the old mark, else None."""
    try:
        if os.getxattr(path, LEGACY_XATTR, follow_symlinks=False) != b"1":
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # no such attribute, no xattr support, gone, a link
        return None
    with os.fdopen(fd, "rb") as opened:
        info = os.fstat(opened.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > READ_BYTES:
            return None
        return opened.read()
