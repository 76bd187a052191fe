"""Running a shell command in a bubblewrap sandbox, with limits.

The sandbox sees the system folders read-only, the workspaces read-write
(their `.git` read-only), the read-only roots read-only, and nothing else of
the person's files; the agent's own data is hidden. It has its own process,
network (loopback only, unless the network is allowed), IPC and host-name
namespaces, and dies with the agent. Output is kept up to a cap: the head
and the tail, with the size of what was left out in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .settings import ShellSettings

_SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/srv")
_MAYBE_LINKED = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_DRAIN_GRACE_S = 1.0


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


def bwrap_argv(bwrap: str, layout: Layout, command: Sequence[str]) -> list[str]:
    """The bubblewrap command line that runs `command` inside `layout`."""
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-all"]
    if layout.network:
        argv.append("--share-net")
    if os.geteuid() == 0:
        # As root bubblewrap keeps capabilities unless told: no remounting.
        argv += ["--cap-drop", "ALL"]
    for folder in _SYSTEM_DIRS:
        if os.path.isdir(folder):
            argv += ["--ro-bind", folder, folder]
    for name in _MAYBE_LINKED:
        if os.path.islink(name):
            argv += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            argv += ["--ro-bind", name, name]
    if layout.network:
        resolv = os.path.realpath("/etc/resolv.conf")
        if not resolv.startswith("/etc/") and os.path.exists(resolv):
            argv += ["--ro-bind", resolv, resolv]  # often a link into /run
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
    # Outer folders first: a root nested in another must be mounted over it.
    folders = [(f, False) for f in layout.readonly] + [(f, True) for f in layout.writable]
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
    argv += ["--remount-ro", "/", "--chdir", str(layout.workdir), "--", *command]
    return argv


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

    def render(self) -> str:
        text = self.head.decode("utf-8", "replace")
        if self.omitted:
            text += f"\n[... {self.omitted} bytes of output omitted ...]\n"
        return text + self.tail.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Finished:
    """How a command ended."""

    exit_code: int | None  # None when it was killed for its time limit
    output: str
    output_bytes: int
    timed_out: bool
    seconds: float


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    output: Output,
) -> Finished:
    """Run `argv` in its own process group, feeding `output`, within a time limit.

    On cancellation the whole group is killed before CancelledError goes on;
    whatever it printed so far stays in `output` for the caller to report.
    """
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
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
    )


class Sandbox:
    """Runs commands as the shell settings say: under bubblewrap, or bare if
    the person explicitly chose `sandbox = "none"`."""

    def __init__(self, settings: ShellSettings) -> None:
        self.settings = settings
        self._works = False

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
        probe = Output(4000)
        try:
            result = await run_process(
                bwrap_argv(program, layout, ["true"]),
                cwd=layout.workdir,
                env=sandbox_env(),
                timeout_s=10,
                output=probe,
            )
        except OSError as exc:
            raise SandboxUnavailable(f"bubblewrap could not be started: {exc}") from exc
        if result.exit_code != 0:
            raise SandboxUnavailable(
                "bubblewrap cannot create a sandbox on this system "
                f"({result.output.strip() or 'exit code ' + str(result.exit_code)}). Unprivileged "
                "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1 or "
                "an AppArmor rule for bwrap). To run commands without a sandbox, set "
                '[shell] sandbox = "none"'
            )
        self._works = True

    def argv(self, layout: Layout, command: str) -> list[str]:
        shell = ["/bin/sh", "-c", command]
        return bwrap_argv(self._program(), layout, shell) if self.isolated else shell

    def env(self, layout: Layout) -> dict[str, str]:
        env = sandbox_env()
        if not self.isolated:
            # Unsandboxed by the person's choice: their own tools and home,
            # still without the agent's variables (keys live there).
            env["PATH"] = os.environ.get("PATH", _PATH)
            env["HOME"] = os.environ.get("HOME", str(layout.workdir))
        return env

    async def run(self, layout: Layout, command: str, timeout_s: float, output: Output) -> Finished:
        """Run a command; see `run_process` for cancellation."""
        await self.check(layout)
        return await run_process(
            self.argv(layout, command),
            cwd=layout.workdir,
            env=self.env(layout),
            timeout_s=timeout_s,
            output=output,
        )
