"""How a configured MCP server is reached: the SDK's transport for it, with
secrets filled in and, for a stdio server, its program under bubblewrap.

A sandboxed server sees what a shell command sees (the system read-only, the
roots of `[files]` with secrets and the agent's data masked, no network
unless allowed), with the roots read-only unless the server's `workspace`
setting says otherwise, plus the folders it names in `read_only`. It gets
none of the agent's environment: only the variables configured for it.

Servers start with the person's umask, not the agent's private one (see
`privacy`). A server whose program is a Python from a virtual environment (its own
`bin/python`, or a script whose `#!` line names one) is lent that
environment and the interpreter it was made from, read-only, as found from
the environment's `pyvenv.cfg`. A program that still lies outside what the
sandbox shows is refused before it starts, with the `read_only` entry that
would lend it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..paths import AgentPaths
from ..privacy import with_person_umask
from ..security.masks import Masker
from ..security.policy import AccessPolicy
from ..security.sandbox import (
    Layout,
    Sandbox,
    SandboxUnavailable,
    bwrap_argv,
    sandbox_env,
    system_folders,
)
from ..security.seccomp import FilterUnavailable, program_fd
from ..security.settings import FilesSettings, ShellSettings
from .settings import ServerSettings, fill_secrets

# The system-call filter of each sandboxed server, by name: an in-memory file
# this process keeps open for the server's life (see `_filtered`).
_FILTERS: dict[str, int] = {}

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters

Streams = tuple[Any, Any]  # the SDK's (read stream, write stream)


class LaunchError(Exception):
    """A server cannot be started as configured; the message says why and what to do."""


class SandboxSetupFailed(LaunchError):
    """bubblewrap failed before it started the server's program (a file it was
    to mask vanished since the scan, say): a fresh start may well work.
    `said` is bubblewrap's own error, for the log and the person."""

    def __init__(self, said: str) -> None:
        super().__init__("bubblewrap failed to set up its sandbox, so the program was not started")
        self.said = said


class StartReport:
    """Where bubblewrap reports one start of a sandboxed server
    (`--json-status-fd`): an in-memory file of this process, opened by the
    shell that starts bubblewrap through its /proc path (the SDK lets no
    descriptor of ours through). Its first line comes as soon as bubblewrap
    forked, before it set up the sandbox; a line with "exit-code" only after
    a program it started has ended (see `security.sandbox._Started`)."""

    def __init__(self) -> None:
        self._fd = os.memfd_create("noema-bwrap-status", os.MFD_CLOEXEC)

    @property
    def path(self) -> str:
        return f"/proc/{os.getpid()}/fd/{self._fd}"

    def program_ended(self) -> bool:
        """Whether bubblewrap said a program it had started ended (read once it has ended)."""
        report = bytearray()
        while chunk := os.pread(self._fd, 65536, len(report)):
            report += chunk
        return b'"exit-code"' in report

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@dataclass(frozen=True, slots=True)
class Surroundings:
    """What the agent lends its servers: secrets, and the folders a sandboxed one may see."""

    secrets: Mapping[str, str]
    shell: ShellSettings
    policy: AccessPolicy | None = None  # None: no roots are visible to a sandboxed server
    agent_data: Path | None = None  # masked even where a root holds it

    @classmethod
    def of_agent(
        cls, files: FilesSettings, shell: ShellSettings, paths: AgentPaths,
        secrets: Mapping[str, str],
    ) -> Surroundings:
        """The surroundings of one agent, from its settings and secrets."""
        return cls(secrets, shell, AccessPolicy.from_settings(files, paths), paths.agents_dir)


def server_layout(server: ServerSettings, around: Surroundings) -> Layout:
    """What a sandboxed stdio server may see (walks the roots: call in a thread)."""
    extra = tuple(Path(os.path.realpath(os.path.expanduser(p))) for p in server.read_only)
    policy = around.policy
    if policy is None:
        return Layout(Path("/tmp"), (), extra, network=server.network)
    scan = Masker(policy, around.agent_data or Path("/nonexistent")).scan()
    roots = tuple(r.path for r in policy.roots)
    writable = tuple(r.path for r in policy.writable_roots) if server.workspace == "read-write" else ()
    readonly = tuple(r for r in roots if r not in writable) + extra
    return Layout(
        policy.workspace.path, writable, readonly, hidden=scan.hidden,
        network=server.network, frozen=scan.frozen,
    )


def _filled(values: Mapping[str, str], around: Surroundings, where: str) -> dict[str, str]:
    try:
        return {k: fill_secrets(v, around.secrets, f"{where}.{k}") for k, v in values.items()}
    except KeyError as exc:
        raise LaunchError(exc.args[0]) from None


