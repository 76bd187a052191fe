"""The log-file sensor: follows a file across rotation, one event per line.

Lines are aggregatable: their key is the line with its variable parts
(timestamps, UUIDs, IP addresses, hex IDs, numbers) replaced by
placeholders, so "connection error to 10.0.0.3 after 512 ms" and
"connection error to 10.0.0.9 after 77 ms" are counted together.

**Resuming.** The sensor keeps its place in a bookmark (`LogPosition`: the
file's device and inode, a digest of its first bytes, and the offset just
after the last complete line read). The place after a line is saved before
the line is emitted, so the archive commits it together with the line and
never ahead of it. When the sensor starts again (after a crash, or when the
agent restarts) it continues from there:

- the same file (same inode and first bytes, not shorter than the offset):
  from the offset;
- the file was rotated while the sensor was not reading and the old one is
  still in the same folder (found by inode and first bytes): the rest of
  the old file, then the new file from its start;
- otherwise (the old file deleted or compressed, or the file rewritten in
  place): the file at the path from its start, with a note that lines
  written to the old file may be missing.

Catching up is bounded: at most `max_backlog` bytes (8 MiB by default) are
read back in each of those files. The older part is skipped, from a line
start, and a note event (key `noema:sensor-note`) says how much was left out.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..events import MAX_KEY, Nature, SensorInfo, TreatmentParams, Urgency
from ..hub import Bookmark, Emitter, MemoryBookmark, Sleep
from ..timefmt import format_duration

MAX_LINE = 64 * 1024
READ_CHUNK = 1024 * 1024
HEAD_BYTES = 256
DEFAULT_MAX_BACKLOG = 8 * 1024 * 1024
NOTE_KEY = "noema:sensor-note"

Where = Literal["start", "end", "capped"]
"""Where a file is opened: its start, its end, or its last `max_backlog` bytes."""

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_PLACEHOLDERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
                r"(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(rf"\b{_MONTH}\s+\d{{1,2}}\s+\d{{1,2}}:\d{{2}}:\d{{2}}\b"), "<time>"),
    (re.compile(r"\b\d{1,2}/" + _MONTH + r"/\d{4}:\d{2}:\d{2}:\d{2}(?:\s[+-]\d{4})?"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
     "<uuid>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b"), "<ip>"),
    (re.compile(r"(?<![\w:])(?=[0-9a-f:]*\d)(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?![\w:])",
                re.I), "<ip>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\b", re.I), "<hex>"),
    (re.compile(r"\d+(?:[.,]\d+)*"), "<n>"),
)
_SPACES = re.compile(r"\s+")


def normalise_line(line: str) -> str:
    """The aggregation key of a log line: its shape with variable parts replaced."""
    key = line.strip()
    for pattern, placeholder in _PLACEHOLDERS:
        key = pattern.sub(placeholder, key)
    key = _SPACES.sub(" ", key)
    return key[:MAX_KEY]


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


@dataclass(frozen=True, slots=True)
class LogLine:
    """A complete line and the follower's place just after it."""

    text: str
    position: LogPosition


