"""One MCP server's connection: opened on first use, checked before each call,
dropped when the server crashes or stops answering, and opened again on the
next call (at once after a call failed; after a growing pause when opening
itself failed).

The SDK's transports and `ClientSession` are anyio context managers that
must be left in the task that entered them, while calls come from the tasks
the orchestrator runs tools in. So each connection is held open by an owner
task of its own; callers only send requests through its session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

import mcp_types
from mcp import ClientSession, MCPError

from ..tools.errors import shorten
from .launch import LaunchError, SandboxSetupFailed, Surroundings, transport
from .settings import ServerSettings

log = logging.getLogger(__name__)

_FIRST_PAUSE_S = 1.0
_LONGEST_PAUSE_S = 60.0
_CLOSE_WAIT_S = 10.0  # the SDK's own stdio shutdown is bounded at a few seconds
_PING_TIMEOUT_S = 10.0
_STDERR_TAIL = 400
_MAX_PAGES = 50  # a server that pages its tool list forever is cut off here
_START_TRIES = 3  # starts of a sandboxed server whose bubblewrap failed before it, at most


class ServerFailure(Exception):
    """The server could not be reached, crashed, or did not answer in time;
    the message says which, in a sentence the model and the person can read.
    `detail` is the end of what a stdio server wrote to its error output: the
    server's own words, so it goes to the person and the log, never to the model."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class _SetupFailure(ServerFailure):
    """A start where bubblewrap failed before the server's program: `said` is its error."""

    def __init__(self, message: str, detail: str, said: str) -> None:
        super().__init__(message, detail)
        self.said = said


@dataclass(slots=True)
class _Live:
    """An open connection and what keeps it open."""

    session: ClientSession
    tools: tuple[mcp_types.Tool, ...]
    owner: asyncio.Task
    stop: asyncio.Event
    errlog: IO[str]
    ended: bool = False  # the owner task finished: the connection is gone


@dataclass(slots=True)
class _Backoff:
    """Consecutive failures to connect, and when the next attempt may be made."""

    failures: int = 0
    not_before: float = 0.0
    reason: str = ""

    def failed(self, now: float, reason: str) -> None:
        self.failures += 1
        pause = min(_LONGEST_PAUSE_S, _FIRST_PAUSE_S * 2 ** (self.failures - 1))
        self.not_before = now + pause
        self.reason = reason

    def succeeded(self) -> None:
        self.failures, self.not_before, self.reason = 0, 0.0, ""


