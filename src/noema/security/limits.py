"""Resource limits of one command: memory, processes, open files, file size.

Without limits a command can allocate or fork until the machine gives up,
long before its time limit ends it. Each command gets its own cap, by the
best mechanism this process can use, chosen once:

- **cgroup v2, delegated**: a cgroup v2 folder this process owns, with the
  memory and pids controllers. The agent moves itself into a leaf
  (`agent`) so that the folder may hand its controllers down, then makes a
  child per command with `memory.max`, `memory.swap.max` and `pids.max`.
- **cgroup v1**: the `memory` and `pids` hierarchies, where this process may
  create folders under its own cgroup (root on most servers and containers
  with a writable `/sys/fs/cgroup`): a child per command with
  `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`) and `pids.max`.
  Each controller is used on its own when only one is writable. (Moving the
  starting process into its cgroups is the dearest step of the confinement:
  milliseconds, more on a busy machine.)
- **rlimits** otherwise: `RLIMIT_DATA` for memory (heap and private
  mappings, not address-space reservations as `RLIMIT_AS` would count,
  which breaks runtimes that reserve large ranges up front; it is per
  process, so a command of many processes may use more in all).
  `RLIMIT_NPROC` counts every process of the uid, so set on the sandbox from
  outside it would count all the person's processes; it is set *inside* the
  sandbox's user namespace instead (by `prlimit`, after bubblewrap made the
  namespace), where the kernel counts only the sandbox's own processes. The
  kernel exempts uid 0 from it: as root without a writable cgroup there is
  no process cap, only the time limit and the PID namespace that dies with
  the command.

Whatever the mechanism, `RLIMIT_NOFILE` and `RLIMIT_FSIZE` are set on the
process that starts the command (inherited by everything it starts).
That process joins its cgroups and takes its rlimits before it execs the
sandbox, so nothing of the command runs outside them; the cgroups are
removed after.
A cgroup records when it refused memory or a process, which is how the tool
result can say that the command hit a limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import resource
import shutil
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .settings import ShellSettings

_MIB = 1024 * 1024
_CGROUP_PREFIX = "noema-"
_REMOVE_TRIES = 100  # the kernel reaps a killed PID namespace asynchronously
_REMOVE_PAUSE_S = 0.02


@dataclass(frozen=True, slots=True)
class Limits:
    """The caps of one command, as the shell settings give them."""

    memory_mb: int
    max_processes: int
    max_open_files: int
    max_file_mb: int

    @classmethod
    def of(cls, settings: ShellSettings) -> Limits:
        return cls(
            settings.memory_mb,
            settings.max_processes,
            settings.max_open_files,
            settings.max_file_mb,
        )


# -- finding the cgroups this process may use ------------------------------------


@dataclass(frozen=True, slots=True)
class _Base:
    """A cgroup folder under which command cgroups can be made."""

    version: int  # 1 or 2
    controller: str  # "memory", "pids", or "" for a v2 folder holding both
    folder: Path


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" the v2 one."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                found[name] = path
    return found


def _cgroup_mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root inside the hierarchy, mount point, fs type, options) of cgroup mounts."""
    mounts = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            dash = fields.index("-")
            fstype = fields[dash + 1]
            if fstype in ("cgroup", "cgroup2"):
                options = set(fields[dash + 3].split(",")) if len(fields) > dash + 3 else set()
                mounts.append((fields[3], _unescape(fields[4]), fstype, options))
    return mounts


def _unescape(field: str) -> str:
    # mountinfo writes spaces, tabs, newlines and backslashes as octal escapes.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _folder_of(own: str, root: str, mountpoint: str) -> Path | None:
    if own != root and not own.startswith(root.rstrip("/") + "/"):
        return None  # our cgroup is not visible under this mount
    return Path(mountpoint, own[len(root):].lstrip("/"))


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK) and os.access(folder / "cgroup.procs", os.W_OK)


def _v1_bases() -> list[_Base]:
    own = _own_cgroups()
    bases = []
    for controller in ("memory", "pids"):
        for root, mountpoint, fstype, options in _cgroup_mounts():
            if fstype != "cgroup" or controller not in options or controller not in own:
                continue
            folder = _folder_of(own[controller], root, mountpoint)
            if folder is not None and _writable(folder):
                bases.append(_Base(1, controller, folder))
                break
    return bases


