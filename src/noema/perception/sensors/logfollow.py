"""Following a log file like `tail -F`: complete new lines, across rotation, resumable.

**Reading.** The follower reads in slices (at most `SLICE_BYTES` each) and
says whether more is waiting; the sensor (`logfile.py`) reads slice after slice
and waits only once the file is read to its end. A last line without its
newline yet is kept back until it is complete.

**Rotation.** Files are read by their open descriptor, so a file renamed or
deleted under the follower is still read to its end before it moves on.
Checked at each end of file, that is each time the sensor reads again after
a change notification (or a poll, where there is no notification):

- rename and create, or delete and re-create (the path names another file):
  the old file is read to its end, then any file rotated away between two
  looks (below), then the new file from its start;
- copytruncate, or a rewrite in place (same file, but its first bytes are no
  longer the ones read, or it is shorter than the place): the copy is found
  among the rotated files by those first bytes and read from the place on,
  then the file from its start. Without a copy (a plain truncation), the
  file is read again from its start.

A look cannot see a file that lived and was rotated away between two looks
unless it is still in the folder: such files are looked for among the
numbered rotated names (`app.log.1`, `app.log.2`, ...) as the ones the
follower has never seen (by inode and first bytes: inodes are reused), and
read whole, oldest first (by the time last written, then the higher number).
Compressed rotations and dated names (`app.log-20260101`) are not searched.
A file deleted, or pushed out of the kept rotations, between two looks is lost.

**Resuming.** The sensor keeps its place in a bookmark (`LogPosition`: the
file's device and inode, a digest of its first bytes, and the offset just
after the last complete line read). The place after a line is saved before
the line is emitted, so the archive commits it together with the line and
never ahead of it. When the sensor starts again (after a crash, or when the
agent restarts) it continues from there:

- the same file (same inode and first bytes, not shorter than the offset):
  from the offset;
- the file was rotated while the sensor was not reading and the old one is
  still in the same folder (found by inode and first bytes; after a
  copytruncate, its numbered copy by first bytes): the rest of the old file,
  the numbered files rotated after it (lower numbers, written later), then
  the new file from its start;
- otherwise (the old file deleted or compressed, or the file rewritten in
  place): the file at the path from its start, with a note that lines
  written to the old file may be missing.

Catching up is bounded: at most `max_backlog` bytes (8 MiB by default) are
read back in each of those files. The older part is skipped, from a line
start, and a note event (key `noema:sensor-note`) says how much was left out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import accumulate
from operator import add
from pathlib import Path
from typing import Literal

from .logfiles import (
    Ident,
    LogPosition,
    OpenFile,
    digest,
    find_rotated,
    head_of,
    line_start,
    matches_saved,
    open_siblings,
    rotated_after,
)

MAX_LINE = 64 * 1024
SLICE_BYTES = 1024 * 1024
DEFAULT_MAX_BACKLOG = 8 * 1024 * 1024
MAX_KNOWN = 4096  # rotated files remembered as read

Where = Literal["start", "end", "capped"]
"""Where a file is opened: its start, its end, or its last `max_backlog` bytes."""


@dataclass(frozen=True, slots=True)
class LogSlice:
    """The complete lines of one read, in order, all from one file."""

    lines: list[str]
    ends: list[int]  # the offset just after each line
    file: LogPosition | None  # the file they come from (at its place before them)

    def position(self, index: int) -> LogPosition:
        """The follower's place just after line `index`."""
        file = self.file
        assert file is not None
        return LogPosition(file.path, file.device, file.inode, self.ends[index], file.head,
                           file.head_size)


_NOTHING = LogSlice([], [], None)


