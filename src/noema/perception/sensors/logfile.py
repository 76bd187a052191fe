"""The log-file sensor: follows a file across rotation, one event per line.

Lines are aggregatable: their key is the line with its variable parts
(timestamps, UUIDs, IP addresses, hex IDs, numbers) replaced by
placeholders, so "connection error to 10.0.0.3 after 512 ms" and
"connection error to 10.0.0.9 after 77 ms" are counted together.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from ..events import MAX_KEY, Nature, SensorInfo, TreatmentParams, Urgency
from ..hub import Emitter, Sleep
from ..timefmt import format_duration

MAX_LINE = 64 * 1024
READ_CHUNK = 1024 * 1024

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


class LogFollower:
    """Reads the complete new lines of a file, like `tail -F`.

    Survives rotation (the path now names another file: the old one is read
    to its end, then the new one from its start), truncation in place (read
    again from the start) and a file that does not exist yet.
    """

    def __init__(self, path: Path | str, *, from_start: bool = False) -> None:
        self.path = Path(path)
        self._from_start = from_start
        self._file = None
        self._inode: tuple[int, int] | None = None
        self._partial = b""
        self._first_open = True
        # Opened now, so "new lines" means lines written after this moment; a
        # file that appears later is read from its start.
        if not self._open():
            self._first_open = False

    def _open(self) -> bool:
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - kept open between polls
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            return False
        stat = os.fstat(handle.fileno())
        if self._first_open and not self._from_start:
            handle.seek(0, os.SEEK_END)
        self._first_open = False
        self._file, self._inode = handle, (stat.st_dev, stat.st_ino)
        return True

    def poll(self) -> list[str]:
        """The lines completed since the last poll (at most about READ_CHUNK bytes)."""
        if self._file is None and not self._open():
            return []
        lines = self._read()
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return lines  # rotated away, nothing new yet: keep the old file's tail
        assert self._file is not None
        current = (stat.st_dev, stat.st_ino)
        if current != self._inode:
            lines += self._read() + self._flush_partial()
            self._file.close()
            self._file = None
            if self._open():
                lines += self._read()
        elif stat.st_size < self._file.tell():
            self._file.seek(0)
            self._partial = b""
            lines += self._read()
        return lines

    def _read(self) -> list[str]:
        assert self._file is not None
        data = self._file.read(READ_CHUNK)
        if not data:
            return []
        chunks = (self._partial + data).split(b"\n")
        self._partial = chunks.pop()
        if len(self._partial) > MAX_LINE:  # a line with no end in sight is cut
            chunks.append(self._partial)
            self._partial = b""
        return [_decode(c) for c in chunks if c.strip()]

    def _flush_partial(self) -> list[str]:
        rest, self._partial = self._partial, b""
        return [_decode(rest)] if rest.strip() else []

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _decode(raw: bytes) -> str:
    return raw[:MAX_LINE].decode("utf-8", errors="replace").rstrip("\r")


class LogFileSensor:
    """Follows one log file; aggregatable by line pattern."""

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
    ) -> None:
        self.path = Path(path)
        self._poll_interval = poll_interval
        self._from_start = from_start
        self._sleep = sleep
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
        follower = LogFollower(self.path, from_start=self._from_start)
        sender = str(self.path)
        try:
            while True:
                for line in follower.poll():
                    emit(line, sender=sender, key=normalise_line(line))
                await self._sleep(self._poll_interval)
        finally:
            follower.close()