class LogFollower:
    """Reads the complete new lines of a file, like `tail -F`, and knows its place.

    Survives rotation (the path now names another file: the old one is read
    to its end, then the new one from its start), truncation in place (read
    again from the start) and a file that does not exist yet. Given the
    place it stood before (`resume`), it continues from there; see the
    module docstring for the cases and the `max_backlog` bound.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        from_start: bool = False,
        resume: LogPosition | None = None,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
    ) -> None:
        if max_backlog < 0:
            raise ValueError("max_backlog is a number of bytes, 0 or more")
        self.path = Path(path)
        self.max_backlog = max_backlog
        self.notes: list[str] = []  # what the sensor should say about its resumption
        self._file = None
        self._ident: tuple[int, int] | None = None
        self._head = ("", 0)
        self._partial = b""
        self._consumed = 0  # offset just after the last complete line read
        self._more = False  # the last read filled its chunk: the file has more
        self._cap_next = False  # resumed in a rotated file: catching up in the next one too
        if resume is not None and self._resume(resume):
            return
        # Opened now, so "new lines" means lines written after this moment; a
        # file that appears later is read from its start.
        self._open("start" if from_start else "end")

    # -- where it stands -----------------------------------------------------

    def position(self) -> LogPosition | None:
        """The place after the last complete line read (None with no file open)."""
        return None if self._ident is None else self._at(self._consumed)

    def _at(self, offset: int) -> LogPosition:
        assert self._ident is not None
        return LogPosition(str(self.path), self._ident[0], self._ident[1], offset, *self._head)

    # -- opening ---------------------------------------------------------------

    def _open(self, where: Where, path: Path | None = None) -> bool:
        """Open the file at the path (or `path`) at its "start", its "end", or
        "capped": the start, or the last `max_backlog` bytes of a bigger file."""
        try:
            handle = open(path or self.path, "rb")  # noqa: SIM115 - kept open between polls
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            return False
        stat = os.fstat(handle.fileno())
        self._file, self._ident = handle, (stat.st_dev, stat.st_ino)
        self._head = _head_of(handle.fileno())
        self._seek(0)
        if where == "end":
            self._seek(stat.st_size)
        elif where == "capped":
            self._seek(self._catch_up_from(0, stat.st_size))
        return True

    def _resume(self, saved: LogPosition) -> bool:
        """Continue from a saved place; False if it names another path."""
        if saved.path != str(self.path):
            return False
        if _matches(self.path, saved):
            return self._reopen(self.path, saved)
        rotated = _find_rotated(self.path, saved)
        if rotated is not None and self._reopen(rotated, saved):
            self._cap_next = True
            return True
        self.notes.append(
            f"The log file {self.path} was replaced while this sensor was not reading it, "
            f"and the file it was reading is gone: lines written to that file after byte "
            f"{saved.offset} may be missing. Reading the current file from its start."
        )
        self._open("capped")  # if there is no file yet, it is read from its start when it appears
        return True

    def _reopen(self, path: Path, saved: LogPosition) -> bool:
        if not self._open("start", path):
            return False
        stat = os.fstat(self._file.fileno())  # type: ignore[union-attr]
        if self._ident != (saved.device, saved.inode) or stat.st_size < saved.offset:
            self.close()  # replaced between the look and the open
            return False
        self._seek(self._catch_up_from(saved.offset, stat.st_size))
        return True

    def _catch_up_from(self, offset: int, size: int) -> int:
        """Where to read from to catch up from `offset`: at most `max_backlog` back
        from the end, at a line start; a note counts what is skipped."""
        if size - offset <= self.max_backlog:
            return offset
        assert self._file is not None
        start = _line_start(self._file.fileno(), size - self.max_backlog, size)
        self.notes.append(
            f"{_size(start - offset)} of {self.path} written while this sensor was not "
            f"reading were skipped: it catches up on at most {_size(self.max_backlog)} of a "
            "file. The skipped lines are still in the file."
        )
        return start

    def _seek(self, offset: int) -> None:
        assert self._file is not None
        self._file.seek(offset)
        self._consumed = offset
        self._partial = b""

    # -- reading ---------------------------------------------------------------

    def poll(self) -> list[str]:
        """The lines completed since the last poll (at most about READ_CHUNK bytes)."""
        return [line.text for line in self.read()]

    def read(self) -> list[LogLine]:
        """`poll`, each line with the place just after it."""
        if self._file is None and not self._open("start"):
            return []
        lines = self._read()
        if self._more:
            return lines  # the file is read to its end before a rotation is followed
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return lines  # rotated away, nothing new yet: keep the old file's tail
        assert self._file is not None
        if (stat.st_dev, stat.st_ino) != self._ident:
            lines += self._drain() + self._flush_partial()
            self.close()
            where: Where = "capped" if self._cap_next else "start"
            self._cap_next = False
            if self._open(where):
                lines += self._read()
        elif stat.st_size < self._file.tell():
            self._head = ("", 0)  # truncated in place: the first bytes will be new
            self._seek(0)
            lines += self._read()
        return lines

    def _read(self) -> list[LogLine]:
        assert self._file is not None
        data = self._file.read(READ_CHUNK)
        self._more = len(data) == READ_CHUNK
        if not data:
            return []
        if self._head[1] < HEAD_BYTES:
            self._head = _head_of(self._file.fileno())
        chunks = (self._partial + data).split(b"\n")
        self._partial = chunks.pop()
        at = self._consumed
        lines = []
        for chunk in chunks:
            at += len(chunk) + 1
            if chunk.strip():
                lines.append(LogLine(_decode(chunk), self._at(at)))
        if len(self._partial) > MAX_LINE:  # a line with no end in sight is cut
            at += len(self._partial)
            lines.append(LogLine(_decode(self._partial), self._at(at)))
            self._partial = b""
        self._consumed = at
        return lines

    def _drain(self) -> list[LogLine]:
        lines = self._read()
        while self._more:
            lines += self._read()
        return lines

    def _flush_partial(self) -> list[LogLine]:
        rest, self._partial = self._partial, b""
        if not rest:
            return []
        self._consumed += len(rest)
        return [LogLine(_decode(rest), self._at(self._consumed))] if rest.strip() else []

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._ident = None


def _decode(raw: bytes) -> str:
    return raw[:MAX_LINE].decode("utf-8", errors="replace").rstrip("\r")


def _head_of(fd: int) -> tuple[str, int]:
    data = os.pread(fd, HEAD_BYTES, 0)
    return hashlib.blake2b(data, digest_size=8).hexdigest(), len(data)


def _matches(path: Path, saved: LogPosition) -> bool:
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
    return (len(data) == saved.head_size
            and hashlib.blake2b(data, digest_size=8).hexdigest() == saved.head)


def _find_rotated(path: Path, saved: LogPosition) -> Path | None:
    """The file a saved place was in, renamed inside the same folder (rotation)."""
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return None
    for entry in entries:
        try:
            stat = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (stat.st_dev, stat.st_ino) == (saved.device, saved.inode) and _matches(
                Path(entry.path), saved):
            return Path(entry.path)
    return None


def _line_start(fd: int, at: int, size: int) -> int:
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


def _size(count: int) -> str:
    if count < 1024 * 1024:
        return f"{count / 1024:.0f} KiB" if count >= 1024 else f"{count} bytes"
    return f"{count / (1024 * 1024):.1f} MiB"


class LogFileSensor:
    """Follows one log file; aggregatable by line pattern; resumes where it stood."""

    def __init__(
        self,
        path: Path | str,
        *,
        channel: str,
        window: float = 300.0,
        poll_interval: float = 1.0,
        from_start: bool = False,
        urgency: Urgency = Urgency.NORMAL,
        can_silence: bool = True,
        sleep: Sleep = asyncio.sleep,
        bookmark: Bookmark | None = None,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
    ) -> None:
        """`bookmark` keeps the sensor's place across restarts (by default only
        across restarts of the sensor inside this process)."""
        self.path = Path(path)
        self._poll_interval = poll_interval
        self._from_start = from_start
        self._sleep = sleep
        self._bookmark = bookmark if bookmark is not None else MemoryBookmark()
        self._max_backlog = max_backlog
        self.info = SensorInfo(
            channel,
            f"Lines appended to the log file {self.path}, counted by pattern.",
            Nature.AGGREGATABLE,
            parameters={"path": str(self.path), "window": format_duration(window),
                        "poll_interval": format_duration(poll_interval)},
            can_silence=can_silence,
            default_urgency=urgency,
            treatment=TreatmentParams(window=window),
        )

    async def run(self, emit: Emitter) -> None:
        follower = LogFollower(
            self.path, from_start=self._from_start, max_backlog=self._max_backlog,
            resume=LogPosition.from_dict(self._bookmark.load()),
        )
        sender = str(self.path)
        saved = None
        try:
            while True:
                for line in follower.read():
                    # Saved before it is emitted: if emitting makes the archive
                    # commit, the place committed is this line's, never an earlier one.
                    saved = self._save(line.position, saved)
                    emit(line.text, sender=sender, key=normalise_line(line.text))
                saved = self._save(follower.position(), saved)
                for note in follower.notes:  # what was skipped, with the place past it
                    emit(note, sender=sender, key=NOTE_KEY)
                follower.notes.clear()
                await self._sleep(self._poll_interval)
        finally:
            follower.close()

    def _save(self, position: LogPosition | None, saved: LogPosition | None
              ) -> LogPosition | None:
        if position is not None and position != saved:
            self._bookmark.save(position.as_dict())
            return position
        return saved
