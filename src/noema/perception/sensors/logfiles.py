"""Log files held by their open descriptor, where a follower stands in one, and
the rotated files beside them (`app.log.1`, `app.log.2`, ...).

A file is known by its device and inode and by a digest of its first bytes
(inodes are reused, so the digest tells a new file from the old one).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import Any

HEAD_BYTES = 256
MAX_NUMBER_TRIED = 1000  # rotations looked for by number up to this one, beyond by listing

Ident = tuple[int, int]
"""A file's device and inode."""


@dataclass(frozen=True, slots=True)
class LogPosition:
    """Where a follower stands: which file, and the offset just after the last
    complete line it read."""

    path: str  # the path followed (the file may since have been renamed)
    device: int
    inode: int
    offset: int
    head: str  # digest of the first `head_size` bytes: tells a new file that reused an inode
    head_size: int

    def as_dict(self) -> dict[str, Any]:
        """JSON data for a bookmark (built by hand: it is saved for every line)."""
        return {"path": self.path, "device": self.device, "inode": self.inode,
                "offset": self.offset, "head": self.head, "head_size": self.head_size}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> LogPosition | None:
        """The position a bookmark holds; None if there is none or it is not one."""
        if not data:
            return None
        try:
            position = cls(str(data["path"]), int(data["device"]), int(data["inode"]),
                           int(data["offset"]), str(data["head"]), int(data["head_size"]))
        except (KeyError, TypeError, ValueError):
            return None
        if position.offset < 0 or not 0 <= position.head_size <= HEAD_BYTES:
            return None
        return position