async def stdio_parameters(
    server: ServerSettings, around: Surroundings, report: StartReport | None = None
) -> StdioServerParameters:
    """The program the SDK starts for a stdio server: under bubblewrap when
    sandboxed, bubblewrap reporting on `report` when given."""
    from mcp.client.stdio import StdioServerParameters  # the SDK is loaded only when a server is used

    assert server.command is not None  # the settings insist on it for stdio
    env = _filled(server.env, around, f"mcp.servers.{server.name}.env")
    if not server.sandboxed:
        # The person's own tools and home: the SDK passes only the variables
        # it deems safe (PATH, HOME...), so the agent's keys stay out unless
        # named in `env`.
        program, *args = with_person_umask([_found_program(server.command), *server.args])
        return StdioServerParameters(command=program, args=args, env=env)
    layout = await asyncio.to_thread(server_layout, server, around)
    command = _visible_program(server.command, layout)
    layout = _lend_interpreter(server, command, layout)
    shell = around.shell.model_copy(update={"sandbox": "bubblewrap"})
    try:
        await Sandbox(shell).check(layout)
    except SandboxUnavailable as exc:
        raise LaunchError(
            f"{exc} (or set sandbox = false for MCP server {server.name!r})"
        ) from None
    program = shutil.which(shell.bwrap_path) or shell.bwrap_path
    argv = _filtered(server, bwrap_argv(program, layout,
                                        with_person_umask([command, *server.args]),
                                        tmp_mb=shell.memory_mb, seccomp_fd=_FILTER_FD,
                                        status_fd=None if report is None else _STATUS_FD),
                     report)
    # The SDK merges its own defaults (HOME, PATH, USER...) under these; the
    # sandbox's values win, so nothing of the agent's home leaks in.
    return StdioServerParameters(
        command=argv[0], args=argv[1:], env=sandbox_env() | env, cwd=str(layout.workdir)
    )


_FILTER_FD = 3  # where bubblewrap reads the filter, in the shell that starts it
_STATUS_FD = 4  # where it reports, there


def _filtered(server: ServerSettings, argv: list[str], report: StartReport | None) -> list[str]:
    """`argv` (bubblewrap reading its filter from descriptor 3, reporting on
    4 when given a report) started by a shell that opens them there. The same
    filter as a command's (`security/seccomp.py`: no Unix sockets without the
    network, no setuid files). The SDK starts servers with no descriptor of
    ours inherited, so the filter is an in-memory file of this process that
    the shell opens by its /proc path; it stays open while the server may
    start again."""
    try:
        fd = program_fd(network=server.network)
    except FilterUnavailable as exc:
        raise LaunchError(f"{exc} (or set sandbox = false for MCP server {server.name!r})"
                          ) from None
    old = _FILTERS.pop(server.name, None)
    if old is not None:
        os.close(old)
    _FILTERS[server.name] = fd
    filter_path = f"/proc/{os.getpid()}/fd/{fd}"
    if report is None:
        opener = 'filter="$1"; shift; exec "$@" 3<"$filter"'
        return ["/bin/sh", "-c", opener, "sh", filter_path, *argv]
    opener = 'filter="$1"; status="$2"; shift 2; exec "$@" 3<"$filter" 4>"$status"'
    return ["/bin/sh", "-c", opener, "sh", filter_path, report.path, *argv]


def _found_program(command: str) -> str:
    """An unsandboxed server's program; a missing one is said before it is
    started (through the shell that sets the umask, it would be the shell's
    error)."""
    if "/" in command:
        if not os.path.exists(command):
            raise LaunchError(f"the program {command!r} was not found")
        return command
    found = shutil.which(command)
    if found is None:
        raise LaunchError(f"the program {command!r} was not found on PATH")
    return found


def _visible_program(command: str, layout: Layout) -> str:
    """The program as the sandbox will find it: a bare name is looked up on the
    sandbox's PATH now, so a missing one is reported plainly rather than as
    bubblewrap's exit status."""
    if "/" in command:
        return command
    path = sandbox_env()["PATH"]
    found = shutil.which(command, path=path)
    if found is None:
        raise LaunchError(
            f"the program {command!r} is not on the sandbox's PATH ({path}); give its full "
            "path, and list its folder under read_only if it lies outside the system folders"
        )
    return found


def interpreter_folders(program: str) -> tuple[Path, ...]:
    """The folders a program from a Python virtual environment needs: the
    environment, and the prefix of the interpreter it was made from. The
    program is the environment's own (`.venv/bin/python`, `.venv/bin/tool`)
    or a script whose `#!` line names such an interpreter."""
    found: list[Path] = []
    for candidate in _program_and_interpreter(Path(program)):
        venv = _environment_of(candidate)
        if venv is None:
            continue
        found.append(venv)
        home = _base_home(venv)
        if home is not None:
            found.append(home.parent)  # `home` is the base's bin folder: lend its prefix
        real = Path(os.path.realpath(candidate))
        if real.parent.name == "bin":
            found.append(real.parent.parent)
    return _outermost(p for p in found if p.is_dir())


def _program_and_interpreter(program: Path) -> list[Path]:
    found = [program]
    try:
        with program.open("rb") as file:
            first = file.readline(512)
    except OSError:
        return found
    if first.startswith(b"#!"):
        words = first[2:].decode("utf-8", "replace").split()
        if words and words[0].startswith("/"):
            found.append(Path(words[0]))
    return found


