"""What a sandboxed command must not see, and what it must not change, found
by walking the roots.

The shell and the file tools follow one rule: a path that the access policy
refuses to read (`AccessPolicy.denial`) is masked in the sandbox, at any
depth and in every root; a file that is another name (a hard link) of a
refused one is masked too. Git metadata in a writable root (a `.git` at any
depth, a folder git would take for a repository, the person's own git
configuration when a root holds their home) is frozen: mounted read-only,
since what git finds there runs outside the sandbox on the person's next
`git` command. The same walk lists the git metadata for `gitguard`, which
checks after a command what it left.

The walk never follows links, never enters a `.git` folder (the objects of
a large repository would dominate its cost) and never enters the agent's
data. A folder's listing and the policy's decisions on its entries are kept
under the folder's identity and change time: a warm walk costs one `lstat`
per folder. A folder changed less than `_RACY_NS` before it was read may
change again within the same time stamp, so it is read again next time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .policy import Access, AccessPolicy, is_git_name

_RACY_NS = 2_000_000_000

GitKind = Literal["gitdir", "gitfile", "gitlink", "repository", "config"]


@dataclass(frozen=True, slots=True)
class GitItem:
    """Something the person's git reads as its own metadata.

    `gitdir`: a `.git` folder; `gitfile`: a `.git` file (`gitdir: <path>`);
    `gitlink`: a `.git` symbolic link; `repository`: another folder git takes
    for a repository (HEAD with objects/ and refs/, or with commondir);
    `config`: the person's global git configuration file.
    """

    path: Path
    kind: GitKind
    dev: int
    ino: int

    @property
    def identity(self) -> tuple[int, int]:
        return (self.dev, self.ino)


@dataclass(frozen=True, slots=True)
class Scan:
    """The outcome of one walk over the roots."""

    hidden: tuple[Path, ...]  # masked in the sandbox
    frozen: tuple[Path, ...]  # read-only in the sandbox (inside writable roots)
    git: tuple[GitItem, ...]  # every piece of git metadata found, frozen or not
    folders: int  # folders looked at
    read: int  # folders whose listing was read (not taken from the cache)


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    kind: Literal["dir", "file", "link", "other"]
    ino: int


@dataclass(frozen=True, slots=True)
class _Folder:
    """One folder's listing and the policy's verdicts, valid while `stamp` holds."""

    stamp: tuple[int, int, int, int]  # st_ino, st_mtime_ns, st_ctime_ns, st_dev
    trusted: bool  # False when it was read too soon after its listing last changed
    entries: tuple[_Entry, ...]
    denied: frozenset[str]  # entries the policy refuses to read
    repository: bool  # git would take the folder itself for a repository


def looks_like_repository(names: set[str] | frozenset[str]) -> bool:
    """Whether git would take a folder with these entries for a repository
    (its `is_git_directory`: a HEAD, and objects/ and refs/ here or in the
    folder that `commondir` names)."""
    return "HEAD" in names and ("commondir" in names or {"objects", "refs"} <= names)


def global_git_configs() -> tuple[Path, ...]:
    """The person's own git configuration files (read by every git command)."""
    home = Path(os.path.expanduser("~"))
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    return (home / ".gitconfig", Path(xdg) / "git" / "config")


