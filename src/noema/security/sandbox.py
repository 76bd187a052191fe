"""Running a shell command in a bubblewrap sandbox, with limits.

The sandbox sees the system folders read-only, the workspaces read-write
(their `.git` read-only), the read-only roots read-only, and nothing else of
the person's files; the data of every agent is hidden. It has its own user,
process, network (loopback only, unless the network is allowed), IPC and
host-name namespaces, may not make further user namespaces, and dies with
the agent. A system-call filter (`seccomp.py`) keeps it from making setuid
or setgid files, from the keyrings of the person's session, from attaching
to bubblewrap's init and, with the network off, from making Unix sockets,
which would reach the host's services through socket files in the roots. A
second filter hands the command's opens, links and renames to a supervisor
that decides on each when it is made (`open_guard.py`), so that a secret
that appears, is re-saved or is given another name while the command runs
stays out of its reach too (the masks are laid at the start), a git
configuration is read without its credentials, and the files the command
opened in the roots are known when it ends (`Finished.opened`). Memory and
processes are capped per command (see `limits.py`). Output is kept up to a cap: the
head and the tail, with the size of what was left out in between.

When the agent runs as root, the command runs as uid 1000 in its own user
namespace, without capabilities and unable to gain any (no new privileges:
setuid programs grant nothing). bubblewrap started by root maps that uid to
root's kernel uid, so files the command writes in the workspace belong to
the person (root) as they should, and git sees the repositories as its own.
The cost is that the kernel still grants root's *owner* permission bits,
which is why the sandbox also masks every entry of the system folders that
an unprivileged user could not read (`root_files.py`), makes the kernel's
knobs under `/proc` read-only (`sys`, `sysrq-trigger`, `irq`, `bus`, `fs` and
any other file with a write bit) and hides its internals (`kcore`, `keys`,
`timer_list`, `sched_debug`, `acpi`, `scsi` and every entry only root may
read). The alternatives were worse: starting bubblewrap
as an unprivileged uid makes the workspace unwritable (or its new files
someone else's), and id-mapped mounts need a newer bubblewrap than the
distributions ship. What remains of root is what any process of the
person's could reach: with the network allowed, services on loopback or
abstract sockets that trust the caller's uid see root.

A person who is not root keeps bubblewrap's usual mapping: their own uid.

Files come and go on a person's machine: one the sandbox was to mask can
vanish between the scan and bubblewrap's mounts, which then fail. bubblewrap
says on its status descriptor whether it started the command (it reports an
exit code only for a command it started), so such a start is made again,
from a fresh scan, a few times; a command that started is never run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import os
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from .limits import Confinement, Limits, cgroup_bases
from .open_guard import GuardUnavailable, Opened, OpenGuard, Secrets, spawn
from .root_files import prefetch, root_only
from .seccomp import FilterUnavailable, program_fd
from .settings import ShellSettings

_SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/srv")
_MAYBE_LINKED = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_DRAIN_GRACE_S = 1.0
_INSIDE_ID = 1000  # the uid and gid a root-started command has in its namespace
_START_TRIES = 3  # bubblewrap runs that failed before starting the command, at most
# /proc entries a process that owns root's kernel uid could write, then those
# it could read, whatever their mode says (after bwrap and docker).
_PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
_PROC_SYS_READONLY = ("--ro-bind", "/proc/sys", "/proc/sys")
_PROC_HIDDEN = (
    "kcore", "keys", "key-users", "timer_list", "timer_stats", "sched_debug",
    "latency_stats", "acpi", "scsi", "asound",
)


log = logging.getLogger(__name__)


class SandboxUnavailable(Exception):
    """bubblewrap is missing or cannot create its namespaces here."""


@dataclass(frozen=True, slots=True)
class Layout:
    """What a sandboxed command may see."""

    workdir: Path
    writable: tuple[Path, ...]
    readonly: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()  # masked even where a visible folder holds them
    network: bool = False
    frozen: tuple[Path, ...] = ()  # read-only even inside a writable folder (.git at any depth)
    secrets: Secrets | None = None  # judged at each open of the command (see `open_guard.py`)


def system_folders() -> tuple[str, ...]:
    """The system folders the sandbox sees (read-only), links excluded."""
    return tuple(
        f for f in _SYSTEM_DIRS + _MAYBE_LINKED if os.path.isdir(f) and not os.path.islink(f)
    )


def _root_only_masks(layout: Layout) -> tuple[list[Path], list[Path]]:
    """Root-only entries of the system folders to mask, leaving the person's
    roots visible when they lie there (a workspace in /srv); and, apart, the
    outermost root-only folders that hold a root (masked too, the roots then
    mounted back into the mask, so that the folder's other entries stay
    hidden)."""
    roots = [*layout.writable, *layout.readonly]
    masks: list[Path] = []
    holders: list[Path] = []
    for path in root_only(system_folders()):
        if not os.path.lexists(path):
            continue  # gone since the walk: nothing to mask, nowhere to mount
        if any(path.is_relative_to(r) for r in roots):
            continue  # the person's own root, or inside one
        if any(r.is_relative_to(path) for r in roots):
            holders.append(path)
        else:
            masks.append(path)
    holders = [h for h in holders if not any(h != o and h.is_relative_to(o) for o in holders)]
    return masks, holders


def _mask(path: Path) -> list[str]:
    if path.is_dir():
        return ["--tmpfs", str(path), "--remount-ro", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


@functools.cache
def _proc_shield() -> tuple[str, ...]:
    """Mounts over the sandbox's /proc: the kernel's knobs read-only, its
    internals hidden. Its top level is the same as the host's (less the
    processes), so the host's tells which entries exist and who may read them."""
    argv: list[str] = []
    for entry in sorted(os.listdir("/proc")):
        path = f"/proc/{entry}"
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if entry.isdigit() or stat.S_ISLNK(mode):
            continue
        if entry in _PROC_HIDDEN or not mode & stat.S_IROTH:
            argv += _mask(Path(path))
        elif entry in _PROC_READONLY or mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
            argv += ["--ro-bind", path, path]
    return tuple(argv)


