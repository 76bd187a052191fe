"""The agent's side of the attach protocol: every interface is a client of it.

`Host` is the agent's listener: each thing the agent does becomes one
broadcast message with the next `seq`, kept in a bounded backlog so a client
that reconnects gets what it missed. Interfaces attach in the same process
(`Host.connect`, an in-memory connection) or from another one (`Host.serve`,
the agent's unix socket); both speak the same messages.

A message for one client only (`Welcome`, `Done`, `Status`, `Refused`, its
`Goodbye`) carries the seq of the last broadcast that client was sent, so
the newest seq a client has seen is always the right `Hello.since`.

A client never slows the agent: a broadcast only appends to each client's
own queue, and a client whose queue grows past its bound (it stopped
reading, or reads slower than the agent writes) is dropped; it may come back
with `Hello.since` and lose nothing the backlog still holds.

Approvals: a tool at autonomy level `ask` is announced to every attached
client (`ApprovalAsked`); the first `Answer` settles it (`ApprovalSettled`
says who answered). With no client attached the question goes to the
person's own channels (`App.ask_away`: Telegram's Allow/Refuse buttons, or
mail) and the call waits there, not in the cycle (`security/away.py`);
with none that can ask, the call is refused at once with that explanation
(the model can tell the person later). A question asked away is announced
like the others and listed in the welcome of a client that attaches while
it waits, so the page or the terminal can answer it too; the first answer
from anywhere settles it, and a later one is told how it was closed. A
question nobody answers within `[autonomy] approval_timeout_s` is refused,
so a headless agent never waits for ever. One numbering serves both kinds.
A connection whose Hello says it watches nothing (the web server's own, for
the page's requests) is nobody to ask: with only such connections attached,
questions go away. A question asked here whose watchers all leave (the tab
was closed) waits `WATCHERS_GRACE` seconds for one to come back (a reload),
then goes away as itself (same number, arguments and expiry) and the call
returns the waiting result, so the agent goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import math
import os
import socket
import tempfile
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...logs import SHOWN
from ...memory.session import StorageFull
from ...memory.turns import Flag, Turn, TurnKind
from ...orchestrator.agent import AgentListener
from ...orchestrator.context import RequestShape
from ...orchestrator.decisions import (
    Decision,
    Deliver,
    KillTool,
    Queued,
    SafeCancel,
    StopCycle,
    UnsafeCancel,
)
from ...perception.treatments import UnknownChannel
from ...providers.base import RetryWait
from ...security.approvals import ApprovalRequest, AskAway
from ...security.away import RESTART, TIMEOUT
from ...tools.errors import ToolError
from .attach import AgentNotRunning, connect_socket, unix_address
from .protocol import (
    MAX_LINE,
    PROTOCOL_VERSION,
    Answer,
    ApprovalAsked,
    ApprovalSettled,
    AskStatus,
    ChannelView,
    ClientMessage,
    CycleEnded,
    CycleStarted,
    Decided,
    Done,
    Goodbye,
    Hello,
    Idle,
    Notice,
    ProtocolError,
    Refused,
    RequestView,
    RetryWaiting,
    Said,
    Say,
    SensorView,
    ServerMessage,
    Silence,
    StartSense,
    Status,
    StatusView,
    Stop,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnStored,
    TurnView,
    Welcome,
    decode_client,
    encode,
)

if TYPE_CHECKING:
    from ...app import App

log = logging.getLogger(__name__)

APPROVAL_TIMEOUT = 300.0  # seconds an `ask` waits for an answer before it is refused
HELLO_TIMEOUT = 10.0  # seconds a new socket client has to say Hello
CLIENT_QUEUE = 4096  # messages a client may fall behind before it is dropped
CLOSE_GRACE = 1.0  # seconds the last messages get to leave when the host closes
# Seconds a question asked here waits, once nobody watches, before it goes to
# the person's channels: a page reload or a terminal's reconnect takes less.
WATCHERS_GRACE = 5.0

# The channel a person's message is recorded under, by the client that sent
# it. Never a channel's own name (mail, Telegram): answers go back by the
# channel a question came on, and a typed message must not be mailed.
_CHANNEL_OF_CLIENT = {"web": "web"}
_DEFAULT_CHANNEL = "terminal"

# Words that mark a notice as a failure, for `last_error` in the status.
_FAILURE_WORDS = ("fail", "full", "damaged", "could not", "cannot")

_END = object()  # closes a client's queue
_SHUTDOWN = "stopped"  # who settled an approval the agent's stopping cut short
_UNWATCHED = "unwatched"  # an approval whose watchers left: it goes to the person's channels


class CannotServe(RuntimeError):
    """The socket cannot be made: a live process serves its path, or the
    folder refuses it (the text says which)."""


def turn_view(turn: Turn) -> TurnView:
    """A stored turn as interfaces see it."""
    return TurnView(id=turn.id, ts=turn.ts, kind=turn.kind.value, content=turn.content,
                    tool_name=turn.tool_name, arguments=turn.arguments, channel=turn.channel,
                    sender=turn.sender, cycle_id=turn.cycle_id, error=turn.has(Flag.ERROR),
                    call_id=turn.call_id, waiting=turn.has(Flag.WAITING),
                    answered=answered(turn))


def answered(turn: Turn) -> str | None:
    """What the person answered to a waiting result's question, once they did."""
    for name, flag in (("allowed", Flag.ALLOWED), ("refused", Flag.REFUSED),
                       ("expired", Flag.EXPIRED)):
        if turn.has(flag):
            return name
    return None


