"""Which files of a workspace changed since we last looked.

Versioning must record the person's edits before each agent write. Scanning
a large workspace for every write is too slow, so the Linux kernel is asked
(inotify) to queue the name of every file that changes. The queue is read
without blocking right before a snapshot: anything that happened before
that moment is already in it. When the kernel drops events (queue overflow),
when a folder moves, or when inotify is unavailable, the answer is
EVERYTHING and the caller scans the whole tree.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

_IN_MODIFY = 0x2
_IN_ATTRIB = 0x4
_IN_CLOSE_WRITE = 0x8
_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_IN_ISDIR = 0x40000000
_WATCH_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_ONLYDIR
    | _IN_DONT_FOLLOW
)
_EVENT = struct.Struct("iIII")
_MAX_PENDING = 20_000
# A process that changes files without pause (a build, a runaway loop) must
# not keep the reader draining forever: past this many bytes of events, the
# queue is dropped and the answer is a full scan.
_MAX_DRAIN_BYTES = 4 * 1024 * 1024


class _Everything:
    """Sentinel: the whole tree may have changed."""

    def __repr__(self) -> str:
        return "EVERYTHING"


EVERYTHING = _Everything()
Changed = frozenset[str] | _Everything


class ChangeFeed(Protocol):
    """Tells which paths (relative, '/'-separated) changed since the last call."""

    def take(self) -> Changed: ...

    def close(self) -> None: ...


class AlwaysRescan:
    """The feed when nothing better is available: every call asks for a full scan."""

    def take(self) -> Changed:
        return EVERYTHING

    def close(self) -> None:
        pass


class InotifyFeed:
    """Watches every folder of a tree that `skip_dir` does not exclude."""

    def __init__(self, root: Path, skip_dir: Callable[[str], bool]) -> None:
        self._root = root
        self._skip = skip_dir
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = -1
        self._dirs: dict[int, str] = {}
        self._pending: set[str] = set()
        self._stale = True  # the first answer is always a full scan
        self._broken = False
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._dirs.clear()
        self._watch_tree("")

    def _watch_tree(self, top: str) -> None:
        stack = [top]
        while stack:
            rel = stack.pop()
            path = os.fsencode(self._root / rel) if rel else os.fsencode(self._root)
            wd = self._libc.inotify_add_watch(self._fd, path, _WATCH_MASK)
            if wd < 0:
                code = ctypes.get_errno()
                if code in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                    continue  # gone or unreadable meanwhile: nothing of it can be staged
                raise OSError(code, f"cannot watch {self._root / rel}")
            self._dirs[wd] = rel
            try:
                with os.scandir(self._root / rel) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False):
                            child = f"{rel}/{entry.name}" if rel else entry.name
                            if not self._skip(child):
                                stack.append(child)
            except OSError:
                continue

    def take(self) -> Changed:
        """Drain the kernel's queue and return what changed since the last call."""
        if self._broken:
            return EVERYTHING
        try:
            self._drain()
        except OSError as exc:
            # Typically the per-user watch limit: full scans are slower, never wrong.
            log.warning("watching %s failed (%s); falling back to full scans", self._root, exc)
            self._broken = True
            self.close()
            return EVERYTHING
        if self._stale or len(self._pending) > _MAX_PENDING:
            self._stale = False
            self._pending.clear()
            return EVERYTHING
        changed = frozenset(self._pending)
        self._pending.clear()
        return changed

    def _drain(self) -> None:
        new_dirs: set[str] = set()
        rebuild = False
        drained = 0
        # Once a rebuild is due the rest of the queue says nothing more (the
        # answer is a full scan), so reading stops there.
        while not rebuild:
            if drained >= _MAX_DRAIN_BYTES:
                rebuild = True
                break
            try:
                buffer = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                break
            drained += len(buffer)
            rebuild = self._parse(buffer, new_dirs)
        if rebuild:
            self._stale = True
            self._start()
            return
        # Watched once the queue is read: a storm of moves names each folder
        # many times over.
        for rel in sorted(new_dirs):
            if not self._skip(rel):
                self._watch_tree(rel)

    def _parse(self, buffer: bytes, new_dirs: set[str]) -> bool:
        """Note the changed names of a buffer of events; True when the watches
        must be rebuilt."""
        offset = 0
        while offset < len(buffer):
            wd, mask, _cookie, length = _EVENT.unpack_from(buffer, offset)
            raw = buffer[offset + _EVENT.size : offset + _EVENT.size + length]
            offset += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                return True
            base = self._dirs.get(wd)
            if base is None:
                continue
            if mask & _IN_IGNORED:
                del self._dirs[wd]
                continue
            name = os.fsdecode(raw.split(b"\0", 1)[0])
            if not name:
                continue
            rel = f"{base}/{name}" if base else name
            self._pending.add(rel)
            if mask & _IN_ISDIR:
                if mask & _IN_MOVED_FROM:
                    return True  # watches below it now carry the old names
                if mask & (_IN_CREATE | _IN_MOVED_TO):
                    new_dirs.add(rel)
        return False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def watch(root: Path, skip_dir: Callable[[str], bool]) -> ChangeFeed:
    """An inotify feed for `root`, or a full-scan feed where inotify cannot serve."""
    try:
        return InotifyFeed(root, skip_dir)
    except (OSError, AttributeError) as exc:
        log.info("no change notifications for %s (%s); every snapshot scans it", root, exc)
        return AlwaysRescan()
