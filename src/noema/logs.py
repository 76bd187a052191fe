"""Where log records go: the agent's log file in full, the person's terminal in brief.

The log file (rotated, so it never grows without bound) receives every
record with its traceback. The terminal receives only warnings and errors,
each on one line and never with a traceback: the person reads a chat there,
not a debugger. `--verbose` lowers the terminal's threshold, not its manners.

Neither handler ever complains about itself: when the log file cannot be
written (a full disk, a folder gone read-only) the record is dropped from the
file and the terminal line still appears; logging's own "--- Logging error
---" report, a traceback on stderr, is never printed.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import TextIO

FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_LOG_BYTES = 5 * 1024 * 1024
KEPT_LOGS = 3

# HTTP client logs can carry headers; they stay quiet unless asked.
_NOISY = ("httpx", "httpcore", "openai", "anthropic")

SHOWN = {"shown": True}
"""`extra=` for a record the person was already told about another way (a
chat notice): it goes to the file only, so the terminal does not say it twice."""


def _not_shown(record: logging.LogRecord) -> bool:
    return not getattr(record, "shown", False)


class OneLine(logging.Formatter):
    """A record as one terminal line: level and message, no traceback, no newlines."""

    def format(self, record: logging.LogRecord) -> str:
        text = " ".join(record.getMessage().split())
        return f"noema: {record.levelname.lower()}: {text}"


class _TerminalHandler(logging.StreamHandler):
    show: Callable[[str], None] | None = None  # see `terminal_lines`

    def emit(self, record: logging.LogRecord) -> None:
        show = self.show
        if show is None:
            super().emit(record)
            return
        try:
            show(self.format(record))
        except Exception:  # noqa: BLE001  (the chat is closing: the file has it)
            pass

    def handleError(self, record: logging.LogRecord) -> None:
        pass  # a closed terminal has nobody to tell


@contextlib.contextmanager
def terminal_lines(show: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, the terminal's log lines go to `show` instead of
    straight to the stream: a chat shows them as its own notices, never in
    the middle of an answer being written. `show` may be called from any
    thread."""
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, _TerminalHandler)]
    for handler in handlers:
        handler.show = show
    try:
        yield
    finally:
        for handler in handlers:
            handler.show = None


class _FileHandler(RotatingFileHandler):
    def handleError(self, record: logging.LogRecord) -> None:
        # The file cannot take the record (full disk, gone folder): the
        # record is lost from the file; the terminal must not get a traceback.
        if self.stream is not None:
            try:
                self.stream.close()
            except OSError:
                pass
            self.stream = None  # type: ignore[assignment]  # reopened on the next record


def setup(log_file: Path | None, *, verbose: bool = False, terminal: TextIO | None = None) -> None:
    """Route every record to `log_file` (if given) and brief lines to the terminal.

    Replaces whatever logging set-up was there before, so it may be called
    once per command.
    """
    handlers: list[logging.Handler] = []
    if log_file is not None:
        to_file = _FileHandler(log_file, maxBytes=MAX_LOG_BYTES, backupCount=KEPT_LOGS,
                               encoding="utf-8", delay=True)
        to_file.setFormatter(logging.Formatter(FILE_FORMAT))
        handlers.append(to_file)
    to_terminal = _TerminalHandler(terminal or sys.stderr)
    to_terminal.setLevel(logging.DEBUG if verbose else logging.WARNING)
    to_terminal.setFormatter(OneLine())
    to_terminal.addFilter(_not_shown)
    handlers.append(to_terminal)
    level = logging.DEBUG if verbose else (logging.INFO if log_file else logging.WARNING)
    logging.basicConfig(level=level, handlers=handlers, force=True)
    for noisy in _NOISY:
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.WARNING)