def _decided(decision: Decision) -> Decided | None:
    """The decisions an interface shows. Per-event bookkeeping (an event queued,
    a wake-up timer) is left out: a storm of events must not flood the clients."""
    match decision:
        case Deliver(package=package, notice=notice):
            detail = f"{len(package.person_turns)} message(s), {package.event_count} event(s)"
            if notice:
                detail += ", after a cancellation"
            return Decided(kind="Deliver", detail=detail)
        case SafeCancel(cause=cause) | UnsafeCancel(cause=cause):
            return Decided(kind=type(decision).__name__, detail=cause.describe())
        case StopCycle():
            return Decided(kind="StopCycle", detail="the person stopped the cycle")
        case KillTool(name=name):
            return Decided(kind="KillTool", detail=name)
        case Queued(ref=ref, reason=reason) if ref.startswith("turn:"):
            return Decided(kind="Queued", detail=f"{ref}: {reason.value}")
    return None


@dataclass(eq=False)
class _Client:
    """One attached interface: its name and its own bounded outgoing queue."""

    number: int
    name: str
    on_drop: Callable[[], None] = lambda: None  # a socket aborts its transport
    limit: int = CLIENT_QUEUE
    last_seq: int = 0  # the newest broadcast queued to it
    attached: bool = False  # said Hello and was welcomed
    watching: bool = True  # shows what the agent does (Hello.watching): it can be asked
    closed: bool = False
    _queue: deque[object] = field(default_factory=deque)
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def label(self) -> str:
        return f"{self.name or 'client'}#{self.number}"

    def put(self, message: ServerMessage, *, broadcast: bool = False) -> bool:
        """Queue a message; False when the client is too far behind to take it."""
        if self.closed:
            return True
        if broadcast and len(self._queue) >= self.limit:
            return False
        if broadcast:
            self.last_seq = message.seq
        self._queue.append((message, broadcast))
        self._ready.set()
        return True

    def reply(self, message: ServerMessage) -> None:
        """A message for this client only: it carries the seq of the last
        broadcast it was sent, so a client's newest seq stays a resume point."""
        self.put(message.model_copy(update={"seq": self.last_seq}))

    def end(self, farewell: ServerMessage | None = None) -> None:
        """Close the queue: after `farewell`, the client's messages end."""
        if self.closed:
            return
        if farewell is not None:
            self.reply(farewell)
        self.closed = True
        self._queue.append(_END)
        self._ready.set()

    def drop(self, reason: str) -> None:
        """Give up on a client that fell behind: what it had not read is
        discarded (it can resume from the backlog)."""
        unread = [item[0].seq for item in self._queue
                  if item is not _END and item[1]]  # type: ignore[index]
        if unread:  # the goodbye's seq says where to resume: before the first one lost
            self.last_seq = unread[0] - 1
        self._queue.clear()
        self.end(Goodbye(reason=reason))
        self.on_drop()

    async def next(self) -> ServerMessage | None:
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        item = self._queue.popleft()
        return None if item is _END else item[0]  # type: ignore[index]


@dataclass(frozen=True, slots=True)
class _BadLine:
    """A line that is not a client message; `request` when one could be read from it."""

    reason: str
    request: int | None = None