def bwrap_argv(
    bwrap: str,
    layout: Layout,
    command: Sequence[str],
    *,
    tmp_mb: int | None = None,
    seccomp_fd: int | None = None,
    status_fd: int | None = None,
) -> list[str]:
    """The bubblewrap command line that runs `command` inside `layout`
    (`/tmp` and `/var/tmp` of `tmp_mb` MiB each when given), under the
    system-call filter bubblewrap reads from `seccomp_fd` when given (see
    `seccomp.py`), reporting on `status_fd` when given (see `_Started`); the
    descriptors must be passed to bubblewrap."""
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if status_fd is not None:
        argv += ["--json-status-fd", str(status_fd)]
    argv += ["--disable-userns"]  # no namespace of its own where it would hold capabilities
    if layout.network:
        argv.append("--share-net")
    as_root = os.geteuid() == 0
    if as_root:
        # As root bubblewrap keeps capabilities unless told, and maps the
        # command to uid 0 unless given another (see the module docstring).
        argv += ["--uid", str(_INSIDE_ID), "--gid", str(_INSIDE_ID), "--cap-drop", "ALL"]
    for folder in _SYSTEM_DIRS:
        if os.path.isdir(folder):
            argv += ["--ro-bind", folder, folder]
    for name in _MAYBE_LINKED:
        if os.path.islink(name):
            argv += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            argv += ["--ro-bind", name, name]
    holders: list[Path] = []
    if as_root:
        masks, holders = _root_only_masks(layout)
        for path in masks:
            argv += _mask(path)
        for path in holders:
            argv += ["--tmpfs", str(path)]  # read-only once the roots are mounted in it
    if layout.network:
        resolv = os.path.realpath("/etc/resolv.conf")
        if not resolv.startswith("/etc/") and os.path.exists(resolv):
            argv += ["--ro-bind", resolv, resolv]  # often a link into /run
    # The knobs of the sandbox's own namespaces (IPC, PID) are its owner's to
    # write: read-only for everyone. The rest of the shield only matters to
    # root's uid; anyone else reads /proc as themselves.
    argv += ["--proc", "/proc", *(_proc_shield() if as_root else _PROC_SYS_READONLY)]
    # /dev is a tmpfs too: read-only, but for its shared memory, sized below.
    argv += ["--dev", "/dev", "--remount-ro", "/dev"]
    for scratch in ("/dev/shm", "/tmp", "/var/tmp"):
        if tmp_mb is not None:
            argv += ["--size", str(tmp_mb * 1024 * 1024)]  # tmpfs is memory too
        argv += ["--tmpfs", scratch]
    # Outer folders first: a root nested in another must be mounted over it.
    # (Anchors too: a bind's source is the host's folder, with the host's
    # mounts inside, so one made after a deeper root would undo it.)
    folders = [(f, False) for f in layout.readonly] + [(f, True) for f in layout.writable]
    folders += [(f, True) for f in _anchors(layout)]
    for folder, writable in sorted(folders, key=lambda item: len(item[0].parts)):
        argv += ["--bind" if writable else "--ro-bind", str(folder), str(folder)]
        git = folder / ".git"
        if writable and git.exists() and not git.is_symlink():
            argv += ["--ro-bind", str(git), str(git)]
    for folder in layout.frozen:
        if folder.exists() and not folder.is_symlink():
            argv += ["--ro-bind", str(folder), str(folder)]
    for secret in layout.hidden:
        if secret.is_dir() and not secret.is_symlink():
            argv += ["--tmpfs", str(secret), "--remount-ro", str(secret)]
        elif secret.exists() and not secret.is_symlink():
            argv += ["--ro-bind", "/dev/null", str(secret)]
    # The sandbox's own root is a scratch tmpfs holding the mount points;
    # read-only, a write outside the visible folders fails instead of
    # landing there unseen. /tmp and /var/tmp stay writable scratch space.
    for path in holders:
        argv += ["--remount-ro", str(path)]
    argv += ["--remount-ro", "/", "--chdir", str(layout.workdir), "--", *command]
    return argv


