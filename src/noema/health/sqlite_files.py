"""Is an SQLite file usable? A quick answer when a store opens, a thorough one
for `noema doctor`.

The quick answer costs milliseconds whatever the size: the file is a regular
file, its header is SQLite's and its length is what the header counts (a
truncated copy fails here), the schema reads, and the newest row of every
table reads (the right edge of each b-tree, where appends land). Damage in
the middle of a file is only seen by reading every page: `PRAGMA
quick_check` does that in about 4.5 ms per MB from the page cache (1.1 s for
a 250 MB turn store, more from a cold disk), so it runs on open only for
files up to `QUICK_CHECK_MAX_BYTES`; `noema doctor` checks everything.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..diskspace import free_bytes, full_message
from ..privacy import private_file

MIB = 1 << 20
QUICK_CHECK_MAX_BYTES = 32 * MIB
HEADER_MAGIC = b"SQLite format 3\x00"
HEADER_BYTES = 100
# An I/O error with less room than this left is taken for a full disk: SQLite
# reports some failed writes (the WAL index) as I/O errors, not as SQLITE_FULL.
_NEARLY_FULL = 256 * 1024


class UnusableDatabase(Exception):
    """A database that cannot be used now; the message is meant for the person."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


class DamagedDatabase(UnusableDatabase):
    """The file is not a sound SQLite database (truncated, overwritten, garbled)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(path, f"{path} is damaged: {reason}")
        self.reason = reason


class DiskFull(UnusableDatabase):
    """There is no room left to open or write the database."""

    def __init__(self, path: Path) -> None:
        self.free = free_bytes(path.parent)
        super().__init__(path, full_message(path.parent, self.free))


def check_file(path: Path) -> None:
    """Refuse a file that cannot be a sound database, without opening it with SQLite.

    A missing or empty file passes: SQLite makes a new database of it (whether
    that is plausible is for the caller to say).
    """
    try:
        stat = path.stat()
    except FileNotFoundError:
        return
    if not path.is_file():
        raise DamagedDatabase(path, "it is not a regular file (a folder or a device is there)")
    if stat.st_size == 0:
        return
    try:
        with path.open("rb") as source:
            header = source.read(HEADER_BYTES)
    except OSError as exc:
        raise UnusableDatabase(path, f"{path} cannot be read ({exc.strerror})") from None
    if len(header) < HEADER_BYTES or not header.startswith(HEADER_MAGIC):
        raise DamagedDatabase(path, "its first bytes are not an SQLite header "
                                    "(the start of the file was overwritten or cut)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise DamagedDatabase(path, f"its header gives an impossible page size ({page_size})")
    # The page count is valid when the two change counters agree (see the
    # SQLite file format, "in-header database size"). With a WAL beside the
    # file, a checkpoint cut short by a kill may have written page 1 before
    # the pages after the old end: SQLite redoes it from the WAL on open.
    if header[24:28] == header[92:96] and not has_wal(path):
        expected = int.from_bytes(header[28:32], "big") * page_size
        if stat.st_size < expected:
            raise DamagedDatabase(path, f"it is truncated ({stat.st_size} bytes of the "
                                        f"{expected} its header counts)")


def has_wal(path: Path) -> bool:
    """Whether a write-ahead log with content lies beside the database: then the
    newest pages are there, not in the file (a new store's file may even be
    empty until the first checkpoint)."""
    wal = path.with_name(path.name + "-wal")
    try:
        return wal.stat().st_size > 0
    except OSError:
        return False


def check_open(conn: sqlite3.Connection, path: Path, *,
               thorough_below: int = QUICK_CHECK_MAX_BYTES) -> None:
    """The quick check of an open database (see the module docstring);
    DamagedDatabase when something does not read."""
    with opening(path):
        tables = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL"
            " AND sql NOT LIKE 'CREATE VIRTUAL%'"
        ).fetchall()
        for name, sql in tables:
            conn.execute(f"SELECT * FROM {_quoted(name)} ORDER BY {_key(conn, name, sql)}"
                         " LIMIT 1").fetchall()
        size = path.stat().st_size if path.exists() else 0
        if 0 < size <= thorough_below:
            found = [row[0] for row in conn.execute("PRAGMA quick_check(3)")]
            if found != ["ok"]:
                raise DamagedDatabase(path, "; ".join(found))


def integrity_problems(conn: sqlite3.Connection) -> list[str]:
    """Everything `PRAGMA integrity_check` and each full-text index's own check
    find wrong (empty when the database is sound). Reads every page."""
    try:
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check(20)")]
        indexes = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
            " AND sql LIKE 'CREATE VIRTUAL%fts5%'"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        if _is_damage(exc):  # so damaged that the check itself stops
            return [str(exc)]
        raise  # not a verdict on the file (a full disk, a lock): for `opening` to tell
    if problems == ["ok"]:
        problems = []
    for (name,) in indexes:
        try:
            conn.execute(f"INSERT INTO {_quoted(name)}({_quoted(name)}, rank)"
                         " VALUES ('integrity-check', 0)")
        except sqlite3.DatabaseError as exc:
            if not _is_damage(exc):
                raise
            problems.append(f"the full-text index {name}: {exc}")
    return problems


def open_small_store(path: Path | str, schema: str) -> sqlite3.Connection:
    """A small state file (a channel's, the questions asked away) opened the
    one way they all need: private, WAL, every commit synced, `schema`
    applied, and read whole by `quick_check`, which costs little at their
    size. Damage raises sqlite3.DatabaseError, with the connection closed."""
    private_file(path)  # its -wal and -shm files take its mode
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")  # what was acknowledged survives power loss
        conn.executescript(schema)
        (verdict,) = conn.execute("PRAGMA quick_check").fetchone()
        if verdict != "ok":
            raise sqlite3.DatabaseError(f"quick_check: {verdict}")
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def opening(path: Path) -> Iterator[None]:
    """Turn what SQLite and the OS say about a damaged file or a full disk into
    DamagedDatabase or DiskFull; other errors pass unchanged."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        name = getattr(exc, "sqlite_errorname", "") or ""
        if name == "SQLITE_FULL" or "disk is full" in str(exc):
            raise DiskFull(path) from exc
        if name.startswith("SQLITE_IOERR") and free_bytes(path.parent) < _NEARLY_FULL:
            raise DiskFull(path) from exc
        if _is_damage(exc):
            raise DamagedDatabase(path, str(exc)) from exc
        raise
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(path) from exc
        raise


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite says the file itself is wrong (not the disk, not a lock)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    damaged = name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))
    # Python raises a plain DatabaseError, of no subclass, for both.
    return damaged or type(exc) is sqlite3.DatabaseError


def _key(conn: sqlite3.Connection, table: str, sql: str) -> str:
    # The newest row: the right edge of the table's b-tree.
    if "WITHOUT ROWID" not in sql.upper():
        return "rowid DESC"
    info = conn.execute(f"PRAGMA table_info({_quoted(table)})").fetchall()
    columns = sorted((row[5], row[1]) for row in info if row[5])
    return ", ".join(f"{_quoted(name)} DESC" for _, name in columns)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