def _v2_base() -> _Base | None:
    """A delegated cgroup v2 folder, made ready to hold one child per command.

    Only a folder holding no process but this one is used: moving the agent
    into the `agent` leaf must not move anyone else's processes.
    """
    own = _own_cgroups().get("")
    if own is None:
        return None
    for root, mountpoint, fstype, _ in _cgroup_mounts():
        if fstype != "cgroup2":
            continue
        folder = _folder_of(own, root, mountpoint)
        if folder is None or folder == Path(mountpoint) or not _writable(folder):
            continue
        try:
            if not {"memory", "pids"} <= set((folder / "cgroup.controllers").read_text().split()):
                continue
            if (folder / "cgroup.procs").read_text().split() != [str(os.getpid())]:
                continue
            leaf = folder / "agent"
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text("0")
            (folder / "cgroup.subtree_control").write_text("+memory +pids")
        except OSError:
            continue
        return _Base(2, "", folder)
    return None


_lock = threading.Lock()
_bases: list[_Base] | None = None


def cgroup_bases() -> list[_Base]:
    """The cgroup folders commands are confined in, found once per process
    (an empty list means rlimits only)."""
    global _bases
    with _lock:
        if _bases is None:
            v2 = _v2_base()
            _bases = [v2] if v2 is not None else _v1_bases()
            for base in _bases:
                _remove_stale(base.folder)
        return _bases


def _remove_stale(folder: Path) -> None:
    """Command cgroups left behind by agents that died: removed when empty."""
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            owner = entry.name.removeprefix(_CGROUP_PREFIX).split("-")[0]
            if entry.name.startswith(_CGROUP_PREFIX) and owner.isdigit():
                if not Path("/proc", owner).exists():
                    with contextlib.suppress(OSError):
                        entry.rmdir()


def capped_by(*, sandboxed: bool) -> dict[str, str]:
    """How a command's memory and processes are capped here: "cgroup",
    "rlimit" or "none" for each (for people and tests)."""
    controllers = {base.controller for base in cgroup_bases()}
    if "" in controllers:
        controllers = {"memory", "pids"}
    if "pids" in controllers:
        processes = "cgroup"
    elif sandboxed and _nproc_works_inside():
        processes = "rlimit"
    else:
        processes = "none"
    return {"memory": "cgroup" if "memory" in controllers else "rlimit", "processes": processes}


def _nproc_works_inside() -> bool:
    # RLIMIT_NPROC does nothing for uid 0, and outside a user namespace it
    # would count all of the person's processes.
    return os.geteuid() != 0 and _prlimit() is not None


# -- one command's confinement --------------------------------------------------

_names = itertools.count(1)
# Joins the cgroups named before "--", then runs what follows it.
_JOIN = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"'
_RLIMITS = {
    "nofile": resource.RLIMIT_NOFILE,
    "fsize": resource.RLIMIT_FSIZE,
    "data": resource.RLIMIT_DATA,
}
_pending: set[asyncio.Task[None]] = set()  # background removals, kept from the collector


@dataclass(frozen=True, slots=True)
class _Group:
    base: _Base
    folder: Path


