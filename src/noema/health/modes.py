"""Whether another account could read the agent's data, and the fix.

Every file and folder in the agent's folder should give nothing to the
group or to other users (files 0600, folders 0700: what the umask of 077
makes). An older home, a copy made by hand, or a file written while Noema
ran as a library may be looser; tightening clears the group and other bits
and keeps the owner's (a read-only git object stays read-only). Links are
neither followed nor changed: what they point at is not the agent's.

Each start only looks two levels deep (`exposed`): a few dozen `lstat`
calls however many objects the versions repositories hold, where a full
walk costs about 10 to 20 µs a file on a busy machine, a second at 50,000
(`bench/private_start.py`). When that look finds anything loose, everything
is walked and tightened, once. `noema doctor` always walks everything.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..paths import AgentPaths

_OTHERS = 0o077


@dataclass(frozen=True, slots=True)
class Loose:
    """A file or folder other accounts may use."""

    path: Path
    mode: int  # the permission bits as found
    folder: bool


@dataclass(frozen=True, slots=True)
class Tightening:
    """What a tightening changed, and what it could not."""

    done: tuple[Loose, ...]
    failed: tuple[tuple[Loose, str], ...]


def loose_modes(paths: AgentPaths) -> list[Loose]:
    """Everything in the agent's folder (and the folder of all agents, itself
    only) that gives anything to the group or to other users."""
    found: list[Loose] = []
    if paths.agents_dir != paths.root:
        _look(paths.agents_dir, found)
    if _look(paths.root, found):
        _walk(paths.root, found)
    return found


def exposed(paths: AgentPaths) -> bool:
    """Whether the quick look at the start finds anything loose: the folder of
    all agents, the agent's folder, and what lies two levels into it (the
    stores, the logs, the identity files, each versions repository's own
    folder), not the repositories' objects: a repository that an older
    version left loose has a loose folder too."""
    if any(_loose(p) for p in {paths.agents_dir, paths.root}):
        return True
    return any(_any_loose(paths.root, depth=2))


def _any_loose(folder: Path, depth: int) -> Iterator[bool]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISLNK(mode):
            continue
        yield bool(mode & _OTHERS)
        if depth > 1 and stat.S_ISDIR(mode):
            yield from _any_loose(Path(entry.path), depth - 1)


def _loose(path: Path) -> bool:
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return not stat.S_ISLNK(mode) and bool(mode & _OTHERS)


def tighten(found: list[Loose]) -> Tightening:
    """Clear the group and other bits of each item (never following a link)."""
    done: list[Loose] = []
    failed: list[tuple[Loose, str]] = []
    for item in found:
        try:
            if _tighten_one(item):
                done.append(item)
        except OSError as exc:
            failed.append((item, exc.strerror or str(exc)))
    return Tightening(tuple(done), tuple(failed))


def _tighten_one(item: Loose) -> bool:
    """Whether `item` was tightened (False: it is gone, or a link now)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        # Through a descriptor: a link put in its place meanwhile is not followed.
        fd = os.open(item.path, flags | (os.O_DIRECTORY if item.folder else 0))
    except FileNotFoundError:
        return False
    except OSError:
        # A socket, or a file its owner may not read: by name, once sure it is no link.
        info = item.path.lstat()
        if stat.S_ISLNK(info.st_mode):
            return False
        os.chmod(item.path, stat.S_IMODE(info.st_mode) & ~_OTHERS)
        return True
    try:
        os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) & ~_OTHERS)
    finally:
        os.close(fd)
    return True


def describe(found: list[Loose] | tuple[Loose, ...], root: Path, *, shown: int = 4) -> str:
    """ "3 files and 1 folder (turns.db, mail.db, logs/, …)": files first."""
    folders = sum(1 for item in found if item.folder)
    files = len(found) - folders
    counts = " and ".join(part for part in (_count(files, "file"), _count(folders, "folder"))
                          if part)
    first = sorted(found, key=lambda item: (item.folder, len(item.path.parts), str(item.path)))
    names = [_name(item, root) for item in first[:shown]]
    more = ", …" if len(found) > shown else ""
    return f"{counts} ({', '.join(names)}{more})"


@dataclass(frozen=True, slots=True)
class StartTightening:
    """What the start made private: the line for the log, and whether to tell
    the person (when the agent had kept data there: its files were exposed)."""

    line: str
    tell: bool


def tighten_on_start(paths: AgentPaths) -> StartTightening | None:
    """Tighten an exposed agent folder, all of it; None when nothing was exposed.
    A folder that holds no store yet (the person's configuration before the
    first start) is tightened without a word to the person, only logged."""
    if not exposed(paths):
        return None
    found = loose_modes(paths)
    if not found:
        return None
    has_run = any(p.exists() for p in (paths.turns_db, paths.archive_db))
    outcome = tighten(found)
    line = ""
    if outcome.done:
        line = (f"{describe(outcome.done, paths.root)} in {paths.root} could be read by "
                "other users of this machine; now only you can.")
    if outcome.failed:
        failed = [item for item, _ in outcome.failed]
        reason = outcome.failed[0][1]
        line += (f"{' ' if line else ''}{describe(failed, paths.root)} could not be made "
                 f"private ({reason}); `noema doctor` lists them.")
    return StartTightening(line, tell=has_run or bool(outcome.failed))


def _look(path: Path, found: list[Loose]) -> bool:
    """Note `path` if it is loose; whether it is a folder to walk into."""
    try:
        info = path.lstat()
    except OSError:
        return False
    if stat.S_ISLNK(info.st_mode):
        return False
    folder = stat.S_ISDIR(info.st_mode)
    if info.st_mode & _OTHERS:
        found.append(Loose(path, stat.S_IMODE(info.st_mode), folder))
    return folder


def _walk(folder: Path, found: list[Loose]) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return  # unreadable: its own mode was noted, and the doctor names it
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            continue
        is_folder = stat.S_ISDIR(info.st_mode)
        if info.st_mode & _OTHERS:
            found.append(Loose(Path(entry.path), stat.S_IMODE(info.st_mode), is_folder))
        if is_folder:
            _walk(Path(entry.path), found)


def _count(n: int, noun: str) -> str:
    return "" if n == 0 else f"{n} {noun}{'' if n == 1 else 's'}"


def _name(item: Loose, root: Path) -> str:
    if item.path == root:
        return "the agent's folder"
    if item.path == root.parent and root.parent.name == "agents":
        return "the folder of all agents"
    try:
        name = item.path.relative_to(root).as_posix()
    except ValueError:
        name = str(item.path)
    return name + ("/" if item.folder else "")
