"""Keep what a damaged SQLite database still holds.

The damaged file is never changed and never deleted: it is read through a
scratch copy (whose header is rebuilt when only the header was overwritten),
its rows are copied table by table into a fresh database made by the store's
own code (so schema, triggers and indexes are exactly today's), and then the
damaged file is moved aside under a timestamped name and the fresh one takes
its place.

Rows are read in key order; where a page does not read, the key space is
probed forward (doubling steps, then halving back) to the first row that
reads again, so one bad page costs the rows on it, not the rest of the table.
This is what the `sqlite3` shell's `.recover` does at the page level; that
shell is not always installed, and reading through SQLite itself keeps every
row it returns valid by the table's own constraints.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from .sqlite_files import HEADER_BYTES, HEADER_MAGIC

_PAGE = 256
_LOWEST = -(1 << 63)
_HIGHEST = (1 << 63) - 1
_SIDE_FILES = ("-wal", "-shm")


@dataclass
class TableSalvage:
    """What one table kept and lost."""

    name: str
    kept: int = 0
    refused: int = 0  # rows read but refused by today's constraints
    unreadable: list[str] = field(default_factory=list)  # key ranges that did not read

    def describe(self) -> str:
        parts = [f"{self.name}: kept {self.kept} rows"]
        if self.refused:
            parts.append(f"{self.refused} refused as invalid")
        if self.unreadable:
            parts.append("could not read " + ", ".join(self.unreadable))
        return "; ".join(parts)

    @property
    def lost_something(self) -> bool:
        return bool(self.refused or self.unreadable)


@dataclass(frozen=True)
class Salvage:
    """The outcome of a salvage."""

    aside: Path  # where the damaged file now is
    tables: tuple[TableSalvage, ...]
    header_rebuilt: bool
    readable: bool  # False: not even the schema read, nothing could be kept


def damaged_name(path: Path, when: float | None = None) -> Path:
    """Where a damaged file is moved: beside it, with the time of the move."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
    candidate = path.with_name(f"{path.name}.damaged-{stamp}")
    count = 1
    while candidate.exists():
        count += 1
        candidate = path.with_name(f"{path.name}.damaged-{stamp}-{count}")
    return candidate


def salvage(path: Path, create: Callable[[Path], None],
            finish: Callable[[Path], None] | None = None) -> Salvage:
    """Rebuild `path` from what still reads. `create` makes an empty database of
    today's schema at a path; `finish` runs on the rebuilt database before it
    takes the damaged file's place (to rebuild derived data such as an index)."""
    fresh = path.with_name(path.name + ".salvage")
    scratch = path.with_name(path.name + ".reading")
    for leftover in (fresh, scratch):
        _remove_with_sides(leftover)  # our own scratch files from an interrupted repair
    try:
        header_rebuilt = _scratch_copy(path, scratch)
        create(fresh)
        tables, readable = _copy_rows(scratch, fresh)
        if finish is not None:
            finish(fresh)
        with closing(sqlite3.connect(fresh)) as db:  # all of it in the one file
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        aside = damaged_name(path)
        move_aside(path, aside)
        os.replace(fresh, path)
    finally:
        _remove_with_sides(scratch)
        _remove_with_sides(fresh)
    return Salvage(aside, tuple(tables), header_rebuilt, readable)


def move_aside(path: Path, aside: Path) -> None:
    """Rename a database and its WAL files to `aside` (never deleting anything)."""
    for suffix in _SIDE_FILES:
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, aside.with_name(aside.name + suffix))
    if path.exists() or path.is_symlink():
        os.replace(path, aside)


