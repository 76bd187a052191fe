"""`noema demo` run for the first-run page, its transcript streamed to the browser.

The demo runs as its own process, the same command a person would type: it
owns a temporary folder and its own event loop, kills a child of its own
with SIGKILL in one chapter, and must never share the server's loop or
folders. Its output is read as it is written and kept in order; each page
follows it from any point (a reconnecting page says where it stopped), so
what the page shows is the transcript the terminal would show.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

DEMO_PACE = 0.01  # seconds between streamed words: as `noema demo` by default
MAX_OUTPUT = 1 << 20  # characters kept; the demo writes some 30 KB
READ_SIZE = 4096


def demo_command(pace: float = DEMO_PACE) -> list[str]:
    """`noema demo`, run by this Python."""
    return [sys.executable, "-m", "noema", "demo", "--pace", str(pace)]


@dataclass(frozen=True, slots=True)
class Piece:
    """A piece of the transcript (`text`), or its end (`code`, the exit status)."""

    index: int  # the pieces before this one; a page resumes after it
    text: str = ""
    code: int | None = None


@dataclass
class DemoRun:
    """At most one demo at a time; a finished one is replaced by the next start."""

    command: Sequence[str] = field(default_factory=demo_command)
    pieces: list[str] = field(default_factory=list)
    code: int | None = None  # the exit status, once it ended
    _process: asyncio.subprocess.Process | None = None
    _reader: asyncio.Task[None] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _size: int = 0

    @property
    def running(self) -> bool:
        return self._reader is not None and not self._reader.done()

    async def start(self) -> bool:
        """Start the demo; False when one runs already (the page follows that one)."""
        if self.running:
            return False
        self.pieces, self.code, self._size = [], None, 0
        self._process = await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.info("the demo started (pid %d)", self._process.pid)
        self._reader = asyncio.create_task(self._read(self._process), name="web:demo")
        self._wake()
        return True

    async def stop(self) -> None:
        """End a running demo and its children (it runs in a process group of its own)."""
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(self._reader), 5)
        if process is not None and process.returncode is None:  # it ignored the request
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()

    async def follow(self, after: int = 0) -> AsyncIterator[Piece]:
        """The transcript's pieces from index `after` on, as they are written, then
        its end. Nothing when no demo was started."""
        index = after
        while True:
            changed = self._changed
            while index < len(self.pieces):
                index += 1
                yield Piece(index, self.pieces[index - 1])
            if self.code is not None:
                yield Piece(index, code=self.code)
                return
            if self._reader is None:
                return
            await changed.wait()

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            while chunk := await process.stdout.read(READ_SIZE):
                self._keep(decoder.decode(chunk))
            self._keep(decoder.decode(b"", final=True))
        finally:
            self.code = await process.wait()
            log.info("the demo ended with status %d", self.code)
            self._wake()

    def _keep(self, text: str) -> None:
        if not text or self._size >= MAX_OUTPUT:
            return
        text = text[: MAX_OUTPUT - self._size]
        self._size += len(text)
        self.pieces.append(text)
        self._wake()

    def _wake(self) -> None:
        # Followers wait on the event of the moment; a fresh one for the next change.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