class _MemoryConnection:
    """An in-process attachment: the same messages, no bytes."""

    def __init__(self, host: Host, client: _Client) -> None:
        self._client = client
        self._inbox: asyncio.Queue[ClientMessage | None] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(
            host._converse(client, self._incoming()), name=f"attach:{client.label}")

    async def _incoming(self) -> AsyncIterator[ClientMessage | _BadLine]:
        while (message := await self._inbox.get()) is not None:
            yield message

    async def send(self, message: ClientMessage) -> None:
        """Send a request; ConnectionError once the host closed this connection."""
        if self._client.closed or self._task.done():
            raise ConnectionError("the agent closed this connection")
        self._inbox.put_nowait(message)

    async def messages(self) -> AsyncIterator[ServerMessage]:
        """The host's messages in order; ends when the connection closes."""
        while (message := await self._client.next()) is not None:
            yield message

    async def aclose(self) -> None:
        """Leave; the agent goes on."""
        self._inbox.put_nowait(None)
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@dataclass
class _Approval:
    asked: ApprovalAsked
    answer: asyncio.Future[tuple[bool, str]] | None  # None: asked away, answered there


class Host(AgentListener):
    """Turns what the agent does into protocol messages for every attached
    interface, and their requests into calls on the agent."""

    def __init__(self, agent_name: str, *, backlog: int = 5000,
                 watchers_grace: float = WATCHERS_GRACE) -> None:
        if backlog < 1:
            raise ValueError("the backlog holds at least one message")
        self.watchers_grace = watchers_grace
        self.agent_name = agent_name
        self.pid = os.getpid()
        self.started_at = time.time()
        self._app: App | None = None
        self._seq = 0
        self._backlog: deque[ServerMessage] = deque(maxlen=backlog)
        self._clients: dict[int, _Client] = {}
        self._numbers = itertools.count(1)
        self._approvals: dict[int, _Approval] = {}
        self._approval_numbers = itertools.count(1)
        self._unwatched: asyncio.TimerHandle | None = None  # the grace before questions go away
        self._last_watcher_left: float | None = None  # monotonic; a reload is a leave and a return
        self._cycle: int | None = None
        self._last_error: str | None = None
        self._sensor_crashes: dict[str, float] = {}  # channel → when it may run again
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._server: asyncio.Server | None = None
        self._socket: Path | None = None
        self._socket_id: tuple[int, int] | None = None  # (device, inode) of the file we made
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    # -- wiring -------------------------------------------------------------

    def bind(self, app: App) -> None:
        """Serve this app: its agent answers requests, and approvals are asked here."""
        self._app = app
        app.attach_approver(self._ask)
        if app.away is not None:  # its questions are shown here too, and numbered with ours
            self._approval_numbers = iter(app.away.store.next_number, None)
            app.away.listeners.append(self)
            for number, request, place, expires_at in app.away.pending():
                self.away_asked(number, request, place, expires_at)

    @property
    def clients(self) -> int:
        """Interfaces attached now."""
        return sum(1 for c in self._clients.values() if c.attached)

    def connect(self, client: str = "") -> _MemoryConnection:
        """An in-process attachment (call it inside the running event loop); the
        client sends `Hello` first and reads `Welcome`, as over the socket.
        `client` names it until its Hello names it."""
        self._own_loop()
        return _MemoryConnection(self, self._new_client(client))

    # -- broadcasting ---------------------------------------------------------

    def _own_loop(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._thread = threading.get_ident()

    def _broadcast(self, message: ServerMessage) -> None:
        # A channel may report from its own thread; the clients live in the loop's.
        loop = self._loop
        if loop is not None and threading.get_ident() != self._thread:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
                loop.call_soon_threadsafe(self._broadcast_now, message)
            return
        self._broadcast_now(message)

    def _broadcast_now(self, message: ServerMessage) -> None:
        self._seq += 1
        message = message.model_copy(update={"seq": self._seq})
        self._backlog.append(message)
        for client in list(self._clients.values()):
            if client.attached and not client.put(message, broadcast=True):
                log.warning("interface %s fell %d messages behind; dropped", client.label,
                            client.limit)
                self._detach(client)
                client.drop("you fell too far behind; reconnect with `since` to resume")

    # -- the agent's listener ---------------------------------------------------------

    def on_text(self, delta: str) -> None:
        self._broadcast(TextDelta(cycle_id=self._cycle, delta=delta))

    def on_retry(self, wait: RetryWait) -> None:
        self._broadcast(RetryWaiting(retry=wait.retry, of=wait.of, seconds=wait.seconds,
                                     until=time.time() + wait.seconds, line=wait.describe()))

    def on_turn(self, turn: Turn) -> None:
        self._broadcast(TurnStored(turn=turn_view(turn)))

    def on_tool_start(self, call: Turn, side_effects: bool) -> None:
        self._broadcast(ToolStarted(call=turn_view(call), side_effects=side_effects))

    def on_tool_end(self, call: Turn, result: Turn) -> None:
        self._broadcast(ToolFinished(call=turn_view(call), result=turn_view(result)))

    def on_cycle_start(self, cycle_id: int, origin: str) -> None:
        self._cycle = cycle_id
        self._broadcast(CycleStarted(cycle_id=cycle_id, origin=origin))

    def on_cycle_end(self, cycle_id: int, outcome: str, error: str | None) -> None:
        self._cycle = None
        if error:
            self._last_error = error
        self._broadcast(CycleEnded(cycle_id=cycle_id, outcome=outcome, error=error))

    def on_notice(self, text: str) -> None:
        lowered = text.lower()
        if any(word in lowered for word in _FAILURE_WORDS):
            self._last_error = text
        self._broadcast(Notice(text=text))

    def on_memory(self, text: str) -> None:
        self._broadcast(Notice(text=text, about="memory"))

    def on_idle(self) -> None:
        self._broadcast(Idle())

    def on_submitted(self, turn: Turn) -> None:
        self._broadcast(Said(turn=turn_view(turn)))

    def on_decision(self, decision: Decision) -> None:
        shown = _decided(decision)
        if shown is not None:
            self._broadcast(shown)

    def on_sensor_crash(self, channel: str, retry_in: float) -> None:
        """A sensor crashed and restarts in `retry_in` seconds: until then the
        status shows it "crashed, restarting in N s". (The notice that says why
        reaches the clients as a `Notice`.)"""
        self._sensor_crashes[channel] = time.time() + max(0.0, retry_in)

    # -- one client's conversation ---------------------------------------------------

    def _new_client(self, name: str, on_drop: Callable[[], None] = lambda: None) -> _Client:
        client = _Client(next(self._numbers), name, on_drop)
        self._clients[client.number] = client
        return client

    def _detach(self, client: _Client) -> None:
        self._clients.pop(client.number, None)
        if client.attached:
            client.attached = False
            log.info("interface %s detached", client.label)
            if client.watching and not self._watched():
                self._last_watcher_left = time.monotonic()
            self._watchers_changed()

    async def _converse(self, client: _Client,
                        incoming: AsyncIterator[ClientMessage | _BadLine]) -> None:
        """Handshake, then requests in order, until the client leaves or is dropped."""
        try:
            try:
                first = await asyncio.wait_for(anext(incoming, None), HELLO_TIMEOUT)
            except TimeoutError:
                client.end(Refused(reason=f"no hello within {HELLO_TIMEOUT:.0f} s"))
                return
            if not self._welcome(client, first):
                return
            async for message in incoming:
                if client.closed:
                    return
                await self._handle(client, message)
        except Exception:  # a bug of ours: this client goes, the agent stays
            log.exception("serving interface %s failed", client.label, extra=SHOWN)
            client.end(Refused(reason="the agent failed while serving this connection; "
                                      "it is in the agent's log"))
        finally:
            self._detach(client)
            client.end()

    def _welcome(self, client: _Client, first: ClientMessage | _BadLine | None) -> bool:
        if first is None:
            return False
        if not isinstance(first, Hello):
            reason = first.reason if isinstance(first, _BadLine) else f"got {first.type!r}"
            client.end(Refused(reason=f"the first message must be hello ({reason})"))
            return False
        if first.version != PROTOCOL_VERSION:
            client.end(Refused(reason=f"this agent speaks protocol version {PROTOCOL_VERSION}, "
                                      f"not {first.version}; update the interface or Noema"))
            return False
        if self._closing:
            client.end(Refused(reason="the agent is stopping"))
            return False
        if first.client:
            client.name = first.client
        client.watching = first.watching
        # All of this happens with no await in between, so no broadcast can
        # fall between the replay and the live messages.
        replay, complete = self._since(first.since)
        client.last_seq = replay[0].seq - 1 if replay else self._seq
        client.attached = True
        client.reply(Welcome(agent=self.agent_name, complete=complete))
        # A question asked here that went away when its watchers left was
        # announced twice: a client catching up gets the later one only.
        latest = {m.approval: m.seq for m in replay if isinstance(m, ApprovalAsked)}
        for message in replay:
            client.last_seq = message.seq
            if isinstance(message, ApprovalAsked) and latest[message.approval] != message.seq:
                continue
            client.put(message)
        replayed = {m.approval for m in replay if isinstance(m, ApprovalAsked)}
        for approval in self._approvals.values():  # still open: this client may answer it
            if approval.asked.approval not in replayed:
                client.reply(approval.asked)
        log.info("interface %s attached (since %s)", client.label, first.since)
        self._watchers_changed()
        return True

    def _since(self, since: int | None) -> tuple[list[ServerMessage], bool]:
        """What a client that last saw `since` missed, and whether that is all of it."""
        if since is None:
            return [], True
        if since > self._seq:  # it talked to an earlier process of this agent
            return list(self._backlog), False
        missed = [m for m in self._backlog if m.seq > since]
        oldest = self._backlog[0].seq if self._backlog else self._seq + 1
        return missed, since + 1 >= oldest

    async def _handle(self, client: _Client, message: ClientMessage | _BadLine) -> None:
        if isinstance(message, _BadLine):
            if message.request is None:
                client.end(Refused(reason=f"not a message of this protocol: {message.reason}"))
                return
            client.reply(Done(request=message.request, ok=False,
                              error=f"not understood: {message.reason}"))
            return
        if isinstance(message, Answer):
            self._answer(client, message)
            return
        if isinstance(message, Hello):
            client.reply(Done(request=0, ok=False, error="hello was already said"))
            return
        if self._closing:
            client.reply(Done(request=message.request, ok=False, error="the agent is stopping"))
            return
        try:
            if isinstance(message, Say):
                client.reply(self._say(client, message))
            elif isinstance(message, Stop):
                stopped = await self._agent().stop()
                client.reply(Done(request=message.request, ok=stopped,
                                  error=None if stopped else "nothing was running"))
            elif isinstance(message, AskStatus):
                client.reply(Status(request=message.request, status=self.status()))
            elif isinstance(message, (Silence, StartSense)):
                client.reply(self._sense(client, message))
        except Exception as exc:  # the request fails; the connection and the agent go on
            log.exception("request %s of %s failed", message.type, client.label, extra=SHOWN)
            client.reply(Done(request=message.request, ok=False,
                              error=f"that failed ({type(exc).__name__}: {exc}); it is in the "
                                    "agent's log"))

    def _say(self, client: _Client, say: Say) -> Done:
        if not say.text.strip():
            return Done(request=say.request, ok=False, error="an empty message was not sent")
        channel = _CHANNEL_OF_CLIENT.get(client.name, _DEFAULT_CHANNEL)
        try:
            turn = self._agent().submit(say.text, channel=channel)
        except StorageFull as exc:  # refused whole: the person still has the text
            log.info("a message was refused: %s", exc)
            return Done(request=say.request, ok=False, error=f"your message was not taken: {exc}")
        return Done(request=say.request, turn_id=turn.id)

    def _sense(self, client: _Client, message: Silence | StartSense) -> Done:
        """Silence or reopen a channel for the person; a refusal says why (an
        unknown channel names the known ones; some channels cannot be silenced)."""
        self._agent()  # the same error as the other requests when nothing is bound
        pipeline = self._app.pipeline  # type: ignore[union-attr]
        now = time.time()
        try:
            if isinstance(message, Silence):
                until = pipeline.stop([message.channel], message.seconds, now)
                log.info("%s silenced %s for %.0f s", client.label, message.channel, until - now)
            else:
                pipeline.start([message.channel], now)
                log.info("%s reopened %s", client.label, message.channel)
        except (UnknownChannel, ValueError) as exc:  # CannotSilence is a ValueError
            return Done(request=message.request, ok=False, error=str(exc))
        return Done(request=message.request)

    def _agent(self):
        if self._app is None:
            raise RuntimeError("the host serves no agent yet: call bind(app) first")
        return self._app.agent

    # -- approvals ---------------------------------------------------------------

    async def _ask(self, request: ApprovalRequest) -> bool:
        """The agent's approver: the first answer from any attached interface.
        Raises AskAway when nobody watches, or when every watcher left while
        it waited (then as this very question: its number and expiry)."""
        if not self._watched() and not self._just_left():
            if self._app is None:
                raise ToolError(f"{request.tool} needs the person's approval, but the agent "
                                "is not ready to ask, so it was not run.")
            # Nobody at the machine: the person's own channels ask (Telegram).
            return await self._app.ask_away(request)
        number = next(self._approval_numbers)
        timeout = self._approval_timeout()
        expires_at = time.time() + timeout
        asked = ApprovalAsked(approval=number, tool=request.tool, arguments=request.arguments,
                              reason=request.reason, expires_at=expires_at)
        self._broadcast_now(asked)
        approval = _Approval(self._backlog[-1], asyncio.get_running_loop().create_future())
        self._approvals[number] = approval
        self._watchers_changed()  # asked as the last watcher left: its grace starts now
        allowed, by = False, "stopped"  # unless an answer or the clock says otherwise
        try:
            allowed, by = await asyncio.wait_for(approval.answer, timeout)
        except TimeoutError:
            by = "timeout"
            raise ToolError(
                f"{request.tool} waited {timeout / 60:.0f} minutes for the person's "
                "approval and nobody answered, so it was not run. Tell the person what you "
                "wanted to do.") from None
        finally:
            if by == _UNWATCHED:  # not settled: the away question that follows announces it
                self._approvals.pop(number, None)
            else:
                self._settle(number, allowed, by)
        if by == _UNWATCHED:
            log.info("approval %d of %s: nobody watches any more; it goes to the person's "
                     "channels", number, request.tool)
            raise AskAway(number=number, expires_at=expires_at)
        if by == _SHUTDOWN:
            raise ToolError(f"the agent stopped while {request.tool} waited for the person's "
                            "approval, so it was not run.")
        return allowed

    def away_asked(self, number: int, request: ApprovalRequest, place: str,
                   expires_at: float) -> None:
        """A question went to the person's channels: every client may answer it."""
        self._broadcast_now(ApprovalAsked(approval=number, tool=request.tool,
                                          arguments=request.arguments, reason=request.reason,
                                          where=place, expires_at=expires_at))
        self._approvals[number] = _Approval(self._backlog[-1], None)

    def _watched(self) -> bool:
        """Whether an attached interface shows what the agent does (so can be asked)."""
        return any(c.attached and c.watching for c in self._clients.values())

    def _just_left(self) -> bool:
        """Whether the last watcher left within the grace: a page reloading is
        asked as if it were there, and the question goes away only if nobody
        comes back in time."""
        left = self._last_watcher_left
        return left is not None and time.monotonic() - left < self.watchers_grace

    def _watchers_changed(self) -> None:
        """Start the grace after which the questions waiting here, unwatched,
        go to the person's channels; a watcher that comes back stops it."""
        if self._watched() or self._closing or not self._waiting_here():
            if self._unwatched is not None:
                self._unwatched.cancel()
                self._unwatched = None
            return
        away = self._app.away if self._app is not None else None
        if self._unwatched is None and away is not None and away.channels:
            # With no channel to ask on, the question stays here for a returning watcher.
            self._unwatched = asyncio.get_running_loop().call_later(
                self.watchers_grace, self._send_unwatched_away)

    def _waiting_here(self) -> list[asyncio.Future[tuple[bool, str]]]:
        return [a.answer for a in self._approvals.values()
                if a.answer is not None and not a.answer.done()]

    def _send_unwatched_away(self) -> None:
        self._unwatched = None
        if self._watched() or self._closing:
            return
        for answer in self._waiting_here():  # each `_ask` raises AskAway for its question
            answer.set_result((False, _UNWATCHED))

    def away_settled(self, number: int, allowed: bool, by: str) -> None:
        self._settle(number, allowed, by, self._mark_answered(number, allowed, by))

    def _mark_answered(self, number: int, allowed: bool, by: str) -> str | None:
        """Flag the waiting result of a question asked away with its answer, so
        the chats' line for that call says it, also after a reload; its call_id."""
        app = self._app
        question = app.away.store.get(number) if app is not None and app.away else None
        if app is None or question is None or not question.call_id:
            return None
        flag = (Flag.ALLOWED if allowed else
                Flag.EXPIRED if by in (TIMEOUT, RESTART) else Flag.REFUSED)
        ids = [t.id for t in app.session.turns if t.kind is TurnKind.TOOL_RESULT
               and t.call_id == question.call_id and t.has(Flag.WAITING)]
        try:
            if ids:
                app.session.mark(ids, flag)
        except StorageFull as exc:  # only the line's mark is lost: the answer stands
            log.warning("the answer to approval %d could not be marked on its call: %s",
                        number, exc)
        return question.call_id

    def _approval_timeout(self) -> float:
        if self._app is None:
            return APPROVAL_TIMEOUT
        return self._app.config.autonomy.approval_timeout_s

    def _settle(self, number: int, allowed: bool, by: str, call_id: str | None = None) -> None:
        """Tell every client how an approval ended (once: the first word stands)."""
        if self._approvals.pop(number, None) is not None:
            self._broadcast_now(ApprovalSettled(approval=number, allowed=allowed, by=by,
                                                call_id=call_id))

    def _answer(self, client: _Client, answer: Answer) -> None:
        refusal = self._settle_by(client, answer)
        if answer.request is not None:
            client.reply(Done(request=answer.request, ok=refusal is None, error=refusal))
        elif refusal is not None:
            client.reply(Notice(text=refusal))

    def _settle_by(self, client: _Client, answer: Answer) -> str | None:
        """Settle the question the answer names, and only that one; why not, if not."""
        approval = self._approvals.get(answer.approval)
        away = self._app.away if self._app is not None else None
        if away is not None and (approval is None or approval.answer is None) \
                and away.knows(answer.approval):  # asked away: its answer is settled there
            return away.answer(answer.approval, answer.allow, client.name or client.label)
        if approval is None or approval.answer is None or approval.answer.done():
            return f"approval {answer.approval} is no longer open"
        approval.answer.set_result((answer.allow, client.name or client.label))
        return None

    # -- status --------------------------------------------------------------------

    def status(self) -> StatusView:
        """What the agent is doing now, for `noema status` and the interfaces."""
        if self._app is None:
            raise RuntimeError("the host serves no agent yet: call bind(app) first")
        app = self._app
        now = time.time()
        agent = app.agent.status()
        reflexes = agent.reflexes
        waiting: dict[str, int] = {}
        if reflexes is not None:
            for counts in (reflexes.waiting.ready, reflexes.waiting.in_treatment):
                for urgency, count in counts.items():
                    if count:
                        waiting[urgency.value] = waiting.get(urgency.value, 0) + count
        return StatusView(
            agent=self.agent_name, pid=self.pid, started_at=self.started_at,
            phase=reflexes.phase.value if reflexes else ("running" if agent.busy else "idle"),
            busy=agent.busy, context_tokens=agent.context_tokens,
            context_window=agent.context_window, session_turns=agent.session_turns,
            waiting_messages=agent.waiting_messages, waiting_events=waiting,
            held=bool(reflexes and reflexes.held),
            world_tokens_spent=reflexes.world_tokens_spent if reflexes else 0,
            world_tokens_per_hour=reflexes.world_tokens_per_hour if reflexes else None,
            world_budget_exhausted=bool(reflexes and reflexes.world_budget_exhausted),
            sensors=self._sensors(now), channels=self._channels(), clients=self.clients,
            last_error=self._last_error, save_point_id=agent.save_point_id,
            request=_request_view(agent.request),
            memory=app.memory.activity.line(),
        )

    def _sensors(self, now: float) -> list[SensorView]:
        app = self._app
        assert app is not None
        pipeline, hub = app.pipeline, app.hub
        running = hub.sensors
        views = []
        for channel, info in sorted(pipeline.catalogue.items()):
            gate = pipeline.gate.state(channel, now)
            if channel not in running:
                state = "gone"  # known from the archive: its events are still delivered
            elif not gate.open:
                state = "silenced"
            elif (restarts := self._sensor_crashes.get(channel, 0.0)) > now:
                state = f"crashed, restarting in {math.ceil(restarts - now)} s"
            elif not hub.running(channel):
                state = "stopped"
            else:
                state = "active"
            views.append(SensorView(
                channel=channel, nature=info.nature.value, urgency=info.default_urgency.value,
                state=state, silenced_until=gate.until, can_silence=info.can_silence,
                events=pipeline.stats.counts(channel, now).received))
        return views

    def _channels(self) -> list[ChannelView]:
        app = self._app
        assert app is not None
        views = []
        for channel in app.channels:
            try:
                views.append(channel.view())
            except Exception as exc:  # one channel's bug must not hide the others
                log.exception("channel %s could not describe itself", channel.name)
                views.append(ChannelView(name=channel.name, state="unknown",
                                         detail=f"{type(exc).__name__}: {exc}"))
        return views

    # -- the socket ---------------------------------------------------------------------

    async def serve(self, socket_path: Path) -> None:
        """Listen on a unix socket at `socket_path`, readable by the owner only.

        The socket is made in a private folder beside it, given mode 0600 and
        only then renamed into place: it is never more open, and it replaces
        at once a socket a dead process left. A socket a live process answers
        on is never replaced (the agent's lock makes that another agent's).
        """
        self._own_loop()
        socket_path = Path(socket_path)
        if await _answers(socket_path):
            raise CannotServe(f"another process already serves {socket_path}")
        try:
            folder = Path(tempfile.mkdtemp(prefix=".sock-", dir=socket_path.parent))  # 0700
        except OSError as exc:
            raise CannotServe(f"the socket {socket_path} cannot be made: {exc}") from exc
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with unix_address(folder / "s") as address:
                sock.bind(address)
            os.chmod(folder / "s", 0o600)
            os.replace(folder / "s", socket_path)
            info = os.stat(socket_path)
            self._socket, self._socket_id = socket_path, (info.st_dev, info.st_ino)
            sock.listen(64)
            self._server = await asyncio.start_unix_server(
                self._serve_client, sock=sock, limit=MAX_LINE + 2)
        except BaseException as exc:
            sock.close()
            self._remove_socket()
            if isinstance(exc, OSError):
                raise CannotServe(f"the socket {socket_path} cannot be made: {exc}") from exc
            raise
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        log.info("serving interfaces on %s", socket_path)

    async def _serve_client(self, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
        client = self._new_client("", on_drop=writer.transport.abort)
        sender = asyncio.create_task(self._send_all(client, writer),
                                     name=f"send:{client.label}")
        self._tasks.add(sender)
        try:
            await self._converse(client, _lines(reader))
            await asyncio.wait({sender}, timeout=CLOSE_GRACE)  # the last message leaves
        finally:
            self._tasks.discard(sender)
            if not sender.done():  # it would not leave in time: cut it off
                sender.cancel()
                writer.transport.abort()

    async def _send_all(self, client: _Client, writer: asyncio.StreamWriter) -> None:
        try:
            while (message := await client.next()) is not None:
                writer.write(encode(message))
                await writer.drain()
            writer.close()
        except (ConnectionError, OSError):  # the client died: it is let go
            self._detach(client)
            client.end()
            writer.transport.abort()

    async def aclose(self) -> None:
        """Say goodbye to every client, close the server, remove the socket."""
        self._closing = True
        if self._unwatched is not None:  # what waits here is settled as stopped below
            self._unwatched.cancel()
            self._unwatched = None
        for number, approval in list(self._approvals.items()):
            if approval.answer is None:
                continue  # asked away: the next start reports it
            self._settle(number, False, _SHUTDOWN)  # said now, while the clients listen
            if not approval.answer.done():
                approval.answer.set_result((False, _SHUTDOWN))
        if self._server is not None:
            self._server.close()
        for client in list(self._clients.values()):
            self._detach(client)
            client.end(Goodbye(reason="the agent is stopping"))
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=CLOSE_GRACE)
        self._remove_socket()
        if self._server is not None:
            server, self._server = self._server, None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), CLOSE_GRACE)

    def _remove_socket(self) -> None:
        # Only the file this host made: a later agent's socket stays.
        if self._socket is None:
            return
        with contextlib.suppress(OSError):
            info = os.stat(self._socket)
            if (info.st_dev, info.st_ino) == self._socket_id:
                os.unlink(self._socket)
        self._socket = self._socket_id = None


