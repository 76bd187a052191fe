"""Bringing a git index in line with the files of a workspace.

libgit2's own `add_all` stops at a folder that holds another repository,
hashes more than it must and reads by path; this walker skips every `.git`,
honours the ignore files, keeps tracked files even inside ignored folders,
and hashes a file only when its size, times or inode changed since it was
last seen.

Nothing is read by path, because a shell command (or a race with a tool)
can swap a folder or a file for a link between a check and a read. The walk
holds a descriptor of each folder, opened without following links from the
root down; it lists that folder and opens each file relative to it, again
without following links, and reads only if what it opened is the very file
the listing showed (device and inode). A symbolic link is recorded as a link
(mode 120000, its text), never as what it points to, and the walk never
crosses into another file system.

A path that cannot be recorded (a name git refuses, a hard-linked or special
file, a file above the size limit, a mount, a file that changed while it was
being read) is left out and the rest is recorded; `take_skipped` names it.
So is what the process knows for a secret or agents' data by identity
(`policy.KNOWN`: a secret renamed or given another name keeps being one) and
every folder laid out as an agent's data (`policy.is_agent_home`), whatever
its name.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import pygit2

from .changes import EVERYTHING, Changed
from .fsafe import TEMP_SUFFIX, unsafe_file
from .history import Skipped
from .policy import AGENTS_FOLDER, KNOWN, holds_agents, is_agent_home

log = logging.getLogger(__name__)

LINK_MODE = 0o120000
FILE_MODE = 0o100644
EXEC_MODE = 0o100755
# A file modified this recently may change again within the same timestamp
# tick without its stat changing, so its hash is not remembered yet.
_RACY_NS = 2_000_000_000
_CACHE_NAME = "noema-stat-cache.json"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the listing must not hang the recorder.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NO_OBJECT = pygit2.Oid(hex="0" * 40)

REFUSED_NAME = "is a name git refuses (it reads as .git)"
CHANGED_MEANWHILE = "changed while it was being recorded (the next version will hold it)"
OTHER_FILE_SYSTEM = "is another file system mounted inside the folder, so it is left alone"
AGENTS_DATA = "holds the data of Noema agents (maybe another person's), which is never versioned"

Key = tuple[int, ...]


def _key(info: os.stat_result) -> Key:
    """What identifies one state of one file: a swapped or rewritten file
    never has the key of the file it replaced."""
    return (
        info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns,
        info.st_mode,
    )


def _file_mode(info: os.stat_result) -> int:
    return EXEC_MODE if info.st_mode & 0o111 else FILE_MODE


def _list(fd: int) -> list[tuple[str, os.stat_result]]:
    """The names in an opened folder, each with its own stat (links not followed)."""
    found = []
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                found.append((entry.name, entry.stat(follow_symlinks=False)))
            except OSError:
                continue  # gone since the listing
    return found


class _Unopened(Enum):
    """A folder the walk does not enter."""

    LEFT_OUT = "left out"  # its entries are dropped from the index
    KEPT = "kept"  # it changed meanwhile: its entries stay as they were


@dataclass(slots=True)
class _Frame:
    """A folder being walked: its descriptor and what is left of its listing."""

    rel: str
    fd: int
    entries: Iterator[tuple[str, os.stat_result]]
    owned: bool  # closed when the walk leaves it

    def close(self) -> None:
        if self.owned:
            os.close(self.fd)


class _Changed(Exception):
    """What was opened is not what the listing showed."""


class _LeftOut(Exception):
    """A file that must stay out of the history; the message says why."""


class WorkTree:
    """Stages the state of the workspace's files into an index."""

    def __init__(
        self,
        repo: pygit2.Repository,
        root: Path,
        *,
        max_file_bytes: int,
        allow_hard_links: bool = False,
    ) -> None:
        self._repo = repo
        self._root = root
        self._max = max_file_bytes
        self._allow_hard_links = allow_hard_links
        self._cache_path = Path(repo.path) / _CACHE_NAME
        # path -> (stat key, blob ID, trusted): an untrusted entry was recorded
        # while its file was fresh (it may change again within the same
        # timestamp tick), so that file is read again rather than trusted.
        self._known: dict[str, tuple[Key, str, bool]] = self._load_cache()
        # Paths known to be left out, with the state they were judged in, so
        # that each one is reported once, not on every scan.
        self._left_out: dict[str, tuple[Key, str]] = {}
        self._reported: list[Skipped] = []
        self._probe = pygit2.Index()  # asks libgit2 itself which names it refuses
        self.touched = 0  # bumped on every index change, so callers can skip no-op commits

    def skip_dir(self, rel: str) -> bool:
        """Folders never versioned: git folders, names git reads as `.git`, and
        ignored ones."""
        name = rel.rsplit("/", 1)[-1]
        return (
            name == ".git" or self._git_refuses(rel) or self._repo.path_is_ignored(rel + "/")
        )

    def take_skipped(self) -> tuple[Skipped, ...]:
        """The paths left out since the last call (each reported once per state)."""
        found, self._reported = tuple(self._reported), []
        return found

    def left_out(self) -> tuple[Skipped, ...]:
        """Every path the last stagings found that the history cannot hold."""
        return tuple(Skipped(path, why) for path, (_, why) in sorted(self._left_out.items()))

    def stage(self, index: pygit2.Index, changed: Changed) -> None:
        """Update `index` for the changed paths (or the whole tree)."""
        if changed is EVERYTHING:
            root = self._open_root()
            try:
                self._stage_below(index, "", root)
            finally:
                if root is not None:
                    os.close(root)
            self._save_cache()
            return
        assert isinstance(changed, frozenset)
        for rel in sorted(changed):
            self.stage_path(index, rel)

    def stage_path(self, index: pygit2.Index, rel: str, *, force: bool = False) -> None:
        """Bring one path (a file, a link, a folder or nothing) into the index.

        `force` stages a file even where the ignore rules would skip it: a file
        the agent writes is versioned wherever it lies; and a forced path that
        cannot be recorded is always reported.
        """
        parts = rel.split("/")
        if ".git" in parts or rel.endswith(TEMP_SUFFIX) or "" in parts:
            return
        root = self._open_root()
        if root is None:
            self._drop(index, rel)
            return
        opened = [root]
        try:
            folder = self._open_parents(index, rel, parts, opened)
            if folder is not None:
                self._stage_name(index, rel, folder, parts[-1], os.fstat(root).st_dev, force)
        finally:
            for fd in reversed(opened):
                os.close(fd)

    def _open_parents(
        self, index: pygit2.Index, rel: str, parts: list[str], opened: list[int]
    ) -> int | None:
        """The folder holding `rel`, reached from the root one component at a
        time (each descriptor is appended to `opened`); None when `rel` cannot
        be reached, after the index says why."""
        device = os.fstat(opened[0]).st_dev
        folder = opened[0]
        for depth, name in enumerate(parts[:-1]):
            try:
                folder = os.open(name, _DIR_FLAGS, dir_fd=folder)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    # Missing, a file or a link: nothing below it exists as far
                    # as the history goes (a link is recorded as itself).
                    self._drop(index, rel)
                else:
                    self._reported.append(Skipped(rel, f"cannot be read ({exc.strerror})"))
                return None
            opened.append(folder)
            info = os.fstat(folder)
            if info.st_dev != device:
                self._leave_out(index, "/".join(parts[: depth + 1]), info, OTHER_FILE_SYSTEM)
                return None
        return folder

    def _stage_name(
        self, index: pygit2.Index, rel: str, folder: int, name: str, device: int, force: bool
    ) -> None:
        """Stage what `name` in the open `folder` is now: nothing, a folder, a file or a link."""
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            self._drop(index, rel)
            return
        except OSError as exc:
            self._reported.append(Skipped(rel, f"cannot be read ({exc.strerror})"))
            return
        if stat.S_ISDIR(info.st_mode):
            self._remove(index, rel)
            child = self._open_folder(index, rel, folder, name, info, device)
            if not isinstance(child, _Unopened):
                try:
                    self._stage_below(index, rel, child)
                finally:
                    os.close(child)
            return
        # A folder that became a file needs no care: libgit2 drops the entries
        # below a path when a file is added at it.
        known = index[rel] if rel in index else None
        if known is None and not force and self._repo.path_is_ignored(rel):
            return
        self._stage_entry(
            index, rel, folder, name, info, device,
            (known.id, known.mode) if known else None, force=force,
        )

    # -- walking -------------------------------------------------------------

    def _open_root(self) -> int | None:
        try:
            return os.open(self._root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            log.warning("cannot open the workspace %s: %s", self._root, exc)
            return None

    def _open_folder(
        self,
        index: pygit2.Index,
        rel: str,
        parent: int,
        name: str,
        listed: os.stat_result,
        device: int,
    ) -> int | _Unopened:
        """A descriptor of a folder the listing showed, or why it is not entered."""
        if self._git_refuses(rel):
            self._leave_out(index, rel, listed, REFUSED_NAME)
            return _Unopened.LEFT_OUT
        here = f"/proc/self/fd/{parent}/{name}"
        if (name == AGENTS_FOLDER and holds_agents(here)) or is_agent_home(here):
            self._leave_out(index, rel, listed, AGENTS_DATA)
            return _Unopened.LEFT_OUT
        secret = KNOWN.reason_at(parent, name, listed)
        if secret is not None:  # a folder a rule covered, or agents' data, renamed
            if self._repo.path_is_ignored(rel + "/"):
                self._drop(index, rel)  # out under its name already: nothing to report
            else:
                self._leave_out(index, rel, listed, secret)
            return _Unopened.LEFT_OUT
        if listed.st_dev != device:
            self._leave_out(index, rel, listed, OTHER_FILE_SYSTEM)
            return _Unopened.LEFT_OUT
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            return _Unopened.LEFT_OUT
        except OSError as exc:
            changed = exc.errno in (errno.ELOOP, errno.ENOTDIR)
            why = CHANGED_MEANWHILE if changed else f"cannot be read ({exc.strerror})"
            self._reported.append(Skipped(rel, why))
            return _Unopened.KEPT
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (listed.st_dev, listed.st_ino):
            os.close(fd)
            self._reported.append(Skipped(rel, CHANGED_MEANWHILE))
            return _Unopened.KEPT
        return fd

    def _stage_below(self, index: pygit2.Index, top: str, top_fd: int | None) -> None:
        """Stage every file below `top` ('' for the whole tree), whose folder is
        open as `top_fd` (None: it is gone), and drop the entries whose files
        are gone."""
        prefix = top + "/" if top else ""
        # One pass over the index: pygit2 lookups are slow enough to matter
        # when repeated for every file of a large tree.
        current = {e.path: (e.id, e.mode) for e in index if e.path.startswith(prefix)}
        tracked_dirs = {p.rsplit("/", 1)[0] for p in current if "/" in p}
        tracked_dirs |= {d[:i] for d in tracked_dirs for i in range(len(d)) if d[i] == "/"}
        stale = {p for p in self._left_out if p.startswith(prefix)}
        seen: set[str] = set()
        kept: list[str] = []  # folders that changed meanwhile: their entries stay
        device = os.fstat(top_fd).st_dev if top_fd is not None else 0
        # One frame per open folder: as many descriptors as the tree is deep.
        frames = []
        if top_fd is not None:
            frames.append(_Frame(top, top_fd, iter(_list(top_fd)), owned=False))
        try:
            while frames:
                frame = frames[-1]
                item = next(frame.entries, None)
                if item is None:
                    frames.pop().close()
                    continue
                name, info = item
                if name == ".git" or name.endswith(TEMP_SUFFIX):
                    continue
                rel = f"{frame.rel}/{name}" if frame.rel else name
                stale.discard(rel)
                if not stat.S_ISDIR(info.st_mode):
                    known = current.get(rel)
                    if known is None and self._repo.path_is_ignored(rel):
                        continue
                    if self._stage_entry(index, rel, frame.fd, name, info, device, known):
                        seen.add(rel)
                    continue
                if rel not in tracked_dirs and self._repo.path_is_ignored(rel + "/"):
                    continue
                child = self._open_folder(index, rel, frame.fd, name, info, device)
                if child is _Unopened.KEPT:
                    kept.append(rel + "/")
                elif not isinstance(child, _Unopened):
                    try:
                        frames.append(_Frame(rel, child, iter(_list(child)), owned=True))
                    except OSError as exc:
                        os.close(child)
                        self._reported.append(Skipped(rel, f"cannot be read ({exc.strerror})"))
                        kept.append(rel + "/")
        finally:
            for frame in frames:
                frame.close()
        for path in current.keys() - seen:
            if not path.startswith(tuple(kept)):
                self._remove(index, path)
        for path in stale:
            if not path.startswith(tuple(kept)):
                del self._left_out[path]

    # -- one file ------------------------------------------------------------

    def _stage_entry(
        self,
        index: pygit2.Index,
        rel: str,
        folder: int,
        name: str,
        listed: os.stat_result,
        device: int,
        known: tuple[pygit2.Oid, int] | None,
        *,
        force: bool = False,
    ) -> bool:
        """Stage one file or link of an open folder; False when it is not in
        the index afterwards (gone or left out)."""
        if stat.S_ISLNK(listed.st_mode):
            try:
                data = os.fsencode(os.readlink(name, dir_fd=folder))
            except FileNotFoundError:
                self._drop(index, rel)
                return False
            except OSError:  # no longer a link
                self._reported.append(Skipped(rel, CHANGED_MEANWHILE))
                return known is not None
            return self._add(
                index, rel, pygit2.hash(data), LINK_MODE, known, data=data, force=force
            )
        refusal = self._refusal(listed, device) or KNOWN.reason_at(folder, name, listed)
        if refusal is not None:
            self._leave_out(index, rel, listed, refusal, force=force)
            return False
        key = _key(listed)
        cached = self._known.get(rel)
        if cached is not None and cached[0] == key and cached[2]:
            # Nothing is read: the same inode in the same state was read before.
            return self._add(
                index, rel, pygit2.Oid(hex=cached[1]), _file_mode(listed), known, force=force
            )
        try:
            data, opened = self._read(folder, name, listed, device)
        except FileNotFoundError:
            self._drop(index, rel)
            return False
        except _Changed:
            self._reported.append(Skipped(rel, CHANGED_MEANWHILE))
            return known is not None
        except _LeftOut as out:
            self._leave_out(index, rel, listed, str(out), force=force)
            return False
        oid = pygit2.hash(data)
        if not self._add(index, rel, oid, _file_mode(opened), known, data=data, force=force):
            return False
        fresh = time.time_ns() - opened.st_mtime_ns <= _RACY_NS
        self._known[rel] = (_key(opened), str(oid), not fresh)
        return True

    def _refusal(self, info: os.stat_result, device: int) -> str | None:
        refusal = unsafe_file(info, allow_hard_links=self._allow_hard_links, device=device)
        if refusal is not None:
            return refusal.reason
        if info.st_size > self._max:
            return f"is {info.st_size} bytes, above the {self._max}-byte limit for versioning"
        return None

    def _read(
        self, folder: int, name: str, listed: os.stat_result, device: int
    ) -> tuple[bytes, os.stat_result]:
        """The bytes of the file the listing showed, read through its own descriptor."""
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
        except FileNotFoundError:
            raise
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.ENOTDIR):
                raise _Changed from None  # swapped for a link or a socket
            raise _LeftOut(f"cannot be read ({exc.strerror})") from None
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != (listed.st_dev, listed.st_ino):
                raise _Changed
            refusal = self._refusal(opened, device)
            if refusal is not None:
                raise _LeftOut(refusal)
            chunks = []
            left = self._max + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            if left <= 0:
                raise _LeftOut(f"grew past the {self._max}-byte versioning limit while being read")
            return b"".join(chunks), opened
        except OSError as exc:
            raise _LeftOut(f"cannot be read ({exc.strerror})") from None
        finally:
            os.close(fd)

    def _add(
        self,
        index: pygit2.Index,
        rel: str,
        oid: pygit2.Oid,
        mode: int,
        known: tuple[pygit2.Oid, int] | None,
        *,
        data: bytes | None = None,
        force: bool = False,
    ) -> bool:
        """Put the blob `oid` (whose bytes are `data`, unless already stored) in
        the index at `rel`. The name is tried before the blob is stored, so a
        name git refuses leaves no stray object behind."""
        if known is not None and known == (oid, mode):
            self._left_out.pop(rel, None)
            return True
        try:
            index.add(pygit2.IndexEntry(rel, oid, mode))
        except pygit2.GitError:
            self._leave_out(index, rel, None, REFUSED_NAME, force=force)
            return False
        if data is not None:
            try:
                self._repo.create_blob(data)
            except (pygit2.GitError, OSError) as exc:
                # Not stored (a full disk): the index goes back to what it held.
                if known is not None:
                    index.add(pygit2.IndexEntry(rel, known[0], known[1]))
                else:
                    index.remove(rel)
                self._reported.append(Skipped(rel, f"could not be stored ({exc})"))
                return known is not None
        self._left_out.pop(rel, None)
        self.touched += 1
        return True

    # -- bookkeeping ---------------------------------------------------------

    def _git_refuses(self, folder: str) -> bool:
        probe = folder + "/x"
        try:
            self._probe.add(pygit2.IndexEntry(probe, _NO_OBJECT, FILE_MODE))
        except pygit2.GitError:
            return True
        self._probe.remove(probe)
        return False

    def _leave_out(
        self,
        index: pygit2.Index,
        rel: str,
        info: os.stat_result | None,
        reason: str,
        *,
        force: bool = False,
    ) -> None:
        """Keep `rel` (a file or a folder) out of the index and report it once."""
        self._remove(index, rel)
        before = len(index)
        index.remove_directory(rel)
        self.touched += len(index) != before
        state = (_key(info) if info is not None else (), reason)
        if force or self._left_out.get(rel) != state:
            self._reported.append(Skipped(rel, reason))
        self._left_out[rel] = state

    def _drop(self, index: pygit2.Index, rel: str) -> None:
        """`rel` is gone: no entry at it or below it."""
        self._remove(index, rel)
        before = len(index)
        index.remove_directory(rel)  # it may have been a folder
        self.touched += len(index) != before
        below = rel + "/"
        for path in [p for p in self._left_out if p == rel or p.startswith(below)]:
            del self._left_out[path]

    def _remove(self, index: pygit2.Index, rel: str) -> None:
        if rel in index:
            index.remove(rel)
            self.touched += 1

    def _load_cache(self) -> dict[str, tuple[Key, str, bool]]:
        try:
            raw = json.loads(self._cache_path.read_text())
            return {k: (tuple(v[0]), v[1], bool(v[2])) for k, v in raw.items()}
        except (OSError, ValueError, TypeError, IndexError, AttributeError):
            return {}

    def _save_cache(self) -> None:
        # Only a speed-up: losing it costs hashing, never correctness.
        temp = self._cache_path.with_suffix(".tmp")
        try:
            temp.write_text(
                json.dumps({k: [list(v[0]), v[1], v[2]] for k, v in self._known.items()})
            )
            os.replace(temp, self._cache_path)
        except (OSError, ValueError) as exc:
            log.debug("stat cache not saved: %s", exc)