class OpenFile:
    """One file held by its descriptor, so it can be read to its end after it
    is renamed or deleted. Read with `pread`: the descriptor keeps no place.

    `offset` is just after the last complete line handed out: the next read
    starts there, so a line not finished yet is read again, whole, once it is.
    """

    __slots__ = ("fd", "head", "head_size", "ident", "offset")

    def __init__(self, fd: int, ident: Ident) -> None:
        self.fd, self.ident, self.offset = fd, ident, 0
        self.head, self.head_size = head_of(fd)

    @classmethod
    def open(cls, path: Path) -> OpenFile | None:
        """The regular file at `path`, or None if there is none to read."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        stat = os.fstat(fd)
        if not S_ISREG(stat.st_mode):
            os.close(fd)
            return None
        return cls(fd, (stat.st_dev, stat.st_ino))

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def read(self, limit: int) -> bytes:
        """Up to `limit` bytes from `offset`."""
        return os.pread(self.fd, limit, self.offset)

    def takes_head_from(self, data: bytes) -> bool:
        """With `data` read from the file's start, make its first bytes the head:
        the head then describes the text read, even if the file is cut right
        after. False if they are not the first bytes known."""
        if self.offset or self.head_size >= HEAD_BYTES or not data:
            return True
        if digest(data[:self.head_size]) != self.head:
            return False
        first = data[:HEAD_BYTES]
        self.head, self.head_size = digest(first), len(first)
        return True

    def head_holds(self) -> bool:
        """Whether the file still starts with the bytes it started with (then
        the head is extended to what is there now, up to HEAD_BYTES)."""
        data = os.pread(self.fd, HEAD_BYTES, 0)
        if len(data) < self.head_size or digest(data[:self.head_size]) != self.head:
            return False
        if len(data) > self.head_size:
            self.head, self.head_size = digest(data), len(data)
        return True

    def starts_like(self, other: OpenFile) -> bool:
        """Whether this file begins like `other`, read after it."""
        mine = os.pread(self.fd, HEAD_BYTES, 0)
        theirs = os.pread(other.fd, HEAD_BYTES, 0)
        common = min(len(mine), len(theirs))
        return common > 0 and mine[:common] == theirs[:common]

    def holds_text_of(self, place: LogPosition) -> bool:
        """Whether this file has the first bytes of `place` and reaches its offset."""
        return (place.head_size > 0 and self.size() >= place.offset
                and digest(os.pread(self.fd, place.head_size, 0)) == place.head)

    def close(self) -> None:
        os.close(self.fd)


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def head_of(fd: int) -> tuple[str, int]:
    data = os.pread(fd, HEAD_BYTES, 0)
    return digest(data), len(data)


def matches_saved(path: Path, saved: LogPosition) -> bool:
    """Whether `path` is still the file a saved place was in."""
    try:
        stat = os.stat(path)
    except OSError:
        return False
    if (stat.st_dev, stat.st_ino) != (saved.device, saved.inode) or stat.st_size < saved.offset:
        return False
    try:
        with open(path, "rb") as handle:
            data = handle.read(saved.head_size)
    except OSError:
        return False
    return len(data) == saved.head_size and digest(data) == saved.head


def numbered_siblings(path: Path) -> list[tuple[int, Path]]:
    """The numbered rotations of `path` (`app.log.1`, `app.log.2`, ...) with their numbers."""
    prefix = path.name + "."
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    return [(int(name[len(prefix):]), path.parent / name) for name in names
            if name.startswith(prefix) and name[len(prefix):].isascii()
            and name[len(prefix):].isdigit()]


def open_siblings(path: Path) -> list[tuple[int, OpenFile]]:
    """The numbered rotations of `path`, opened, each once.

    Opened by number, lowest first: rotating shifts the files up (.1 to .2)
    from the highest down, so a file moving while this runs is found under
    its old name or its new one, never missed (a listing alone can miss it,
    and a gap in the listing may be a file in the middle of a move)."""
    numbers = [n for n, _ in numbered_siblings(path)]
    if not numbers:
        return []
    if max(numbers) <= MAX_NUMBER_TRIED:
        numbers = list(range(max(numbers) + 2))
    opened: dict[Ident, tuple[int, OpenFile]] = {}
    for number in sorted(numbers):
        f = OpenFile.open(path.parent / f"{path.name}.{number}")
        if f is None:
            continue
        if f.ident in opened:
            f.close()  # moved up while this ran: already opened under its old number
        else:
            opened[f.ident] = (number, f)
    return list(opened.values())


def rotated_after(path: Path, rotated: Path) -> list[Path]:
    """The numbered rotations made after `rotated`, oldest first: a lower number
    and written later (strictly, so a file of the same moment is left out rather
    than read twice)."""
    siblings = numbered_siblings(path)
    number = dict((p, i) for i, p in siblings).get(rotated)
    if number is None:
        return []
    try:
        since = os.stat(rotated).st_mtime_ns
    except OSError:
        return []
    later = []
    for i, p in siblings:
        try:
            written = os.stat(p).st_mtime_ns
        except OSError:
            continue
        if i < number and written > since:
            later.append((written, -i, p))
    return [p for *_, p in sorted(later)]


def find_rotated(path: Path, saved: LogPosition) -> Path | None:
    """The file a saved place was in, renamed inside the same folder (found by
    inode and first bytes), or else a numbered copy of its text (copytruncate)."""
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return None
    for entry in entries:
        try:
            stat = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (stat.st_dev, stat.st_ino) == (saved.device, saved.inode) and matches_saved(
                Path(entry.path), saved):
            return Path(entry.path)
    if saved.head_size == 0:
        return None  # no first bytes to know a copy by
    for _, sibling in sorted(numbered_siblings(path)):
        f = OpenFile.open(sibling)
        if f is not None:
            copy = f.holds_text_of(saved)
            f.close()
            if copy:
                return sibling
    return None


def line_start(fd: int, at: int, size: int) -> int:
    """The first line start at or after `at` (or `size` if no line starts there)."""
    if at <= 0:
        return 0
    while at < size:
        chunk = os.pread(fd, 64 * 1024, at - 1)
        newline = chunk.find(b"\n")
        if newline >= 0:
            return at + newline
        at += len(chunk)
        if not chunk:
            break
    return size