def _anchors(layout: Layout) -> list[Path]:
    """The folders between a writable root and a hidden path in it, outer
    first. Each is mounted on itself: a mount point cannot be renamed, so a
    command cannot move a secret (or the agents' data) out from under the
    rule that names it by renaming a folder that holds it."""
    found: set[Path] = set()
    roots = [*layout.writable, *layout.readonly]
    for secret in layout.hidden:
        holding = [r for r in roots if secret.is_relative_to(r)]
        if not holding:
            continue
        root = max(holding, key=lambda r: len(r.parts))  # the innermost decides
        if root not in layout.writable:
            continue  # nothing can be renamed in a read-only root
        for folder in secret.parents:
            if folder == root or not folder.is_relative_to(root):
                break
            if folder.is_dir() and not folder.is_symlink():
                found.add(folder)
    return sorted(found, key=lambda f: len(f.parts))


def sandbox_env(home: str = "/tmp") -> dict[str, str]:
    """The environment of a command: nothing of the agent's (no keys)."""
    return {
        "PATH": _PATH,
        "HOME": home,
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TERM": "dumb",
        "NOEMA_SANDBOX": "1",
    }


@dataclass(slots=True)
class Output:
    """Collects a stream, keeping `cap` bytes: half from the start, half from the end."""

    cap: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            keep = self.cap - self.cap // 2
            if len(self.tail) > keep:
                del self.tail[: len(self.tail) - keep]

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def clear(self) -> None:
        """Forget what was fed (a start that is made again)."""
        self.head.clear()
        self.tail.clear()
        self.total = 0

    def render(self) -> str:
        text = self.head.decode("utf-8", "replace")
        if self.omitted:
            text += f"\n[... {self.omitted} bytes of output omitted ...]\n"
        return text + self.tail.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Finished:
    """How a command ended, and the files inside the roots it opened, as the
    open guard saw them (`OpenGuard.opened`; None when no guard ran, so that
    a reader of it never takes "unseen" for "opened nothing")."""

    exit_code: int | None  # None when it was killed for its time limit
    output: str
    output_bytes: int
    timed_out: bool
    seconds: float
    limit: str | None = None  # the resource limit that stopped it, said plainly
    opened: tuple[Opened, ...] | None = None
    opened_capped: bool = False  # it opened more than `opened` holds