def _scratch_copy(path: Path, scratch: Path) -> bool:
    """Copy the database (and its WAL) to read it; True if its header was rebuilt."""
    shutil.copyfile(path, scratch)
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        shutil.copyfile(wal, scratch.with_name(scratch.name + "-wal"))
    size = scratch.stat().st_size
    with scratch.open("r+b") as copy:
        header = copy.read(HEADER_BYTES)
        if len(header) < HEADER_BYTES:
            return False
        if not header.startswith(HEADER_MAGIC):
            copy.seek(0)
            copy.write(_plausible_header(size, wal_mode=wal.exists()))
            return True
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        if page_size >= 512 and int.from_bytes(header[28:32], "big") * page_size > size:
            # Truncated: the header must count only the pages that are there,
            # or SQLite refuses to read any of them.
            pages = size // page_size
            copy.truncate(pages * page_size)
            copy.seek(24)
            copy.write((1).to_bytes(4, "big") + pages.to_bytes(4, "big"))
            copy.seek(92)
            copy.write((1).to_bytes(4, "big"))
    return False


def _plausible_header(size: int, *, wal_mode: bool, page_size: int = 4096) -> bytes:
    """A header for a file whose first 100 bytes were lost (our stores use the
    default page size); the freelist is forgotten, the pages are what counts."""
    header = bytearray(HEADER_BYTES)
    header[0:16] = HEADER_MAGIC
    header[16:18] = page_size.to_bytes(2, "big")
    header[18] = header[19] = 2 if wal_mode else 1
    header[21:24] = bytes((64, 32, 32))
    header[24:28] = (1).to_bytes(4, "big")
    header[28:32] = (size // page_size).to_bytes(4, "big")
    header[40:44] = (1).to_bytes(4, "big")  # schema cookie
    header[44:48] = (4).to_bytes(4, "big")  # schema format
    header[56:60] = (1).to_bytes(4, "big")  # UTF-8
    header[92:96] = (1).to_bytes(4, "big")
    major, minor, patch = sqlite3.sqlite_version_info
    header[96:100] = (major * 1_000_000 + minor * 1_000 + patch).to_bytes(4, "big")
    return bytes(header)


def _copy_rows(source_path: Path, fresh_path: Path) -> tuple[list[TableSalvage], bool]:
    source = sqlite3.connect(source_path)
    fresh = sqlite3.connect(fresh_path, isolation_level=None)
    try:
        fresh.execute("PRAGMA foreign_keys=ON")
        try:
            old_tables = _tables(source)
        except sqlite3.DatabaseError:
            return [], False
        found: list[TableSalvage] = []
        fresh.execute("BEGIN")
        for name in _tables(fresh):
            if name not in old_tables:
                continue
            found.append(_copy_table(source, fresh, name, old_tables[name]))
        fresh.execute("COMMIT")
        return found, True
    finally:
        source.close()
        fresh.close()


def _tables(db: sqlite3.Connection) -> dict[str, str]:
    """Ordinary tables by name with their SQL, in creation order (the index
    tables of full-text search are left out: they are rebuilt, not copied)."""
    rows = db.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL"
        " AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
    ).fetchall()
    virtual = {n for n, sql in rows if sql.upper().startswith("CREATE VIRTUAL")}
    return {n: sql for n, sql in rows
            if n not in virtual and not any(n.startswith(v + "_") for v in virtual)}


def _copy_table(source: sqlite3.Connection, fresh: sqlite3.Connection, name: str,
                old_sql: str) -> TableSalvage:
    outcome = TableSalvage(name)
    try:
        old_columns = [r[1] for r in source.execute(f"PRAGMA table_info({_q(name)})")]
        key = _key_columns(source, name, old_sql)
    except sqlite3.DatabaseError as exc:
        outcome.unreadable.append(f"all of it ({exc})")
        return outcome
    new_columns = {r[1] for r in fresh.execute(f"PRAGMA table_info({_q(name)})")}
    columns = [c for c in old_columns if c in new_columns]
    insert = (f"INSERT INTO {_q(name)} ({', '.join(map(_q, columns))})"
              f" VALUES ({', '.join('?' * len(columns))})")
    selected = ", ".join(map(_q, columns))
    for row in _readable_rows(source, name, selected, key, outcome):
        try:
            fresh.execute(insert, row[len(key):])
            outcome.kept += 1
        except sqlite3.DatabaseError:
            outcome.refused += 1
    return outcome