class Masker:
    """Walks the roots of one policy, remembering what it read."""

    def __init__(self, policy: AccessPolicy, agent_data: Path) -> None:
        self.policy = policy
        self.agent_data = Path(os.path.realpath(agent_data))
        self._roots = {root.path for root in policy.roots}
        self._cache: dict[Path, _Folder] = {}
        self._lock = threading.Lock()  # parallel commands share the cache

    def scan(self) -> Scan:
        """Walk every root now; the cache makes this cheap when little changed."""
        with self._lock:
            return self._scan()

    def _scan(self) -> Scan:
        hidden: list[Path] = []
        frozen: list[Path] = []
        git: list[GitItem] = []
        secret_inodes: set[tuple[int, int]] = set()
        visible_files: list[tuple[Path, tuple[int, int]]] = []
        counts = [0, 0]
        seen: set[Path] = set()
        for root in self.policy.roots:
            for folder, info, denied_here in self._folders(root.path, counts, seen):
                dev = info.stamp[3]
                if info.repository and not denied_here:
                    git.append(GitItem(folder, "repository", dev, info.stamp[0]))
                    if root.writable:
                        frozen.append(folder)
                for entry in info.entries:
                    path = folder / entry.name
                    if is_git_name(entry.name):
                        if entry.kind != "other":
                            git.append(GitItem(path, _git_kind(entry.kind), dev, entry.ino))
                        if root.writable and not denied_here and entry.kind in ("dir", "file"):
                            frozen.append(path)
                        continue
                    secret = denied_here or entry.name in info.denied
                    if entry.kind in ("file", "other"):
                        if secret:
                            secret_inodes.add((dev, entry.ino))
                        else:
                            visible_files.append((path, (dev, entry.ino)))
                    if secret and not denied_here and entry.kind != "link":
                        hidden.append(path)
        # Another name of a refused file shows the same bytes: mask it as well.
        hidden += [path for path, inode in visible_files if inode in secret_inodes]
        for config in global_git_configs():
            if any(config.is_relative_to(r.path) for r in self.policy.writable_roots):
                try:
                    info = config.lstat()
                except OSError:
                    continue
                git.append(GitItem(config, "config", info.st_dev, info.st_ino))
                if not config.is_symlink():
                    frozen.append(config)
        for gone in self._cache.keys() - seen:
            del self._cache[gone]
        data = self.agent_data
        if any(data.is_relative_to(root) for root in self._roots):
            hidden.append(data)
        return Scan(
            tuple(dict.fromkeys(hidden)),
            tuple(dict.fromkeys(frozen)),
            tuple(git),
            counts[0],
            counts[1],
        )

    def _folders(
        self, top: Path, counts: list[int], seen: set[Path]
    ) -> Iterator[tuple[Path, _Folder, bool]]:
        """Every folder below `top` (itself included) with its listing, and
        whether the policy refuses the folder as a whole (a masked folder is
        still walked: its files' other names, and git metadata planted there,
        must be found)."""
        stack: list[tuple[Path, bool]] = [(top, False)]
        while stack:
            folder, denied_here = stack.pop()
            if folder in seen:
                continue  # a root nested in another is walked once
            seen.add(folder)
            info = self._folder(folder, denied_here, counts)
            if info is None:
                continue
            yield folder, info, denied_here
            for entry in info.entries:
                if entry.kind != "dir" or is_git_name(entry.name):
                    continue
                child = folder / entry.name
                if child == self.agent_data or (child in self._roots and child != top):
                    continue  # the agent's data is masked whole; a nested root walks itself
                stack.append((child, denied_here or entry.name in info.denied))

    def _folder(self, folder: Path, denied_here: bool, counts: list[int]) -> _Folder | None:
        counts[0] += 1
        try:
            info = os.lstat(folder)
        except OSError:
            return None
        stamp = (info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_dev)
        cached = self._cache.get(folder)
        if cached is not None and cached.trusted and cached.stamp == stamp:
            return cached
        counts[1] += 1
        try:
            with os.scandir(folder) as listing:
                entries = tuple(_entry(e) for e in listing)
        except OSError:
            self._cache.pop(folder, None)
            return None
        names = {e.name for e in entries}
        denied = frozenset(
            e.name
            for e in entries
            if not denied_here
            and not is_git_name(e.name)
            and self.policy.denial(folder / e.name, Access.READ) is not None
        )
        trusted = time.time_ns() - info.st_mtime_ns > _RACY_NS
        fresh = _Folder(stamp, trusted, entries, denied, looks_like_repository(names))
        self._cache[folder] = fresh
        return fresh


def _entry(entry: os.DirEntry[str]) -> _Entry:
    try:
        if entry.is_symlink():
            kind: Literal["dir", "file", "link", "other"] = "link"
        elif entry.is_dir(follow_symlinks=False):
            kind = "dir"
        elif entry.is_file(follow_symlinks=False):
            kind = "file"
        else:
            kind = "other"
    except OSError:
        kind = "other"
    return _Entry(entry.name, kind, entry.inode())


def _git_kind(kind: str) -> GitKind:
    if kind == "dir":
        return "gitdir"
    return "gitfile" if kind == "file" else "gitlink"
