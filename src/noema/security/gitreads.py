"""What the person's git reads as its own: the one description the file
tools (`policy.py`), the shell's masks and the git check after a command
(`gitguard.py`) share.

Git takes a folder for a repository when it holds a `HEAD` with `objects/`
and `refs/` (or a `commondir` naming where those are), and runs what that
folder's `config` and `hooks/` say. Every git command also reads the
person's global and system configuration and every file a configuration
includes (`include.path`, `includeIf.*.path`), whatever the condition.

`Repositories` finds the configuration files of every repository in some
folders (and of those enclosing them), and `Includes.reach` every file
they, and the person's own configurations, include: the file tools write
none of those. An include is resolved as git does: `~` is the person's
home, a relative path is joined to the folder of the including file as git
named it, and the kernel then takes each `..` from where a link leads.
Every condition of an `includeIf` counts as true, since what it depends on
(the folder, the branch, the remotes) can change under the person. Both
walks remember what they read under each file's or folder's identity and
times, so an unchanged tree costs one `lstat` per folder.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .changes import EVERYTHING, ChangeFeed, watch

log = logging.getLogger(__name__)

_GIT_TIMEOUT_S = 10
_MAX_CONFIG_BYTES = 1 << 20
_CONFIG_NAMES = ("config", "config.worktree")
_REPOSITORY_NAMES = ("HEAD", "commondir", "objects", "refs")
# Git stops with an error past 10 nested includes; a little more is followed,
# and at most so many configuration files are read for one answer.
_MAX_INCLUDE_DEPTH = 12
_MAX_INCLUDED_CONFIGS = 2_000
_MAX_FOLDERS = 200_000  # walked for repositories; past it the rest is not looked at
_MAX_POINTER_BYTES = 4096  # a `.git` file or a `commondir`
_RACY_NS = 2_000_000_000  # a folder changed this recently may change again unseen
# A tree of more folders than this is watched (inotify) rather than looked at
# whole at each write; a smaller one costs less than the watches would.
_WATCH_PAST = 250


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


@cache
def _git_prefix() -> Path | None:
    """The folder git was installed under (`/usr` for `/usr/bin/git`)."""
    git = shutil.which("git")
    return Path(os.path.realpath(git)).parent.parent if git else None


def person_git_configs() -> tuple[Path, ...]:
    """Every configuration file the person's git reads whatever the folder:
    the global ones (`GIT_CONFIG_GLOBAL` too, when set) and the system's
    (`/etc/gitconfig`, the one under git's own prefix, `GIT_CONFIG_SYSTEM`)."""
    found = list(global_git_configs())
    for variable in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"):
        named = os.environ.get(variable)
        if named:
            found.append(Path(os.path.expanduser(named)))
    found.append(Path("/etc/gitconfig"))
    prefix = _git_prefix()
    if prefix is not None:
        found.append(prefix / "etc" / "gitconfig")
    return tuple(dict.fromkeys(found))


def include_target(config: str, value: str) -> str:
    """The path git opens for an include `value` found in `config` (as git
    named that file): `~` and `%(prefix)/` expanded, a relative path joined
    to the including file's folder. Deliberately not normalised: `a/link/..`
    is where the kernel takes it, not `a`."""
    if value.startswith("%(prefix)/"):
        prefix = _git_prefix()
        value = str(prefix or "/usr") + value[len("%(prefix)"):]
    expanded = os.path.expanduser(value)
    if os.path.isabs(expanded):
        return expanded
    return os.path.join(os.path.dirname(config), expanded)


def repository_names(folder: Path) -> set[str]:
    """Which of the names git looks for in a repository `folder` holds."""
    return {name for name in _REPOSITORY_NAMES if os.path.lexists(folder / name)}


def read_config(data: bytes) -> list[tuple[str, str | None]] | None:
    """The variables of a configuration file as the person's git reads them,
    in order; None when git is missing or cannot parse the file."""
    git = shutil.which("git")
    if git is None:
        return None
    with tempfile.TemporaryDirectory(prefix="noema-gitguard-") as scratch:
        copy = Path(scratch) / "config"
        copy.write_bytes(data)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": scratch,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "LC_ALL": "C",
        }
        try:
            done = subprocess.run(
                [git, "config", "--file", str(copy), "--no-includes", "--list", "-z"],
                cwd=scratch,
                env=env,
                capture_output=True,
                timeout=_GIT_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
    if done.returncode != 0:
        return None
    entries: list[tuple[str, str | None]] = []
    for record in done.stdout.split(b"\0"):
        if not record:
            continue
        key, newline, value = record.decode("utf-8", "surrogateescape").partition("\n")
        entries.append((key, value if newline else None))
    return entries


class Includes:
    """The files configuration files include, read with git's parser and
    remembered per file state, so that an unchanged configuration is not
    parsed again."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[int, int, int, int, int], tuple[str, ...]]] = {}
        self._lock = threading.Lock()

    def values(self, config: Path | str) -> tuple[str, ...]:
        """The include paths the configuration file `config` names, as written
        (`include.path`, and `includeIf.*.path` whatever the condition)."""
        key = str(config)
        try:
            info = os.stat(key)
        except OSError:
            return ()
        signature = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size)
        with self._lock:
            cached = self._seen.get(key)
        if cached is not None and cached[0] == signature:
            return cached[1]
        try:
            with open(key, "rb") as handle:
                data = handle.read(_MAX_CONFIG_BYTES + 1)
        except OSError:
            return ()
        entries = read_config(data) if len(data) <= _MAX_CONFIG_BYTES else None
        named = []
        for variable, value in entries or ():
            lowered = variable.lower()
            is_include = lowered == "include.path" or (
                lowered.startswith("includeif.") and lowered.endswith(".path")
            )
            if is_include and value:
                named.append(value)
        with self._lock:
            self._seen[key] = (signature, tuple(named))
        return tuple(named)

    def of(self, config: Path) -> tuple[Path, ...]:
        """The paths `config` includes, as it names them (made absolute)."""
        return tuple(
            Path(os.path.normpath(config.parent / os.path.expanduser(value)))
            for value in self.values(config)
        )

    def reach(self, configs: Iterable[Path | str]) -> set[Path]:
        """Every file that the `configs` include, directly or through other
        includes, where each really leads (links and `..` resolved as the
        kernel does)."""
        found: set[Path] = set()
        seen: set[str] = set()
        queue = [(str(config), 0) for config in configs]
        while queue and len(seen) < _MAX_INCLUDED_CONFIGS:
            config, depth = queue.pop()
            if config in seen or depth > _MAX_INCLUDE_DEPTH:
                continue
            seen.add(config)
            for value in self.values(config):
                named = include_target(config, value)
                real = os.path.realpath(named)
                found.add(Path(real))
                # Git names the included file by the path it built, and joins
                # that file's own relative includes to it; where the file
                # really lies is followed too, in case a link is swapped.
                queue.append((named, depth + 1))
                if real != named:
                    queue.append((real, depth + 1))
        return found


def repository_configs(gitdir: Path) -> list[Path]:
    """The configuration files of a git folder."""
    return [gitdir / name for name in _CONFIG_NAMES]


# What a folder's listing gives the walk: folders to walk, git folders, pointers.
_Found = tuple[list[Path], list[Path], list[Path]]
_Judge = Callable[[Path, dict[str, bool]], _Found]


@dataclass(frozen=True, slots=True)
class _Seen:
    """What one folder holds for the walk, valid while `stamp` holds."""

    stamp: tuple[int, int, int, int]  # st_dev, st_ino, st_mtime_ns, st_ctime_ns
    walk: tuple[Path, ...]  # ordinary folders below it
    gitdirs: tuple[Path, ...]  # git folders it holds (or is)
    pointers: tuple[Path, ...]  # `.git` files and links, read again each time


class Repositories:
    """The configuration files of every repository in some folders: each
    `.git` folder, `.git` file or link (and the folder it names), bare
    repository and `commondir`, with the submodules' (`modules/`) and
    worktrees' (`worktrees/`) git folders inside them, and the repositories
    of the folders enclosing the tops (a root inside someone's project).

    Folders are read once and remembered under their identity and times.
    A later walk gives each folder one `lstat` and reads again those that
    changed. In a tree of more than `watch_past` folders the kernel is asked
    (inotify, `changes.py`) which folders change: a walk reads again only
    those, and when none gained or lost a folder or a git entry (a file was
    written) the last answer stands; otherwise the tree is walked from what
    is remembered, the folders under one read again getting an `lstat` each
    (a tree moved in has no watches yet). Where the kernel cannot tell (no
    inotify, too many watches, a dropped queue), every folder gets its
    `lstat`."""

    def __init__(
        self, tops: Sequence[Path], skip: Sequence[Path] = (), *,
        watch_past: int | None = _WATCH_PAST, racy_s: float = _RACY_NS / 1e9,
    ) -> None:
        self.tops = tuple(dict.fromkeys(Path(t) for t in tops))
        self.skip = frozenset(Path(s) for s in skip)
        self._watch_past = watch_past  # None: never watched
        self._sizes: dict[Path, int] = {}  # folders walked below each top, last time
        self._feeds: dict[Path, ChangeFeed] = {}  # for the tops found large
        self._last: dict[Path, tuple[tuple[Path, ...], tuple[Path, ...]]] = {}  # by top
        self._finalizer = weakref.finalize(self, _close_feeds, self._feeds)
        self._folders: dict[tuple[Path, _Judge], _Seen] = {}
        self._pointers: dict[Path, tuple[tuple[int, int, int, int], Path | None]] = {}
        self._racy_ns = int(racy_s * 1e9)
        self._lock = threading.Lock()
        self._warned = False
        self._lost = False  # a folder lost a sub-folder: forget what lies below it

    def configs(self) -> list[Path]:
        """The configuration files (present or not) of every repository found now."""
        with self._lock:
            return self._configs()

    def close(self) -> None:
        """Stop watching the tops for changes."""
        self._finalizer()

    def _configs(self) -> list[Path]:
        gitdirs: list[Path] = []
        for top in self.tops:
            for folder in top.parents:
                gitdirs += self._enclosing(folder)
        walked: set[Path] = set()
        for top in self.tops:
            changed = self._changed(top)
            last = self._last.get(top)
            if changed is not None and last is not None and self._same_shape(changed):
                found = last  # only files changed: no folder, no git entry came or went
            else:
                found = self._walk(top, changed, walked)
                self._last[top] = found
            gitdirs += found[0]
            gitdirs += [p for p in map(self._pointer, found[1]) if p is not None]
        configs: list[Path] = []
        done: set[Path] = set()
        while gitdirs:
            gitdir = gitdirs.pop()
            if gitdir in done or len(done) > _MAX_FOLDERS:
                continue
            done.add(gitdir)
            configs += repository_configs(gitdir)
            seen, _ = self._read(gitdir, _git_folder)
            if seen is None:
                continue
            gitdirs += seen.gitdirs
            gitdirs += [p for p in map(self._pointer, seen.pointers) if p is not None]
        if self._lost:  # forget folders that are gone, so no name reused finds them
            self._lost = False
            self._folders = {
                key: seen for key, seen in self._folders.items()
                if key[0] in (walked if key[1] is _plain else done)
            }
            for top in self.tops:
                self._last.pop(top, None)
        return configs

    def _walk(
        self, top: Path, changed: set[Path] | None, walked: set[Path]
    ) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
        """The git folders and pointers below `top`. With no word from the
        kernel (`changed` None) every folder is checked with one lstat; with
        it, only the folders it named and those under a folder read again (a
        tree moved in has no watches yet)."""
        gitdirs: list[Path] = []
        pointers: list[Path] = []
        before = len(walked)
        stack = [(top, changed is None or top in changed)]
        while stack:
            folder, check = stack.pop()
            if folder in walked or folder in self.skip:
                continue
            walked.add(folder)
            if len(walked) > _MAX_FOLDERS:
                if not self._warned:
                    self._warned = True
                    log.warning("more than %d folders in %s: repositories past them are "
                                "not looked for", _MAX_FOLDERS, ", ".join(map(str, self.tops)))
                break
            told = changed is not None and folder in changed
            cached = None if check or told else self._folders.get((folder, _plain))
            if cached is not None:
                seen, read = cached, False
            else:
                seen, read = self._read(folder, _plain, force=told, watched=changed is not None)
            if seen is None:
                continue
            stack += [(child, changed is None or read) for child in seen.walk]
            gitdirs += seen.gitdirs
            pointers += seen.pointers
        self._sizes[top] = len(walked) - before
        return tuple(gitdirs), tuple(pointers)

    def _same_shape(self, changed: set[Path]) -> bool:
        """Whether every folder the kernel named still holds the same folders
        and git entries as when last read (read again now to know)."""
        for folder in changed:
            old = self._folders.get((folder, _plain))
            if old is None:
                continue  # a file, or a folder never walked: its own folder is named too
            new, _ = self._read(folder, _plain, force=True, watched=True)
            if new is None or (new.walk, new.gitdirs, new.pointers) != (
                old.walk, old.gitdirs, old.pointers
            ):
                return False
        return True

    def _changed(self, top: Path) -> set[Path] | None:
        """The folders below `top` whose listing may have changed since the
        last walk, as the kernel reports them; None when it cannot say."""
        feed = self._feeds.get(top)
        if feed is None:
            if self._watch_past is None or self._sizes.get(top, 0) < self._watch_past:
                return None  # a small tree is cheaper to look at than to watch
            skip = [s for s in self.skip if s.is_relative_to(top)]

            def skip_dir(relative: str) -> bool:
                if ".git" in relative.split("/"):
                    return True  # git folders are looked at whole at each walk
                return any((top / relative).is_relative_to(s) for s in skip)

            feed = self._feeds[top] = watch(top, skip_dir)
        news = feed.take()
        if news is EVERYTHING or not isinstance(news, frozenset):
            return None
        found: set[Path] = set()
        for relative in news:
            path = top / relative
            found |= {path, path.parent}
        return found

    def _enclosing(self, folder: Path) -> list[Path]:
        """The git folder git would use from `folder` itself (its `.git`, or
        the folder when it is a bare repository)."""
        dotgit = folder / ".git"
        try:
            info = os.lstat(dotgit)
        except OSError:
            return [folder] if looks_like_repository(repository_names(folder)) else []
        if stat.S_ISDIR(info.st_mode):
            return [dotgit]
        named = self._pointer(dotgit)
        return [named] if named is not None else []

    def _read(
        self, folder: Path, judge: _Judge, *, force: bool = False, watched: bool = False
    ) -> tuple[_Seen | None, bool]:
        """What `folder` holds, and whether its listing was read now (not
        taken from memory); `force` reads it even when its times say it is
        unchanged (the kernel said it changed, maybe within one tick). What
        is read in a `watched` tree is remembered however recent: the kernel
        will name the folder when it changes again."""
        cached = self._folders.get((folder, judge))
        try:
            info = os.lstat(folder)
        except OSError:
            self._lost = self._lost or cached is not None
            return None, False
        stamp = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
        if cached is not None and cached.stamp == stamp and not force:
            return cached, False
        try:
            with os.scandir(folder) as entries:
                listing = {e.name: e.is_dir(follow_symlinks=False) for e in entries}
        except OSError:
            return None, True
        walk, gitdirs, pointers = judge(folder, listing)
        seen = _Seen(stamp, tuple(walk), tuple(gitdirs), tuple(pointers))
        if cached is not None and not set(cached.walk + cached.gitdirs) <= set(walk + gitdirs):
            self._lost = True
        if watched or time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > self._racy_ns:
            self._folders[(folder, judge)] = seen
        else:
            self._folders.pop((folder, judge), None)
        return seen, True

    def _pointer(self, path: Path) -> Path | None:
        """The git folder a `.git` file (`gitdir: <path>`), a `.git` link or a
        `commondir` file names, resolved from the folder holding it."""
        try:
            info = os.lstat(path)
        except OSError:
            return None
        stamp = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
        cached = self._pointers.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        named: Path | None = None
        if os.path.islink(path):
            named = Path(os.path.realpath(path))
        else:
            text = _read_small(path)
            if text is not None and path.name == "commondir":
                named = Path(os.path.realpath(path.parent / os.fsdecode(text.strip())))
            elif text is not None and text.startswith(b"gitdir:"):
                rest = os.fsdecode(text[len(b"gitdir:"):].strip())
                named = Path(os.path.realpath(path.parent / rest))
        if named is not None and not os.path.isdir(named):
            named = None
        if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > self._racy_ns:
            self._pointers[path] = (stamp, named)
        return named


def _close_feeds(feeds: dict[Path, ChangeFeed]) -> None:
    for feed in feeds.values():
        feed.close()
    feeds.clear()


def _plain(folder: Path, listing: dict[str, bool]) -> _Found:
    """An ordinary folder: its `.git`, or itself when git takes it for a bare
    repository; its other folders are walked."""
    if looks_like_repository(set(listing)):
        return [], [folder], []
    walk, gitdirs, pointers = [], [], []
    for name, is_dir in listing.items():
        if name == ".git":
            (gitdirs if is_dir else pointers).append(folder / name)
        elif is_dir:
            walk.append(folder / name)
    return walk, gitdirs, pointers


def _git_folder(folder: Path, listing: dict[str, bool]) -> _Found:
    """A git folder (or a folder of `modules/` or `worktrees/`): the git
    folders of submodules and worktrees inside, and where `commondir` leads.
    Objects, refs and logs are never entered."""
    gitdirs, pointers = [], []
    if "commondir" in listing:
        pointers.append(folder / "commondir")
    is_gitdir = "HEAD" in listing
    for name, is_dir in listing.items():
        if not is_dir:
            continue
        if is_gitdir and name in ("modules", "worktrees"):
            gitdirs.append(folder / name)
        elif not is_gitdir:
            gitdirs.append(folder / name)  # a submodule's name may hold '/'
    return [], gitdirs, pointers


def _read_small(path: Path) -> bytes | None:
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return os.read(handle, _MAX_POINTER_BYTES)
    except OSError:
        return None
    finally:
        os.close(handle)