async def _answers(path: Path) -> bool:
    """Whether a live process accepts connections at `path`."""
    try:
        connection = await connect_socket(path, client="probe")
    except (AgentNotRunning, OSError):
        return False
    await connection.aclose()
    return True


async def _lines(reader: asyncio.StreamReader) -> AsyncIterator[ClientMessage | _BadLine]:
    """A socket client's messages; a bad line is a `_BadLine`, the end of input ends."""
    while True:
        try:
            line = await reader.readline()
        except ValueError:  # longer than MAX_LINE: the framing is lost
            yield _BadLine(f"a line is longer than {MAX_LINE:,} bytes")
            return
        except ConnectionError:
            return
        if not line:
            return
        if not line.strip():
            continue
        try:
            yield decode_client(line)
        except ProtocolError as exc:
            yield _BadLine(str(exc), _request_of(line))


def _request_of(line: bytes) -> int | None:
    """The request number of a line that is not a valid message, if it has one."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    request = data.get("request") if isinstance(data, dict) else None
    return request if isinstance(request, int) and not isinstance(request, bool) else None


def _request_view(shape: RequestShape | None) -> RequestView | None:
    if shape is None:
        return None
    return RequestView(
        system=shape.system, save_point=shape.save_point, tools=shape.tools,
        tools_offered=shape.tools_offered, tools_total=shape.tools_total, turns=shape.turns,
        turn_tokens=shape.turn_tokens, answer=shape.answer, left_out=shape.left_out,
        cut=shape.cut, problem=shape.problem,
    )
