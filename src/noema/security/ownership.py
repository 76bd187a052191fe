"""After a command: nothing it left is setuid, setgid or someone else's.

A file a command writes belongs to the person, and when the agent runs as
root the person is root: a setuid copy of a shell left in a workspace would
run as root for every local user who can reach it. The sandbox's system-call
filter refuses to set those bits (`seccomp.py`); this check is the second
line, and the only one when the person chose `sandbox = "none"`, where a
root command may also hand files to other users with `chown`.

Each writable root is watched (the change notifications of `changes.py`,
every folder but git's own, which the sandbox keeps read-only): after a
command, each path it created or changed is looked at, and each folder it
created or moved in is walked whole, by folder descriptors and without
following links. When the notifications cannot tell (their queue
overflowed, a folder moved, inotify is missing) the whole root is walked. A
regular file that is setuid or setgid, or anything owned by a user other
than the person, is made harmless in place: the two bits are cleared, and
the owner (and group) given back to the person. The person's own such files,
found by a walk before the first command, are left alone. Folders keep their
setgid bit, which only chooses the group of new files.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .changes import EVERYTHING, ChangeFeed, watch
from .policy import is_git_name

log = logging.getLogger(__name__)

_SET_ID = stat.S_ISUID | stat.S_ISGID
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# (device, inode, mode, owner): the same file in the same state
Key = tuple[int, int, int, int]
# (path, open parent folder, name, stat of the entry)
Suspect = tuple[Path, int, str, os.stat_result]


@dataclass(frozen=True, slots=True)
class Repaired:
    """One file a command left with rights it must not have, and what was done."""

    path: Path
    actions: tuple[str, ...]

    def describe(self, shown: str) -> str:
        return f"{shown}: {'; '.join(self.actions)}"


def _key(info: os.stat_result) -> Key:
    return (info.st_dev, info.st_ino, info.st_mode, info.st_uid)


def _suspect(info: os.stat_result, person: int) -> bool:
    if info.st_uid != person:
        return True
    return stat.S_ISREG(info.st_mode) and bool(info.st_mode & _SET_ID)


class OwnershipGuard:
    """Finds and repairs, in the writable roots, what a command made setuid,
    setgid or foreign."""

    def __init__(
        self,
        roots: Iterable[Path],
        skip: Iterable[Path] = (),
        *,
        person_uid: int | None = None,
        person_gid: int | None = None,
    ) -> None:
        self.roots = tuple(roots)
        self.skip = frozenset(Path(os.path.realpath(p)) for p in skip)  # the agent's data
        self.uid = os.geteuid() if person_uid is None else person_uid
        self.gid = os.getegid() if person_gid is None else person_gid
        self._feeds: dict[Path, ChangeFeed] = {}
        self._persons: set[Key] = set()  # found before the first command
        self._lock = threading.Lock()  # parallel commands share the feeds
        # The notifications hold a kernel instance each (128 per user by
        # default): given back when the guard goes, even if never closed.
        weakref.finalize(self, _close_feeds, self._feeds)

    def before(self) -> None:
        """Before a command: what changed until now is not its doing."""
        with self._lock:
            for root in self.roots:
                feed = self._feeds.get(root)
                if feed is None:
                    self._feeds[root] = feed = watch(root, self._skip_dir(root))
                    self._persons |= {_key(info) for _, _, _, info in self._walk(root)}
                feed.take()

    def after(self) -> list[Repaired]:
        """After a command: make harmless every suspect file it left; say what was done."""
        done: list[Repaired] = []
        with self._lock:
            for root in self.roots:
                feed = self._feeds.get(root)
                changed = EVERYTHING if feed is None else feed.take()
                if changed is EVERYTHING:
                    found = self._walk(root)
                else:
                    assert isinstance(changed, frozenset)
                    found = self._changed(root, sorted(changed))
                for path, folder, name, info in found:
                    if _key(info) in self._persons:
                        continue
                    try:
                        actions = self._fix(folder, name, info)
                    except OSError as exc:
                        actions = [f"could not be repaired ({exc.strerror or exc}); remove it"]
                    if actions:
                        done.append(Repaired(path, tuple(actions)))
                        log.warning("a command left %s: %s", path, "; ".join(actions))
        return done

    def close(self) -> None:
        with self._lock:
            _close_feeds(self._feeds)

    def _skip_dir(self, root: Path) -> Callable[[str], bool]:
        def skip(rel: str) -> bool:
            return is_git_name(rel.rsplit("/", 1)[-1]) or (root / rel) in self.skip

        return skip

    def _changed(self, root: Path, paths: list[str]) -> Iterator[Suspect]:
        """The suspects among the changed paths and below the changed folders."""
        try:
            top = os.open(root, _DIR_FLAGS)
        except OSError:
            return
        try:
            for rel in paths:
                parts = rel.split("/")
                folder = _descend(top, parts[:-1])
                if folder is None:
                    continue
                try:
                    yield from self._entry(root / rel, folder, parts[-1])
                finally:
                    if folder != top:
                        os.close(folder)
        finally:
            os.close(top)

    def _walk(self, root: Path) -> Iterator[Suspect]:
        """Every suspect below `root`."""
        try:
            top = os.open(root, _DIR_FLAGS)
        except OSError:
            return
        try:
            yield from self._below(root, top)
        finally:
            os.close(top)

    def _entry(self, path: Path, folder: int, name: str) -> Iterator[Suspect]:
        """`name` in the open `folder` if it is a suspect, and the suspects below it."""
        if path in self.skip:
            return
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return
        if _suspect(info, self.uid):
            yield path, folder, name, info
        if stat.S_ISDIR(info.st_mode):
            child = _open_child(folder, name, info)
            if child is not None:
                try:
                    yield from self._below(path, child)
                finally:
                    os.close(child)

    def _below(self, top: Path, top_fd: int) -> Iterator[Suspect]:
        """The suspects below the open folder `top`; each item's descriptor is
        valid until the next item. One descriptor per level of depth is open."""
        frames: list[tuple[Path, int, Iterator[str]]] = [(top, top_fd, _names(top_fd))]
        try:
            while frames:
                folder, fd, names = frames[-1]
                name = next(names, None)
                if name is None:
                    done = frames.pop()
                    if done[1] != top_fd:
                        os.close(done[1])
                    continue
                path = folder / name
                if path in self.skip:
                    continue
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                if _suspect(info, self.uid):
                    yield path, fd, name, info
                if stat.S_ISDIR(info.st_mode):
                    child = _open_child(fd, name, info)
                    if child is not None:
                        frames.append((path, child, _names(child)))
        finally:
            for _, fd, _ in frames:
                if fd != top_fd:
                    os.close(fd)

    def _fix(self, folder: int, name: str, listed: os.stat_result) -> list[str]:
        actions: list[str] = []
        if listed.st_uid != self.uid:
            # lchown never follows a link, so a swapped name changes only itself.
            os.chown(name, self.uid, self.gid, dir_fd=folder, follow_symlinks=False)
            actions.append(f"owned by uid {listed.st_uid}; given back to uid {self.uid}")
        if stat.S_ISREG(listed.st_mode) and listed.st_mode & _SET_ID:
            # By descriptor, checked to be the listed file: a mode set through
            # a name could land on whatever a link swapped in points to.
            handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
            try:
                opened = os.fstat(handle)
                if (opened.st_dev, opened.st_ino) != (listed.st_dev, listed.st_ino):
                    raise OSError(errno.ESTALE, "it changed while being checked")
                mode = stat.S_IMODE(opened.st_mode)
                os.chmod(f"/proc/self/fd/{handle}", mode & ~_SET_ID)
            finally:
                os.close(handle)
            bits = " and ".join(
                word for bit, word in ((stat.S_ISUID, "setuid"), (stat.S_ISGID, "setgid"))
                if listed.st_mode & bit
            )
            actions.append(f"was {bits}; the bit was removed")
        return actions


def _names(fd: int) -> Iterator[str]:
    try:
        return iter(os.listdir(fd))
    except OSError:
        return iter(())


def _open_child(parent: int, name: str, listed: os.stat_result) -> int | None:
    """The folder the listing showed, opened from its parent, or None."""
    try:
        child = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError:
        return None
    opened = os.fstat(child)
    if (opened.st_dev, opened.st_ino) != (listed.st_dev, listed.st_ino):
        os.close(child)  # swapped since it was listed
        return None
    return child


def _descend(top: int, parts: list[str]) -> int | None:
    """The folder `parts` names below the open `top`, opened one component at
    a time without following links (`top` itself when `parts` is empty)."""
    folder = top
    for name in parts:
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=folder)
        except OSError:
            child = None
        if folder != top:
            os.close(folder)
        if child is None:
            return None
        folder = child
    return folder


def _close_feeds(feeds: dict[Path, ChangeFeed]) -> None:
    for feed in feeds.values():
        feed.close()
    feeds.clear()