def _key_columns(db: sqlite3.Connection, name: str, sql: str) -> list[str]:
    """The columns a table's b-tree is ordered by."""
    info = db.execute(f"PRAGMA table_info({_q(name)})").fetchall()
    ranked = sorted((r[5], r[1], r[2].upper()) for r in info if r[5])
    if "WITHOUT ROWID" in sql.upper():
        return [column for _, column, _ in ranked]
    if len(ranked) == 1 and ranked[0][2] == "INTEGER":
        return [ranked[0][1]]  # the rowid under its declared name, copied as it was
    return ["rowid"]


def _readable_rows(db: sqlite3.Connection, name: str, selected: str, key: list[str],
                   outcome: TableSalvage) -> Iterator[tuple]:
    """Rows in key order, stepping over the parts that do not read."""
    keys = ", ".join(map(_q, key)) if key != ["rowid"] else "rowid"
    tuple_of = f"({keys})" if len(key) > 1 else keys
    marks = f"({', '.join('?' * len(key))})" if len(key) > 1 else "?"
    after = f"SELECT {keys}, {selected} FROM {_q(name)} WHERE {tuple_of} > {marks} ORDER BY {keys}"
    # Probes read whole rows: a row whose record does not read is stepped over too.
    from_ = (f"SELECT {keys}, {selected} FROM {_q(name)} WHERE {tuple_of} >= {marks}"
             f" ORDER BY {keys} LIMIT 1")
    position: tuple = tuple(_LOWEST for _ in key)
    limit = _PAGE
    while True:
        try:
            rows = db.execute(f"{after} LIMIT {limit}", position).fetchall()
        except sqlite3.DatabaseError:
            if limit > 1:  # read up to the bad page one row at a time
                limit = 1
                continue
            found = _next_readable(db, from_, position)
            following = None if found is None else tuple(found[: len(key)])
            outcome.unreadable.append(_gap(key, position, following))
            if following is None or following <= position:
                return
            # The row found is given as read: seeking "after the key before it"
            # may land in the damaged page again.
            yield found
            position, limit = following, _PAGE
            continue
        if not rows:
            return
        yield from rows
        position = tuple(rows[-1][: len(key)])


def _next_readable(db: sqlite3.Connection, query: str, position: tuple) -> tuple | None:
    """The first key after `position` from which reading works again, or None."""
    for level in range(len(position) - 1, -1, -1):
        base = position[level]
        if not isinstance(base, int):
            return None  # keys that cannot be stepped over: the rest is lost

        def probe(value: int, level: int = level) -> tuple[bool, tuple | None]:
            key = (*position[:level], value, *(_LOWEST for _ in position[level + 1 :]))
            try:
                row = db.execute(query, key).fetchone()
            except sqlite3.DatabaseError:
                return False, None
            return True, tuple(row) if row else None

        failed, step = base, 1
        while base + step <= _HIGHEST:
            works, row = probe(base + step)
            if works:
                low, high = failed, base + step  # narrow down to the first key that reads
                while high - low > 1:
                    middle = (low + high) // 2
                    works, found = probe(middle)
                    if works:
                        high, row = middle, found
                    else:
                        low = middle
                if row is not None:
                    return row
                break  # nothing readable after the damage at this level
            failed, step = base + step, step * 2
    return None


def _gap(key: list[str], start: tuple, end: tuple | None) -> str:
    """The unread rows, by the keys around them (both excluded)."""
    def shown(value: tuple) -> str:
        return f"{key[0]} {value[0]}" if len(key) == 1 else f"({', '.join(key)}) {value}"

    from_start = all(v == _LOWEST for v in start)
    if from_start and end is None:
        return "every row"
    if from_start:
        return f"the rows before {shown(end)}"
    if end is None:
        return f"the rows after {shown(start)}"
    return f"the rows between {shown(start)} and {shown(end)}"


def _remove_with_sides(path: Path) -> None:
    for candidate in (path, *(path.with_name(path.name + s) for s in _SIDE_FILES)):
        candidate.unlink(missing_ok=True)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
