"""Lines from a stream (a pipe, a file, a dumb terminal), each with where it
ends in the input, and how far the input reaches at any moment.

A thread reads the stream's descriptor itself, so every byte is either read
(counted) or still waiting in the kernel (`FIONREAD`): at the moment a
question is drawn, the chat learns the exact position of the input, and a
line that ends before it was entered before the question could be seen
(see `answers.py`). For a file, every line is there before anything is
drawn, so no line of a file ever answers a question.
"""

from __future__ import annotations

import asyncio
import codecs
import fcntl
import os
import select
import termios
import threading
from array import array
from dataclasses import dataclass
from typing import TextIO

from .answers import FAR, Prompts

CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Line:
    """A line without its end, and the position (byte offset) of its end."""

    text: str
    at: int


class StreamLines:
    """Reads `source` in a daemon thread (a blocked read never keeps the
    process alive) into a queue of `Line`s, None at the end of input."""

    def __init__(self, source: TextIO, loop: asyncio.AbstractEventLoop) -> None:
        self.lines: asyncio.Queue[Line | None] = asyncio.Queue()
        self._loop = loop
        self._lock = threading.Lock()  # held while bytes move from the kernel to `_read`
        self._read = 0  # bytes read from the descriptor so far
        try:
            self._fd: int | None = source.fileno()
        except (AttributeError, OSError, ValueError):  # an in-memory stream
            self._fd = None
        self._source = source
        self._encoding = getattr(source, "encoding", None) or "utf-8"

    def start(self) -> None:
        """Start reading."""
        target = self._read_fd if self._fd is not None else self._read_text
        threading.Thread(target=target, name="stdin", daemon=True).start()

    def horizon(self) -> int:
        """The position the input has reached now: every line entered so far
        ends before it."""
        if self._fd is None:
            return FAR  # an in-memory stream is whole from the start
        with self._lock:
            try:
                waiting = array("i", [0])
                fcntl.ioctl(self._fd, termios.FIONREAD, waiting, True)
            except OSError:  # cannot tell what waits: take all of it as typed already
                return FAR
            return self._read + waiting[0]

    def prompt_changed(self, prompts: Prompts, question: int | None) -> None:
        """A prompt written to the screen is drawn at once: the input stands
        at the horizon."""
        prompts.drawn(question, max(self.horizon(), prompts.last.first))

    def _put(self, line: Line | None) -> bool:
        try:
            self._loop.call_soon_threadsafe(self.lines.put_nowait, line)
        except RuntimeError:  # the chat is over and its loop closed
            return False
        return True

    def _read_fd(self) -> None:
        assert self._fd is not None
        decoder = codecs.getincrementaldecoder(self._encoding)(errors="replace")
        pending = b""
        start = 0  # the position of `pending`'s first byte
        while True:
            try:
                select.select([self._fd], [], [])
                with self._lock:
                    chunk = os.read(self._fd, CHUNK)
                    self._read += len(chunk)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                if pending:
                    self._put(Line(decoder.decode(pending, final=True), start + len(pending)))
                self._put(None)
                return
            pending += chunk
            while (end := pending.find(b"\n")) >= 0:
                text = decoder.decode(pending[:end], final=True)
                if not self._put(Line(text.removesuffix("\r"), start + end)):
                    return
                pending = pending[end + 1:]
                start += end + 1

    def _read_text(self) -> None:
        position = 0
        while True:
            try:
                text = self._source.readline()
            except (OSError, ValueError):
                text = ""
            if not text:
                self._put(None)
                return
            position += len(text.encode(self._encoding, errors="replace"))
            if not self._put(Line(text.removesuffix("\n"), position - 1)):
                return