class LogFollower:
    """Reads the complete new lines of a file, like `tail -F`, and knows its place.

    Call `read` for the next slice of lines; `more` then says whether more
    is waiting (read again) or the file is read to its end (wait). Survives
    the rotations and rewrites of the module docstring and a file that does
    not exist yet. Given the place it stood before (`resume`), it continues
    from there, within `max_backlog` bytes a file.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        from_start: bool = False,
        resume: LogPosition | None = None,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
        slice_bytes: int = SLICE_BYTES,
    ) -> None:
        if max_backlog < 0:
            raise ValueError("max_backlog is a number of bytes, 0 or more")
        if slice_bytes <= MAX_LINE:
            raise ValueError("a slice must hold more than the longest line (MAX_LINE)")
        self.path = Path(path)
        self.max_backlog = max_backlog
        self.notes: list[str] = []  # what the sensor should say about its resumption
        self.more = False  # the last read stopped short of the end: read again at once
        self._slice_bytes = slice_bytes
        self._file: OpenFile | None = None
        self._next: list[OpenFile] = []  # to read after `_file`, in this order
        # Rotated files read already, or there before: (first bytes counted, their digest).
        self._known: dict[Ident, tuple[int, str]] = {}
        for _, f in open_siblings(self.path):
            self._remember(f)
            f.close()
        if resume is not None and self._resume(resume):
            return
        # Opened now, so "new lines" means lines written after this moment; a
        # file that appears later is read from its start.
        self._file = self._open(self.path, "start" if from_start else "end")

    # -- where it stands -----------------------------------------------------

    def position(self) -> LogPosition | None:
        """The place after the last complete line read (None with no file open)."""
        f = self._file
        if f is None:
            return None
        return LogPosition(str(self.path), f.ident[0], f.ident[1], f.offset, f.head, f.head_size)

    # -- opening ---------------------------------------------------------------

    def _open(self, path: Path, where: Where) -> OpenFile | None:
        """The file at `path` from its "start", its "end", or "capped": the
        start, or the last `max_backlog` bytes of a bigger file."""
        f = OpenFile.open(path)
        if f is None:
            return None
        if where == "end":
            f.offset = f.size()
        elif where == "capped":
            f.offset = self._catch_up_from(f, path, 0)
        return f

    def _resume(self, saved: LogPosition) -> bool:
        """Continue from a saved place; False if it names another path."""
        if saved.path != str(self.path):
            return False
        if matches_saved(self.path, saved) and (f := self._reopen(self.path, saved)):
            self._file = f
            return True
        rotated = find_rotated(self.path, saved)
        if rotated is not None and (f := self._reopen(rotated, saved, same_file=False)):
            self._file = f
            later = rotated_after(self.path, rotated)
            self._next = [g for p in later if (g := self._open(p, "capped"))]
            if (current := self._open(self.path, "capped")) is not None:
                self._next.append(current)
            return True
        self.notes.append(
            f"The log file {self.path} was replaced while this sensor was not reading it, "
            f"and the file it was reading is gone: lines written to that file after byte "
            f"{saved.offset} may be missing. Reading the current file from its start."
        )
        # If there is no file yet, it is read from its start when it appears.
        self._file = self._open(self.path, "capped")
        return True

    def _reopen(self, path: Path, saved: LogPosition, *, same_file: bool = True
                ) -> OpenFile | None:
        """The saved file at `path`, at the saved place (within the backlog bound).
        A copy (`same_file` False) need only hold the same text."""
        f = OpenFile.open(path)
        if f is None:
            return None
        same = f.ident == (saved.device, saved.inode)
        if f.size() < saved.offset or not (same if same_file else same or f.holds_text_of(saved)):
            f.close()  # replaced between the look and the open
            return None
        f.offset = self._catch_up_from(f, path, saved.offset)
        return f

    def _catch_up_from(self, f: OpenFile, path: Path, offset: int) -> int:
        """Where to read `f` from to catch up from `offset`: at most `max_backlog`
        back from the end, at a line start; a note counts what is skipped."""
        size = f.size()
        if size - offset <= self.max_backlog:
            return offset
        start = line_start(f.fd, size - self.max_backlog, size)
        self.notes.append(
            f"{_size(start - offset)} of {path} written while this sensor was not "
            f"reading were skipped: it catches up on at most {_size(self.max_backlog)} of a "
            "file. The skipped lines are still in the file."
        )
        return start

    # -- reading ---------------------------------------------------------------

    def poll(self) -> list[str]:
        """Every complete line there is to read now, slice after slice."""
        lines = list(self.read().lines)
        while self.more:
            lines += self.read().lines
        return lines

    def read(self) -> LogSlice:
        """The complete lines of the next slice (at most `slice_bytes` read);
        sets `more`."""
        f = self._file
        if f is None:
            f = self._file = self._open(self.path, "start")
            if f is None:
                self.more = False
                return _NOTHING
        data = f.read(self._slice_bytes)
        if f.head_size == 0 and data and self._at_path(f) and (found := self._unseen(f)):
            # Its first text since it was empty: copies made of the text it had
            # in between (copytruncate) hold older lines, so they are read first.
            self._next = [*found[1:], f, *self._next]
            self._file = found[0]
            self.more = True
            return _NOTHING
        if not (f.takes_head_from(data) and f.head_holds()):
            # Rewritten since it was opened: what was just read may be the new
            # text at the old place, so it is dropped and read again properly.
            self._rewritten(f)
            self.more = True
            return _NOTHING
        here = self.position()
        lines, ends, cut = _lines_of(data, f.offset)
        f.offset += cut
        rest = data[cut:]
        if len(rest) > MAX_LINE:  # a line with no end in sight is cut
            f.offset += len(rest)
            lines.append(_decode(rest))
            ends.append(f.offset)
            self.more = True
        else:
            self.more = len(data) == self._slice_bytes or self._at_end(f, rest, lines, ends)
        return LogSlice(lines, ends, here)

    def _at_end(self, f: OpenFile, rest: bytes, lines: list[str], ends: list[int]) -> bool:
        """`f` is read to its end (`rest` after its last newline): move on to
        the next file, or look at the path for a rotation or rewrite. True if
        there is more to read now."""
        if not self._next:
            return self._look(f)
        if rest and not rest.isspace():  # the file is done: its last line ends here
            f.offset += len(rest)
            lines.append(_decode(rest))
            ends.append(f.offset)
        self._finish(f)
        self._file = self._next.pop(0)
        return True

    def _look(self, f: OpenFile) -> bool:
        """At the end of the file at the path: has it been rotated or rewritten?"""
        try:
            stat = os.stat(self.path)
        except OSError:
            return False  # rotated away and nothing new yet: the old file may still grow
        if (stat.st_dev, stat.st_ino) != f.ident:  # rename or delete, then create
            new = self._open(self.path, "start")
            if new is None:
                return False
            self._next = [*self._unseen(new), new]
            return True
        if f.size() < f.offset:  # shorter: truncated (copytruncate) or rewritten
            self._rewritten(f)
            return True
        if f.head_size == 0 and (found := self._unseen(f)):
            # Nothing of it read yet: any copy made since (copytruncate) is unread.
            self._next = [*found[1:], f, *self._next]
            self._file = found[0]
            return True
        return False

    def _at_path(self, f: OpenFile) -> bool:
        try:
            stat = os.stat(self.path)
        except OSError:
            return False
        return (stat.st_dev, stat.st_ino) == f.ident

    def _rewritten(self, f: OpenFile) -> None:
        """`f` no longer holds the text read: read the rest of that text from
        its copy if one was made (copytruncate), then `f` from its start."""
        was = LogPosition(str(self.path), *f.ident, f.offset, f.head, f.head_size)
        # Its new first bytes, taken before the look for copies: a copy of
        # this new text made during the look is then known by them later.
        head = head_of(f.fd)
        found = self._unseen(f, copy_of=was)
        f.offset = 0
        f.head, f.head_size = head
        if found:
            self._next = [*found[1:], f, *self._next]
            self._file = found[0]

    def _unseen(self, current: OpenFile, copy_of: LogPosition | None = None
                ) -> list[OpenFile]:
        """The rotated files that appeared since the last look and were never
        read, oldest first, opened; the copy of `copy_of`'s text opened at its place.

        Skipped: files read before or there from the start, empty ones, and a
        copy of `current` still being made (it will be found when complete)."""
        held = {g.ident for g in (self._file, *self._next, current) if g is not None}
        siblings = open_siblings(self.path)
        # If `current` was itself rotated meanwhile, the files rotated after it
        # (lower numbers) are left for the look at its end.
        mine = min((n for n, g in siblings if g.ident == current.ident), default=None)
        found: list[tuple[int, OpenFile]] = []
        for index, g in siblings:
            if g.ident in held or (mine is not None and index < mine) or self._is_known(g):
                g.close()
            elif copy_of is not None and g.holds_text_of(copy_of):
                g.offset = copy_of.offset
                found.append((index, g))
            # `current` is read after `g`: a copy of it still being made
            # begins like it, since it is cut only once the copy is done.
            elif g.head_size == 0 or g.starts_like(current):
                g.close()
            else:
                found.append((index, g))
        # Oldest first: by when last written, then by number (logrotate's
        # `app.log.2` is older than `app.log.1`).
        found.sort(key=lambda pair: (os.fstat(pair[1].fd).st_mtime_ns, -pair[0]))
        for _, g in found:
            self._remember(g)
        return [g for _, g in found]

    def _remember(self, f: OpenFile) -> None:
        """Count `f` as read. Forgotten oldest first past a bound, which only
        matters in a folder of thousands of rotations."""
        self._known.pop(f.ident, None)
        self._known[f.ident] = (f.head_size, f.head)
        while len(self._known) > MAX_KNOWN:
            del self._known[next(iter(self._known))]

    def _is_known(self, f: OpenFile) -> bool:
        """Whether `f` was read before or was there from the start (the same
        inode with the same first bytes: an inode can be reused)."""
        known = self._known.get(f.ident)
        if known is None:
            return False
        size, first = known
        return digest(os.pread(f.fd, size, 0)) == first

    def _finish(self, f: OpenFile) -> None:
        f.head_holds()  # takes in the first bytes read since the last look
        self._remember(f)
        f.close()

    def close(self) -> None:
        """Let go of every file held."""
        for f in (self._file, *self._next):
            if f is not None:
                f.close()
        self._file, self._next = None, []


def _lines_of(data: bytes, start: int) -> tuple[list[str], list[int], int]:
    """The complete lines of `data` but the blank ones, each with the offset
    just after it (`data` being at `start`), and where the last one ends in it."""
    cut = data.rfind(b"\n") + 1
    if data.isascii() and b"\r" not in data:
        # The usual case, done in a few passes over the whole slice: in ASCII
        # a character is a byte, so the lengths of the text give the offsets.
        lines = data.decode("ascii").split("\n")
        lines.pop()  # after the last newline
        lengths = list(map(len, lines))
        if lines and max(lengths) <= MAX_LINE and "" not in lines and not any(
                map(str.isspace, lines)):
            return lines, list(map(add, accumulate(lengths),
                                   range(start + 1, start + 1 + len(lines)))), cut
    pieces = data[:cut].split(b"\n")
    pieces.pop()
    texts, ends, at = [], [], start
    for piece in pieces:
        at += len(piece) + 1
        if piece and not piece.isspace():
            texts.append(_decode(piece))
            ends.append(at)
    return texts, ends, cut


def _decode(raw: bytes) -> str:
    if len(raw) > MAX_LINE:
        raw = raw[:MAX_LINE]
    return raw.decode("utf-8", errors="replace").rstrip("\r")


def _size(count: int) -> str:
    if count < 1024 * 1024:
        return f"{count / 1024:.0f} KiB" if count >= 1024 else f"{count} bytes"
    return f"{count / (1024 * 1024):.1f} MiB"
