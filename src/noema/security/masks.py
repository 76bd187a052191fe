"""What a sandboxed command must not see, and what it must not change, found
by walking the roots.

The shell and the file tools follow one rule: a path that the access policy
refuses to read (`AccessPolicy.denial`) is masked in the sandbox, at any
depth and in every root; a file that is another name (a hard link) of a
refused one is masked too. What a rule covered is known by identity from
then on (`identity.py`), so that it stays masked under a new name, given by
a rename or a hard link. The data of a Noema agent (`policy.is_agent_home`:
another person's home, a folder of agents moved or renamed) is masked
whole, whatever its name. Git metadata in a writable root (a `.git` at any
depth, a folder git would take for a repository, the person's own git
configuration when a root holds their home) is frozen: mounted read-only,
since what git finds there runs outside the sandbox on the person's next
`git` command. The same walk lists the git metadata for `gitguard`, which
checks after a command what it left.

The walk never follows links, never enters a `.git` folder (the objects of
a large repository would dominate its cost) and never enters agents'
data. A folder's listing and the policy's decisions on its entries are kept
under the folder's identity and change time: a warm walk costs one `lstat`
per folder. A folder changed less than two seconds before it was read may
change again within the same time stamp, so it is read again next time.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .gitreads import global_git_configs, looks_like_repository
from .identity import of_path
from .policy import AGENTS_FOLDER, Access, AccessPolicy, agent_layout, holds_agents, is_git_name

GitKind = Literal["gitdir", "gitfile", "gitlink", "repository", "config"]
__all__ = ["GitItem", "Masker", "Scan", "global_git_configs", "looks_like_repository"]


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
    unreadable: tuple[Path, ...] = ()  # folders that could not be listed (masked whole)


@dataclass(frozen=True, slots=True)
class _Folder:
    """What one folder contributes to a scan, valid while `stamp` holds."""

    stamp: tuple[int, int, int, int]  # st_ino, st_mtime_ns, st_ctime_ns, st_dev
    trusted: bool  # False when it was read too soon after it last changed
    children: tuple[tuple[Path, bool], ...]  # folders to walk, and whether they are refused
    hidden: tuple[Path, ...]  # entries to mask
    git: tuple[GitItem, ...]  # git metadata here (the folder itself when a repository)
    freezable: tuple[Path, ...]  # the part of `git` a read-only mount can cover
    secret_inodes: frozenset[int]  # files the policy refuses
    visible_inodes: dict[int, Path]  # every other file, by inode
    unreadable: bool = False  # it could not be listed (and is masked whole)


class Masker:
    """Walks the roots of one policy, remembering what it read."""

    def __init__(self, policy: AccessPolicy, agent_data: Path, *, racy_s: float = 2.0) -> None:
        self.policy = policy
        self._racy_ns = int(racy_s * 1e9)
        self.agent_data = Path(os.path.realpath(agent_data))
        # The agents' data: this agent's and every other agent's the policy protects.
        self._private = tuple(dict.fromkeys((self.agent_data, *policy.protected)))
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
        secret: dict[int, set[int]] = {}
        walked: list[_Folder] = []
        unreadable: list[Path] = []
        seen: set[Path] = set()
        read = 0
        for root in self.policy.roots:
            stack = [(root.path, False)]
            while stack:
                folder, refused = stack.pop()
                if folder in seen:
                    continue  # a root nested in another is walked once
                seen.add(folder)
                info, fresh = self._folder(folder, refused)
                if info is None:
                    continue
                read += fresh
                walked.append(info)
                if info.unreadable:
                    unreadable.append(folder)
                stack += info.children
                hidden += info.hidden
                git += info.git
                if root.writable:
                    frozen += info.freezable
                if info.secret_inodes:
                    secret.setdefault(info.stamp[3], set()).update(info.secret_inodes)
        # Another name of a refused file shows the same bytes: mask it as well.
        # The agents' own files count, though their folder is never walked.
        for dev, ino in _agent_files(self.agent_data):
            secret.setdefault(dev, set()).add(ino)
        for info in walked:
            same = secret.get(info.stamp[3])
            if same and info.visible_inodes:
                hidden += [info.visible_inodes[i] for i in same.intersection(info.visible_inodes)]
        for config in global_git_configs():
            if any(config.is_relative_to(r.path) for r in self.policy.writable_roots):
                try:
                    found = config.lstat()
                except OSError:
                    continue
                git.append(GitItem(config, "config", found.st_dev, found.st_ino))
                if not config.is_symlink():
                    frozen.append(config)
        for gone in self._cache.keys() - seen:
            del self._cache[gone]
        for private in self._private:
            if any(private.is_relative_to(root) for root in self._roots):
                hidden.append(private)
        return Scan(
            tuple(dict.fromkeys(hidden)),
            tuple(dict.fromkeys(frozen)),
            tuple(git),
            len(seen),
            read,
            tuple(unreadable),
        )

    def _folder(self, folder: Path, refused: bool) -> tuple[_Folder | None, bool]:
        """The folder's part of the scan, from the cache when it has not changed;
        whether the folder had to be read."""
        try:
            info = os.lstat(folder)
        except OSError:
            return None, False
        stamp = (info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_dev)
        cached = self._cache.get(folder)
        if cached is not None and cached.trusted and cached.stamp == stamp:
            return cached, False
        try:
            with os.scandir(folder) as listing:
                entries = [_entry(e) for e in listing]
        except OSError:
            # A folder we cannot list (mode 0300: no reading, but a command
            # can still open the names it knows) is masked whole.
            self._cache.pop(folder, None)
            masked = () if refused else (folder,)  # (else its refused parent masks it)
            return _Folder(stamp, False, (), masked, (), (), frozenset(), {}, True), True
        # A command may set the time stamps back, but not the change time.
        trusted = time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > self._racy_ns
        if agent_layout((n for n, k, _ in entries if k != "dir"),
                        (n for n, k, _ in entries if k == "dir")):
            # The data of a Noema agent (another person's, or one moved out of
            # its home): masked whole, never walked, known by identity from now on.
            with contextlib.suppress(OSError):
                self.policy.remember_denied(of_path(folder), agents=True)
            masked = () if refused else (folder,)
            fresh = _Folder(stamp, trusted, (), masked, (), (), frozenset(), {})
            self._cache[folder] = fresh
            return fresh, True
        fresh = self._judge(folder, refused, stamp, trusted, entries)
        self._cache[folder] = fresh
        return fresh, True

    def _judge(
        self,
        folder: Path,
        refused: bool,
        stamp: tuple[int, int, int, int],
        trusted: bool,
        entries: list[tuple[str, str, int]],
    ) -> _Folder:
        """Ask the policy about each entry of a folder just read."""
        dev = stamp[3]
        children: list[tuple[Path, bool]] = []
        hidden: list[Path] = []
        git: list[GitItem] = []
        freezable: list[Path] = []
        secret: set[int] = set()
        visible: dict[int, Path] = {}
        if looks_like_repository({name for name, _, _ in entries}):
            git.append(GitItem(folder, "repository", dev, stamp[0]))
            if not refused:
                freezable.append(folder)
        for name, kind, ino in entries:
            path = folder / name
            if is_git_name(name):
                if kind != "other":
                    git.append(GitItem(path, _git_kind(kind), dev, ino))
                if not refused and kind in ("dir", "file"):
                    freezable.append(path)
                continue  # never entered: it is frozen whole
            moved = kind != "link" and self._moved(path, dev, ino)
            if kind == "dir" and not moved and name == AGENTS_FOLDER and holds_agents(path):
                moved = True  # another Noema home's agents: never walked either
                with contextlib.suppress(OSError):
                    self.policy.remember_denied(of_path(path), agents=True)
            if moved and kind == "dir" and not refused:
                hidden.append(path)  # the agents' data or a secret folder, renamed
                continue  # (the agents' data is never walked, wherever it lies)
            denied = refused or moved or self.policy.denial(path, Access.READ) is not None
            if denied and kind != "link":
                # Known by identity from now on: a rename does not free it.
                self._remember(path)
            if denied and not refused and kind != "link":
                hidden.append(path)
            if kind == "dir":
                # A masked folder is still walked: other names of its files, and
                # git metadata planted in it, must be found.
                if path not in self._private and path not in self._roots:
                    children.append((path, denied))
            elif kind != "link":
                if denied:
                    secret.add(ino)
                else:
                    visible[ino] = path
        return _Folder(
            stamp, trusted, tuple(children), tuple(hidden), tuple(git), tuple(freezable),
            frozenset(secret), visible,
        )


    def _moved(self, path: Path, dev: int, ino: int) -> bool:
        """Whether `path` is something a rule covered under another name."""
        if not self.policy.may_be_denied(dev, ino):
            return False
        return self.policy.denied_at(path) is not None

    def _remember(self, path: Path) -> None:
        self.policy.remember_path(path)


def _entry(entry: os.DirEntry[str]) -> tuple[str, str, int]:
    """Name, kind ('dir', 'file', 'link' or 'other') and inode, without following links."""
    try:
        if entry.is_symlink():
            kind = "link"
        elif entry.is_dir(follow_symlinks=False):
            kind = "dir"
        elif entry.is_file(follow_symlinks=False):
            kind = "file"
        else:
            kind = "other"
    except OSError:
        kind = "other"
    return entry.name, kind, entry.inode()


def _git_kind(kind: str) -> GitKind:
    if kind == "dir":
        return "gitdir"
    return "gitfile" if kind == "file" else "gitlink"


def _agent_files(agents: Path) -> list[tuple[int, int]]:
    """(device, inode) of the files of every agent's folder (its secrets,
    configuration and databases), for finding other names of them."""
    found: list[tuple[int, int]] = []
    try:
        agent_folders = list(os.scandir(agents))
    except OSError:
        return found
    for folder in agent_folders:
        if not folder.is_dir(follow_symlinks=False):
            continue
        try:
            with os.scandir(folder.path) as entries:
                for entry in entries:
                    if entry.is_file(follow_symlinks=False):
                        info = entry.stat(follow_symlinks=False)
                        found.append((info.st_dev, info.st_ino))
        except OSError:
            continue
    return found
