"""The files of the system folders that only root (or a group) may read.

A sandbox started by root keeps root's kernel uid (see `sandbox.py` for why),
so the kernel lets it read whatever root's owner bits allow: `/etc/shadow`,
`/etc/ssl/private`, ssh host keys, a database's password file. The sandbox
masks each such entry; this module finds them: every file that others may
not read and every folder that others may not list or enter (masked whole,
so nothing below it needs looking at). Links are left alone: what they point
to is judged where it lives.

Walking `/usr` and `/etc` takes a second or more, so it is done in a worker
thread started as early as possible, cached, and redone in the background
every ten minutes. The small folders where keys and passwords appear
(`/etc`, `/opt`, `/srv`) are also watched (inotify): a change there since
the last command has that folder walked again before the next one, so a
root-only file created meanwhile is masked at once. `/usr` changes with
packages, which rarely bring a file only root may read; its fifteen thousand
folders are left to the ten-minute walk. What the masks miss (a file made
while a command runs, or in `/usr` since the last walk) the open guard
refuses when the command opens it (`open_guard.py`).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from .changes import ChangeFeed, watch

_OTHERS_READ = stat.S_IROTH
_OTHERS_LIST = stat.S_IROTH | stat.S_IXOTH

_REFRESH_S = 600.0  # packages and keys come and go while the agent runs

_WATCHED = ("/etc", "/opt", "/srv")

_lock = threading.Lock()
_found: dict[tuple[str, ...], tuple[float, tuple[Path, ...]]] = {}
_refreshing: set[tuple[str, ...]] = set()
_feeds: dict[str, ChangeFeed] = {}  # the watched folders, once walked


def root_only(folders: Iterable[str]) -> tuple[Path, ...]:
    """The entries below `folders` that an unprivileged user could not read.

    The first call walks the folders (callers wait); later calls answer from
    the cache at once, and one older than ten minutes is walked again in the
    background.
    """
    key = tuple(folders)
    with _lock:
        if key not in _found:
            _watch(key)
            _found[key] = (time.monotonic(), _scan(key))
        elif _changed(key):
            _found[key] = (_found[key][0], _scan(key))
        when, paths = _found[key]
        if time.monotonic() - when > _REFRESH_S and key not in _refreshing:
            _refreshing.add(key)
            _start(_refresh, key)
        return paths


def _watch(folders: tuple[str, ...]) -> None:
    """Watch the small folders among `folders` (before walking them: what
    changes during the walk is then seen at the next call)."""
    for folder in folders:
        if folder in _WATCHED and folder not in _feeds and os.path.isdir(folder):
            base = Path(folder)
            feed = watch(base, lambda rel, base=base: not _listable(base / rel))
            feed.take()  # its first answer is always "everything"
            _feeds[folder] = feed


def _changed(folders: tuple[str, ...]) -> bool:
    """Whether a watched folder among `folders` changed since the last look."""
    changed = False
    for folder in folders:
        feed = _feeds.get(folder)
        if feed is not None and feed.take():
            changed = True  # (every feed is drained, so the next look starts afresh)
    return changed


def _listable(folder: Path) -> bool:
    try:
        mode = os.lstat(folder).st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) and mode & _OTHERS_LIST == _OTHERS_LIST


def prefetch(folders: Iterable[str]) -> None:
    """Start finding them in the background, so the first command does not wait."""
    _start(root_only, tuple(folders))


def _start(target: Callable[[tuple[str, ...]], object], key: tuple[str, ...]) -> None:
    threading.Thread(target=target, args=(key,), name="noema-root-files", daemon=True).start()


def _refresh(key: tuple[str, ...]) -> None:
    try:
        paths = _scan(key)
        with _lock:
            _found[key] = (time.monotonic(), paths)
    finally:
        with _lock:  # a failed walk is tried again at the next call
            _refreshing.discard(key)


def _scan(folders: tuple[str, ...]) -> tuple[Path, ...]:
    found: list[Path] = []
    for folder in folders:
        try:
            mode = os.stat(folder).st_mode
        except OSError:
            continue
        if mode & _OTHERS_LIST != _OTHERS_LIST:
            found.append(Path(folder))
        else:
            _walk(folder, found)
    return tuple(found)


def _walk(folder: str, found: list[Path]) -> None:
    try:
        entries = os.scandir(folder)
    except OSError:
        found.append(Path(folder))  # unreadable to us: certainly not for others
        return
    with entries:
        try:
            for entry in entries:
                _look_at(entry, found)
        except OSError:
            # Reading the folder failed half way: hide all of it, to be safe.
            found.append(Path(folder))


def _look_at(entry: os.DirEntry[str], found: list[Path]) -> None:
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError:
        return  # gone meanwhile
    if stat.S_ISLNK(mode):
        return
    if stat.S_ISDIR(mode):
        if mode & _OTHERS_LIST != _OTHERS_LIST:
            found.append(Path(entry.path))
        else:
            _walk(entry.path, found)
    elif not mode & _OTHERS_READ:
        found.append(Path(entry.path))