def _environment_of(program: Path) -> Path | None:
    """The virtual environment `program` belongs to: `<env>/bin/<program>`
    with `<env>/pyvenv.cfg` (links not resolved: an environment's python is
    usually a link to the base interpreter)."""
    venv = Path(os.path.abspath(program)).parent.parent
    return venv if (venv / "pyvenv.cfg").is_file() else None


def _base_home(venv: Path) -> Path | None:
    """The `home` of a virtual environment's `pyvenv.cfg` (the base
    interpreter's folder), resolved."""
    try:
        text = (venv / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and value.strip():
            return Path(os.path.realpath(value.strip()))
    return None


def _outermost(paths: Iterable[Path]) -> tuple[Path, ...]:
    """Distinct folders, none inside another."""
    kept: list[Path] = []
    for path in sorted(set(paths), key=lambda p: len(p.parts)):
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return tuple(kept)


def _shown(path: Path, folders: Iterable[Path]) -> bool:
    return any(path.is_relative_to(f) for f in folders)


def _lend_interpreter(server: ServerSettings, command: str, layout: Layout) -> Layout:
    """`layout` with the program's virtual environment and base interpreter
    lent read-only; LaunchError naming the `read_only` entry that would help
    when the program or its interpreter still lies outside it."""
    system = [Path(f) for f in system_folders()]
    visible = [*system, *layout.readonly, *layout.writable]
    lent = tuple(f for f in interpreter_folders(command) if not _shown(f, visible))
    visible += lent
    for needed in _program_and_interpreter(Path(command)):
        # The name itself (in its folder, links there resolved) and what it points at.
        folder = Path(os.path.realpath(os.path.dirname(os.path.abspath(needed))))
        for path in (folder / needed.name, Path(os.path.realpath(needed))):
            if not _shown(path, visible):
                raise LaunchError(
                    f"the program {str(needed)!r} of MCP server {server.name!r} lies outside "
                    f"what its sandbox shows, so it cannot start there; add read_only = "
                    f'["{path.parent}"] to [mcp.servers.{server.name}] (every folder it needs '
                    "to read), or set sandbox = false for it"
                )
    if not lent:
        return layout
    return replace(layout, readonly=(*layout.readonly, *lent))


def transport(
    server: ServerSettings, around: Surroundings, errlog: IO[str]
) -> AbstractAsyncContextManager[Streams]:
    """The SDK transport (an async context manager of the stream pair) for a server."""
    if server.transport == "http":
        return _http(server, around)
    return _stdio(server, around, errlog)


@asynccontextmanager
async def _stdio(server: ServerSettings, around: Surroundings, errlog: IO[str]) -> AsyncIterator[Streams]:
    from mcp.client.stdio import stdio_client  # the SDK is loaded only when a server is used

    report = StartReport() if server.sandboxed else None
    try:
        parameters = await stdio_parameters(server, around, report)
        try:
            async with stdio_client(parameters, errlog=errlog) as streams:
                yield streams
        except FileNotFoundError as exc:
            raise LaunchError(
                f"the program {exc.filename or server.command!r} was not found"
            ) from None
        except Exception as exc:
            # The server is gone by now (the SDK waited for it or killed it).
            said = None if report is None else _setup_failure(exc, report, errlog)
            if said is None:
                raise
            raise SandboxSetupFailed(said) from exc
    finally:
        if report is not None:
            report.close()


def _setup_failure(exc: BaseException, report: StartReport, errlog: IO[str]) -> str | None:
    """bubblewrap's own error when it failed before starting the program
    (None otherwise). Three signs, all needed: the connection closed before
    it was ready, which with bubblewrap holding the server's output open
    means bubblewrap ended of itself (never stopped by us); its status
    report has no "exit-code", so no program it started ended (the one sign
    a program cannot forge: it cannot write there); and it wrote an error
    of its own (`bwrap: ...`), which alone a server could imitate. The
    sandbox's fourth sign, bubblewrap's exit code, is out of reach: the SDK
    keeps the process to itself."""
    from mcp import MCPError  # the SDK is loaded only when a server is used
    from mcp_types import CONNECTION_CLOSED

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if not (isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED):
        return None
    if report.program_ended():
        return None
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read()
    except (OSError, ValueError):
        return None
    said = [line.strip() for line in text.splitlines() if line.startswith("bwrap: ")]
    return " ".join(said)[:300] or None


@asynccontextmanager
async def _http(server: ServerSettings, around: Surroundings) -> AsyncIterator[Streams]:
    # The SDK and its HTTP client are loaded only when a server is used.
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    assert server.url is not None  # the settings insist on it for http
    headers = _filled(server.headers, around, f"mcp.servers.{server.name}.headers")
    # The SDK's own defaults: a response stream may stay open a long time.
    timeout = httpx2.Timeout(30, read=300)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as client:
        async with streamable_http_client(server.url, http_client=client) as streams:
            yield streams