class _Started:
    """What bubblewrap reports on its status descriptor (`--json-status-fd`):
    its lines are JSON objects, and one with "exit-code" comes only after a
    command it started (it is told so just before the command's exec; the
    command cannot write there). Read once bubblewrap has ended."""

    def __init__(self) -> None:
        self._read, self.fd = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._read, False)

    def close(self) -> None:
        for fd in (self.fd, self._read):
            if fd >= 0:
                os.close(fd)
        self.fd = self._read = -1

    def before_command(self, finished: Finished) -> bool:
        """Whether bubblewrap failed before it started the command: it ended
        of itself, with its own failure code (1), and reported no exit code.
        Killed or timed out, it may have started it."""
        report = bytearray()
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self._read, 65536):
                report += chunk
        if finished.timed_out or finished.exit_code != 1:
            return False
        return b'"exit-code"' not in report


def _kill_group(process: asyncio.subprocess.Process | _Guarded) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


class _Guarded:
    """A process started under the open guard, seen as asyncio's processes
    are (`pid`, `returncode`, `stdout`, `wait()`): asyncio cannot start it,
    since the guard's filter must be on the thread that forks."""

    def __init__(self, popen: subprocess.Popen, stdout: asyncio.StreamReader) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdout = stdout
        loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[None] = loop.create_future()
        self._pidfd = os.pidfd_open(popen.pid)

        def exited() -> None:
            loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._popen.wait()  # it has ended: reaped at once
            if not self._exited.done():
                self._exited.set_result(None)

        loop.add_reader(self._pidfd, exited)

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        await asyncio.shield(self._exited)
        assert self._popen.returncode is not None
        return self._popen.returncode


async def _start_guarded(
    argv: Sequence[str],
    secrets: Secrets,
    *,
    cwd: Path,
    env: dict[str, str],
    preexec: Callable[[], None] | None,
    pass_fds: Sequence[int],
) -> tuple[_Guarded, OpenGuard]:
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)

    def start() -> tuple[subprocess.Popen, OpenGuard]:
        return spawn(
            secrets, argv, cwd=cwd, env=env, stdin=devnull, stdout=write_end,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=preexec,
            pass_fds=tuple(pass_fds),
        )

    started = asyncio.ensure_future(asyncio.to_thread(start))
    try:
        try:
            popen, guard = await asyncio.shield(started)
        except asyncio.CancelledError:
            # The start goes on in its thread: wait for it, then end what it started.
            with contextlib.suppress(BaseException):
                popen, guard = await started
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(popen.pid, signal.SIGKILL)
                await asyncio.to_thread(popen.wait)
                await close_guard(guard)
            os.close(read_end)
            raise
        except BaseException:
            os.close(read_end)
            raise
    finally:
        os.close(write_end)
        os.close(devnull)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    try:
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_end, "rb", buffering=0)
        )
        return _Guarded(popen, reader), guard
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        await close_guard(guard)
        raise


async def close_guard(guard: OpenGuard) -> None:
    """Close `guard` in a thread: closing waits for its threads to end
    (at once as a rule, up to two seconds for one that is slow to), and the
    event loop must not wait with it. A cancellation while it closes goes on
    to the caller; the close finishes all the same."""
    await asyncio.shield(asyncio.ensure_future(asyncio.to_thread(guard.close)))


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    output: Output,
    preexec: Callable[[], None] | None = None,
    pass_fds: Sequence[int] = (),
    secrets: Secrets | None = None,
) -> Finished:
    """Run `argv` in its own process group, feeding `output`, within a time limit.

    `preexec` runs in the child between fork and exec; `pass_fds` are
    descriptors the child inherits. With `secrets`, `argv` (which must start
    bubblewrap with its filter) runs under the open guard, which refuses
    them at each open and lists the files it opened in the roots
    (`Finished.opened`). On cancellation the whole group is killed before
    CancelledError goes on; whatever it printed so far stays in `output`
    for the caller to report.
    """
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"a time limit must be a positive number of seconds, not {timeout_s}")
    started = time.monotonic()
    guard: OpenGuard | None = None
    process: asyncio.subprocess.Process | _Guarded
    if secrets is None:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,
            pass_fds=tuple(pass_fds),
        )
    else:
        process, guard = await _start_guarded(
            argv, secrets, cwd=cwd, env=env, preexec=preexec, pass_fds=pass_fds
        )
    assert process.stdout is not None
    stream = process.stdout

    async def pump() -> None:
        while chunk := await stream.read(64 * 1024):
            output.feed(chunk)

    reader = asyncio.create_task(pump())
    timed_out = False
    try:
        try:
            await asyncio.wait_for(process.wait(), timeout_s)
        except TimeoutError:
            timed_out = True
    except BaseException:
        _kill_group(process)
        # Let the reader take what is still in the pipe, so the partial output
        # reported for a cancelled call is complete up to the kill.
        with contextlib.suppress(BaseException):
            await asyncio.shield(process.wait())
            await asyncio.wait_for(asyncio.shield(reader), _DRAIN_GRACE_S)
        reader.cancel()
        raise
    finally:
        # Leftovers of the command (background jobs) go with it.
        _kill_group(process)
        if guard is not None:
            await close_guard(guard)
    if timed_out:
        await process.wait()
    try:
        await asyncio.wait_for(reader, _DRAIN_GRACE_S)
    except TimeoutError:
        reader.cancel()  # someone outside the group holds the pipe open; what we have is kept
    return Finished(
        None if timed_out else process.returncode,
        output.render(),
        output.total,
        timed_out,
        time.monotonic() - started,
        opened=guard.opened() if guard is not None else None,
        opened_capped=guard.opened_capped if guard is not None else False,
    )


