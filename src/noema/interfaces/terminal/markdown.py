"""Streamed Markdown, cut into blocks that can be rendered for good.

An answer arrives a few characters at a time, but Markdown can only be
rendered once a block is whole (a paragraph, a list, a fenced code block).
`MarkdownStream` holds the text and hands out each block as soon as a blank
line outside a code fence ends it; what is still being written stays
`pending`, for the screen to show as plain text until it is complete.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class MarkdownStream:
    """The blocks of one answer as its text streams in."""

    def __init__(self) -> None:
        self._pending = ""
        self._read = 0  # how much of _pending has been read line by line
        self._fence: str | None = None  # the open fence's marker, if inside one

    @property
    def pending(self) -> str:
        """The text of the block being written (not yet handed out)."""
        return self._pending

    def feed(self, delta: str) -> list[str]:
        """Take a piece of the answer; return the blocks it completed, in order."""
        self._pending += delta
        blocks: list[str] = []
        while (end := self._pending.find("\n", self._read)) >= 0:
            line = self._pending[self._read:end]
            self._read = end + 1
            self._track_fence(line)
            if not line.strip() and self._fence is None:
                block = self._pending[:end].strip("\n")
                if block.strip():
                    blocks.append(block)
                self._pending = self._pending[end + 1:]
                self._read = 0
        return blocks

    def _track_fence(self, line: str) -> None:
        match = _FENCE.match(line)
        if match is None:
            return
        marker = match.group(1)
        if self._fence is None:
            self._fence = marker
        elif marker[0] == self._fence[0] and len(marker) >= len(self._fence) \
                and not line.strip()[len(marker):].strip():
            self._fence = None

    def finish(self) -> str:
        """The answer ended: what was still pending, as the last block."""
        rest = self._pending.strip("\n")
        self._pending, self._read, self._fence = "", 0, None
        return rest