@dataclass
class ServerLink:
    """The agent's side of one configured server."""

    settings: ServerSettings
    around: Surroundings
    clock: Callable[[], float] = time.monotonic
    _live: _Live | None = None
    _backoff: _Backoff = field(default_factory=_Backoff)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def name(self) -> str:
        return self.settings.name

    def retry_in(self) -> float:
        """Seconds until the next attempt to connect may be made (0: now)."""
        return max(0.0, self._backoff.not_before - self.clock())

    async def tools(self) -> tuple[mcp_types.Tool, ...]:
        """The server's tools, connecting first if needed."""
        return (await self._connected()).tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call one of its tools; ServerFailure when the server fails us, MCPError
        when it refuses the request itself (an unknown tool, bad arguments)."""
        live = await self._connected()
        try:
            return await live.session.call_tool(
                tool, arguments, read_timeout_seconds=self.settings.timeout_s
            )
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                await self._drop(live)
                raise ServerFailure(
                    f"the MCP server {self.name!r} did not answer within "
                    f"{self.settings.timeout_s:g} s, so the call was abandoned and the server "
                    "restarted; whether the call had any effect is unknown"
                ) from None
            if exc.code == mcp_types.CONNECTION_CLOSED:
                stderr = _tail(live.errlog)
                log.warning("MCP server %s closed the connection during a call%s", self.name, stderr)
                await self._drop(live)
                raise ServerFailure(
                    f"the MCP server {self.name!r} closed the connection during the call "
                    "(it may have crashed); it is started again on the next call, and "
                    "whether this call had any effect is unknown", stderr
                ) from None
            raise
        except (OSError, EOFError) as exc:
            await self._drop(live)
            raise ServerFailure(
                f"the connection to the MCP server {self.name!r} failed ({_reason(exc)})"
            ) from None

    async def aclose(self) -> None:
        """Close the connection (stopping a stdio server)."""
        async with self._lock:
            live, self._live = self._live, None
        if live is not None:
            await _shut(live)

    # -- the connection ----------------------------------------------------------

    async def _connected(self) -> _Live:
        async with self._lock:
            live = self._live
            if live is not None and not live.ended and await self._answers(live):
                return live
            if live is not None:
                self._live = None
                await _shut(live)
            now = self.clock()
            if now < self._backoff.not_before:
                raise ServerFailure(
                    f"the MCP server {self.name!r} is unavailable ({self._backoff.reason}); "
                    f"the next attempt is in {self._backoff.not_before - now:.0f} s"
                )
            try:
                live = await self._started()
            except ServerFailure as exc:
                self._backoff.failed(self.clock(), str(exc))
                raise
            self._backoff.succeeded()
            self._live = live
            return live

    async def _answers(self, live: _Live) -> bool:
        """Whether an open connection still works: a server that died while idle
        is noticed here, before a call is sent to it, and simply reopened."""
        try:
            async with asyncio.timeout(_PING_TIMEOUT_S):
                await live.session.send_ping()
        except TimeoutError:
            log.info("MCP server %s does not answer a ping", self.name)
            return False
        except MCPError as exc:
            log.info("MCP server %s no longer answers: %s", self.name, exc.message)
            return False
        except (OSError, EOFError) as exc:
            log.info("MCP server %s no longer answers: %s", self.name, exc)
            return False
        return True

    async def _started(self) -> _Live:
        """`_open`, again from a fresh scan when bubblewrap failed before the
        server's program (a file it was to mask vanished meanwhile): at most
        `_START_TRIES` starts, each given the whole connect time (a failed
        one lasts milliseconds). A program that started is never started
        again here, whatever became of it."""
        starts = 0
        while True:
            starts += 1
            try:
                return await self._open()
            except _SetupFailure as exc:
                if starts == _START_TRIES:
                    raise ServerFailure(f"{exc} ({starts} starts)", exc.detail) from None
                log.info(
                    "MCP server %s: bubblewrap failed before starting the server (%s); "
                    "starting it again", self.name, exc.said,
                )

    async def _open(self) -> _Live:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[ClientSession, tuple[mcp_types.Tool, ...]]] = loop.create_future()
        stop = asyncio.Event()
        errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        owner = asyncio.create_task(self._own(ready, stop, errlog), name=f"mcp:{self.name}")
        live: _Live | None = None

        def ended(_: asyncio.Task) -> None:
            if live is not None:
                live.ended = True

        owner.add_done_callback(ended)
        try:
            session, tools = await asyncio.wait_for(
                asyncio.shield(ready), self.settings.connect_timeout_s
            )
        except BaseException as exc:
            stop.set()
            owner.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(owner, _CLOSE_WAIT_S)
            if ready.done() and not ready.cancelled():
                ready.exception()  # retrieved: its reason is reported below, not at exit
            stderr = _tail(errlog)
            errlog.close()
            if isinstance(exc, asyncio.CancelledError):
                raise
            if isinstance(exc, TimeoutError):
                reason = f"it did not finish connecting within {self.settings.connect_timeout_s:g} s"
            else:
                reason = _reason(exc)
            message = f"the MCP server {self.name!r} could not be {_opened(self.settings)}: {reason}"
            setup = _innermost(exc)
            if isinstance(setup, SandboxSetupFailed):
                raise _SetupFailure(message, stderr, setup.said) from None
            raise ServerFailure(message, stderr) from None
        live = _Live(session, tools, owner, stop, errlog)
        live.ended = owner.done()
        return live

    async def _own(
        self,
        ready: asyncio.Future[tuple[ClientSession, tuple[mcp_types.Tool, ...]]],
        stop: asyncio.Event,
        errlog: IO[str],
    ) -> None:
        """Hold the connection open until told to stop (the owner task)."""
        try:
            async with transport(self.settings, self.around, errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = await _all_tools(session)
                    ready.set_result((session, tools))
                    await stop.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.info("MCP server %s: the connection ended: %s", self.name, _reason(exc))

    async def _drop(self, live: _Live) -> None:
        """Forget a connection that failed (unless another call already did)."""
        async with self._lock:
            if self._live is live:
                self._live = None
        await _shut(live)


async def _shut(live: _Live) -> None:
    live.stop.set()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(asyncio.shield(live.owner), _CLOSE_WAIT_S)
    if not live.owner.done():
        live.owner.cancel()
    live.errlog.close()


async def _all_tools(session: ClientSession) -> tuple[mcp_types.Tool, ...]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


def _opened(settings: ServerSettings) -> str:
    return "reached" if settings.transport == "http" else "started"


def _innermost(exc: BaseException) -> BaseException:
    """The error inside the task groups that wrap it (the first one)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    """The innermost useful message of an error (task groups wrap them)."""
    exc = _innermost(exc)
    if isinstance(exc, (LaunchError, ServerFailure)):
        return str(exc)
    if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
        return "it closed the connection before it was ready (it may have exited)"
    if isinstance(exc, MCPError):
        return f"it answered with an error: {shorten(exc.message, 200, 60)}"
    text = str(exc) or type(exc).__name__
    return shorten(f"{type(exc).__name__}: {text}" if not isinstance(exc, OSError) else text, 200, 60)


def _tail(errlog: IO[str]) -> str:
    """The end of what a stdio server wrote to its error output, as a clause."""
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read()
    except (OSError, ValueError):
        return ""
    text = " ".join(text.split())
    if not text:
        return ""
    if len(text) > _STDERR_TAIL:
        text = "…" + text[-_STDERR_TAIL:]
    return f"; it wrote: {text}"