class Confinement:
    """The limits of one command: made before it starts, joined by the
    process that starts it (before it execs anything of the command), read
    and removed after it ended."""

    def __init__(self, limits: Limits, *, sandboxed: bool) -> None:
        self.limits = limits
        self._groups: list[_Group] = []
        self._sandboxed = sandboxed
        name = f"{_CGROUP_PREFIX}{os.getpid()}-{next(_names)}"
        for base in cgroup_bases():
            try:
                self._groups.append(self._make(base, base.folder / name))
            except OSError:
                continue  # this controller stays on rlimits
        self._controllers = {g.base.controller for g in self._groups}
        if any(g.base.version == 2 for g in self._groups):
            self._controllers = {"memory", "pids"}

    def _make(self, base: _Base, folder: Path) -> _Group:
        folder.mkdir()
        try:
            memory = str(self.limits.memory_mb * _MIB)
            if base.version == 2:
                (folder / "memory.max").write_text(memory)
                with contextlib.suppress(OSError):
                    (folder / "memory.swap.max").write_text("0")
                (folder / "pids.max").write_text(str(self.limits.max_processes))
            elif base.controller == "memory":
                (folder / "memory.limit_in_bytes").write_text(memory)
                with contextlib.suppress(OSError):  # absent without swap accounting
                    (folder / "memory.memsw.limit_in_bytes").write_text(memory)
            else:
                (folder / "pids.max").write_text(str(self.limits.max_processes))
        except OSError:
            with contextlib.suppress(OSError):
                folder.rmdir()
            raise
        return _Group(base, folder)

    def inner(self) -> list[str]:
        """What to put before the command inside the sandbox (after bubblewrap
        made its user namespace)."""
        if "pids" in self._controllers or not (self._sandboxed and _nproc_works_inside()):
            return []
        n = self.limits.max_processes
        return [str(_prlimit()), f"--nproc={n}:{n}", "--"]

    def outer(self, argv: Sequence[str]) -> list[str]:
        """`argv` started inside the command's cgroups and rlimits: a shell
        joins the cgroups ("0" is the writing process itself) and execs
        `prlimit`, which sets the rlimits and execs `argv`. Two small execs
        cost less than a Python `preexec_fn`, which forbids vfork and copies
        the whole agent process for every command."""
        wrapped = list(argv)
        program = _prlimit()
        if program is not None:
            options = [f"--{name}={value}" for name, value in self._rlimits()]
            wrapped = [program, *options, "--", *wrapped]
        if self._groups:
            procs = [str(g.folder / "cgroup.procs") for g in self._groups]
            wrapped = ["/bin/sh", "-c", _JOIN, "noema-limits", *procs, "--", *wrapped]
        return wrapped

    def preexec(self) -> Callable[[], None] | None:
        """Where `prlimit` is missing, the function that sets the rlimits in
        the child between fork and exec (slower: see `outer`)."""
        if _prlimit() is not None:
            return None
        rlimits = [(_RLIMITS[name], value) for name, value in self._rlimits()]

        def enter() -> None:
            for which, value in rlimits:
                resource.setrlimit(which, (value, value))

        return enter

    def _rlimits(self) -> list[tuple[str, int]]:
        wanted = [
            ("nofile", self.limits.max_open_files),
            ("fsize", self.limits.max_file_mb * _MIB),
        ]
        if "memory" not in self._controllers:
            wanted.append(("data", self.limits.memory_mb * _MIB))
        return [(name, _within_hard(_RLIMITS[name], value)) for name, value in wanted]

    def verdict(self, exit_code: int | None) -> str | None:
        """Which limit stopped the command, when one did and it can be told."""
        for group in self._groups:
            if group.base.controller in ("memory", "") and _count(group, "oom_kill") > 0:
                return (
                    f"The command hit the memory limit of {self.limits.memory_mb} MB and was "
                    "killed ([shell] memory_mb)."
                )
        for group in self._groups:
            if group.base.controller in ("pids", "") and _count(group, "max") > 0:
                return (
                    f"The command could not start more than {self.limits.max_processes} "
                    "processes ([shell] max_processes)."
                )
        if exit_code in (128 + signal.SIGXFSZ, -signal.SIGXFSZ):
            return (
                f"The command hit the file size limit of {self.limits.max_file_mb} MB "
                "([shell] max_file_mb)."
            )
        return None

    async def release(self) -> None:
        """Kill what is left of the command and remove its cgroups."""
        groups, self._groups = self._groups, []
        for group in groups:
            await _remove(group.folder, group.base.version)

    def release_soon(self) -> None:
        """`release` without waiting: its processes are killed now, the
        cgroups removed in the background (or by a later agent)."""
        for group in self._groups:
            _kill_members(group.folder, group.base.version)
        with contextlib.suppress(RuntimeError):  # no loop: left to `_remove_stale`
            task = asyncio.get_running_loop().create_task(self.release())
            _pending.add(task)
            task.add_done_callback(_pending.discard)


def _within_hard(which: int, value: int) -> int:
    # Only root may raise a hard limit: a setting above it means the hard limit.
    hard = resource.getrlimit(which)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def _count(group: _Group, key: str) -> int:
    # v2: memory.events / pids.events; v1: memory.oom_control / pids.events.
    files = {
        ("", "oom_kill"): "memory.events",
        ("", "max"): "pids.events",
        ("memory", "oom_kill"): "memory.oom_control",
        ("pids", "max"): "pids.events",
    }
    try:
        text = (group.folder / files[group.base.controller, key]).read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


async def _remove(folder: Path, version: int) -> None:
    for _ in range(_REMOVE_TRIES):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            _kill_members(folder, version)
            await asyncio.sleep(_REMOVE_PAUSE_S)
    # Still busy (a process stuck in the kernel): a later agent removes it.


def _kill_members(folder: Path, version: int) -> None:
    if version == 2:
        with contextlib.suppress(OSError):
            (folder / "cgroup.kill").write_text("1")
            return
    with contextlib.suppress(OSError):
        for pid in (folder / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)


@functools.cache
def _prlimit() -> str | None:
    # A system program, so that the sandbox (which sees the system folders)
    # finds it at the same path.
    return shutil.which("prlimit", path="/usr/bin:/bin:/usr/sbin:/sbin")