class Sandbox:
    """Runs commands as the shell settings say: under bubblewrap, or bare if
    the person explicitly chose `sandbox = "none"`."""

    def __init__(self, settings: ShellSettings) -> None:
        self.settings = settings
        self.limits = Limits.of(settings)
        self._works = False
        self._limits_ready = False
        self._on_close: list[Callable[[], None]] = []
        # Called with each bubblewrap command line just before it starts
        # (tests change the file system at that moment through it).
        self.before_start: Callable[[list[str]], None] | None = None
        if self.isolated and os.geteuid() == 0:
            prefetch(system_folders())  # the first command should not wait for the walk

    def on_close(self, release: Callable[[], None]) -> None:
        """Have `close` call `release` (what a tool built on this sandbox holds:
        change notifications are a per-user kernel resource)."""
        self._on_close.append(release)

    def close(self) -> None:
        """Give back what the tools built on this sandbox hold."""
        while self._on_close:
            self._on_close.pop()()

    @property
    def isolated(self) -> bool:
        return self.settings.sandbox == "bubblewrap"

    def _program(self) -> str:
        program = shutil.which(self.settings.bwrap_path)
        if program is None:
            raise SandboxUnavailable(
                f"bubblewrap ({self.settings.bwrap_path!r}) is not installed, so commands "
                "cannot be sandboxed. Install it (Debian/Ubuntu: apt install bubblewrap) or, "
                'to run commands without a sandbox, set [shell] sandbox = "none"'
            )
        return program

    async def check(self, layout: Layout) -> None:
        """Make sure bubblewrap can start here; raise SandboxUnavailable saying why."""
        if not self.isolated or self._works:
            return
        program = self._program()
        if os.geteuid() == 0:
            await asyncio.to_thread(root_only, system_folders())
        probe = Output(4000)
        try:
            result = await self._start(
                layout,
                lambda filter_fd, status_fd: bwrap_argv(
                    program, layout, ["true"], tmp_mb=self.limits.memory_mb,
                    seccomp_fd=filter_fd, status_fd=status_fd,
                ),
                env=sandbox_env(),
                timeout_s=10,
                output=probe,
            )
        except OSError as exc:
            raise SandboxUnavailable(f"bubblewrap could not be started: {exc}") from exc
        if "Unknown option" in result.output:
            raise SandboxUnavailable(
                f"this bubblewrap is too old ({result.output.strip()}): version 0.8 or "
                "later is needed. Upgrade it or, to run commands without a sandbox, set "
                '[shell] sandbox = "none"'
            )
        if result.exit_code != 0:
            raise SandboxUnavailable(
                "bubblewrap cannot create a sandbox on this system "
                f"({result.output.strip() or 'exit code ' + str(result.exit_code)}). Unprivileged "
                "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1 or "
                "an AppArmor rule for bwrap). To run commands without a sandbox, set "
                '[shell] sandbox = "none"'
            )
        self._works = True

    def argv(
        self,
        layout: Layout,
        command: str,
        inner: Sequence[str] = (),
        *,
        seccomp_fd: int | None = None,
        status_fd: int | None = None,
    ) -> list[str]:
        """The command line of `command`; `inner` goes before the shell, inside
        the sandbox, under the filter read from `seccomp_fd` (see `_filter`),
        bubblewrap reporting on `status_fd` (see `_Started`)."""
        shell = ["/bin/sh", "-c", command]
        if not self.isolated:
            return shell
        return bwrap_argv(
            self._program(), layout, [*inner, *shell], tmp_mb=self.limits.memory_mb,
            seccomp_fd=seccomp_fd, status_fd=status_fd,
        )

    async def _start(
        self,
        layout: Layout,
        argv: Callable[[int, int], list[str]],
        *,
        env: dict[str, str],
        timeout_s: float,
        output: Output,
        preexec: Callable[[], None] | None = None,
        secrets: Secrets | None = None,
    ) -> Finished:
        """Run bubblewrap's command line `argv(filter_fd, status_fd)` (see
        `run_process`). When bubblewrap failed before it started the command
        (a file it was to mask vanished since the scan, say), the line is made
        again, from a fresh scan, and run again: at most `_START_TRIES` runs,
        each given the whole time limit (a failed one lasts milliseconds)."""
        runs = 0
        while True:
            runs += 1
            started = _Started()
            filter_fd = -1
            try:
                filter_fd = self._filter(layout)
                line = argv(filter_fd, started.fd)
                if self.before_start is not None:
                    self.before_start(line)
                finished = await run_process(
                    line,
                    cwd=layout.workdir,
                    env=env,
                    timeout_s=timeout_s,
                    output=output,
                    preexec=preexec,
                    pass_fds=(filter_fd, started.fd),
                    secrets=secrets,
                )
                os.close(started.fd)  # bubblewrap has ended: nothing more is written
                started.fd = -1
                again = started.before_command(finished)
            finally:
                started.close()
                if filter_fd >= 0:
                    os.close(filter_fd)
            if not again or runs == _START_TRIES:
                return finished
            log.info(
                "bubblewrap failed before starting the command (%s); starting it again",
                finished.output.strip()[:300],
            )
            output.clear()

    @staticmethod
    def _filter(layout: Layout) -> int:
        """A descriptor holding the system-call filter of a command in
        `layout` (no Unix sockets without the network, no setuid files);
        the caller closes it."""
        try:
            return program_fd(network=layout.network)
        except FilterUnavailable as exc:
            raise SandboxUnavailable(
                f"{exc}. To run commands without a sandbox, set [shell] sandbox = \"none\""
            ) from exc

    def env(self, layout: Layout) -> dict[str, str]:
        env = sandbox_env()
        if not self.isolated:
            # Unsandboxed by the person's choice: their own tools and home,
            # still without the agent's variables (keys live there).
            env["PATH"] = os.environ.get("PATH", _PATH)
            env["HOME"] = os.environ.get("HOME", str(layout.workdir))
        return env

    async def run(self, layout: Layout, command: str, timeout_s: float, output: Output) -> Finished:
        """Run a command within its resource limits; see `run_process` for
        cancellation. A limit that stopped it is named in `limit`."""
        await self.check(layout)
        if not self._limits_ready:
            await asyncio.to_thread(cgroup_bases)  # found once; file system work
            self._limits_ready = True
        confinement = Confinement(self.limits, sandboxed=self.isolated)
        try:
            if self.isolated:
                finished = await self._start(
                    layout,
                    lambda filter_fd, status_fd: confinement.outer(self.argv(
                        layout, command, confinement.inner(),
                        seccomp_fd=filter_fd, status_fd=status_fd,
                    )),
                    env=self.env(layout),
                    timeout_s=timeout_s,
                    output=output,
                    preexec=confinement.preexec(),
                    secrets=layout.secrets,
                )
            else:
                finished = await run_process(
                    confinement.outer(self.argv(layout, command)),
                    cwd=layout.workdir,
                    env=self.env(layout),
                    timeout_s=timeout_s,
                    output=output,
                    preexec=confinement.preexec(),
                )
        except GuardUnavailable as exc:
            confinement.release_soon()
            raise SandboxUnavailable(
                f"{exc}. To run commands without a sandbox, set [shell] sandbox = \"none\""
            ) from exc
        except BaseException:
            confinement.release_soon()  # cancellation must not wait for the kernel's clean-up
            raise
        limit = confinement.verdict(finished.exit_code)
        await confinement.release()
        return finished if limit is None else replace(finished, limit=limit)
