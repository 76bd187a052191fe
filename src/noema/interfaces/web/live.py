"""The page's link to the agent: the attach protocol, carried to the browser.

Each open page gets its own attachment, streamed as server-sent events whose
`id` is the protocol's `seq`. When the browser reconnects it sends the last id
it saw as `Last-Event-ID`; that becomes `Hello.since`, and the agent replays
what the page missed from its backlog, in order and once. Requests (say,
stop, answer, status) go over one shared control attachment and wait for
their `Done` or `Status`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from ...security.approvals import shown_plainly
from ..host.protocol import (
    Answer,
    ApprovalAsked,
    AskStatus,
    ClientMessage,
    Connection,
    Done,
    Hello,
    Say,
    ServerMessage,
    Silence,
    StartSense,
    Status,
    StatusView,
    Stop,
    TurnView,
)
from ..host.deliveries import delivery_json
from . import approval_view
from .approval_view import Reader
from .words import tool_name
from .render import markdown_html
from .streaming import StreamedAnswer

log = logging.getLogger(__name__)

Attach = Callable[[], Awaitable[Connection]]  # a new connection, before its Hello
REQUEST_TIMEOUT = 30.0  # seconds a request may wait for the agent's answer
CLIENT = "web"


class AgentUnavailable(ConnectionError):
    """The agent does not answer (it stopped, or was never started)."""


class Bridge:
    """Attachments to the agent for the web server: live streams and requests."""

    def __init__(self, attach: Attach) -> None:
        self._attach = attach
        self._control: Connection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[ServerMessage]] = {}
        self._numbers = itertools.count(1)
        self._opening = asyncio.Lock()

    # -- live ----------------------------------------------------------------

    async def stream(self, since: int | None) -> AsyncIterator[ServerMessage]:
        """The agent's messages for one page, from `Welcome` on; ends when the
        attachment closes. AgentUnavailable when the agent cannot be reached."""
        connection = await self._connect()
        try:
            await connection.send(Hello(client=CLIENT, since=since))
            async for message in connection.messages():
                yield message
        except ConnectionError:
            return
        finally:
            with contextlib.suppress(Exception):
                await connection.aclose()

    # -- requests -------------------------------------------------------------

    async def say(self, text: str) -> Done:
        """Send a message from the person; the Done says whether it was taken."""
        return await self._request(lambda n: Say(request=n, text=text))  # type: ignore[return-value]

    async def stop(self) -> Done:
        """Stop the current cycle, as `/stop` does."""
        return await self._request(lambda n: Stop(request=n))  # type: ignore[return-value]

    async def status(self) -> StatusView:
        """What the agent is doing now."""
        reply = await self._request(lambda n: AskStatus(request=n))
        if not isinstance(reply, Status):
            raise AgentUnavailable(getattr(reply, "error", None) or "the agent gave no status")
        return reply.status

    async def silence(self, channel: str, seconds: float) -> Done:
        """Silence a channel for `seconds` (the agent caps it); the Done says why not."""
        return await self._request(  # type: ignore[return-value]
            lambda n: Silence(request=n, channel=channel, seconds=seconds))

    async def start_sense(self, channel: str) -> Done:
        """Reopen a silenced channel now."""
        return await self._request(  # type: ignore[return-value]
            lambda n: StartSense(request=n, channel=channel))

    async def answer(self, approval: int, allow: bool) -> Done:
        """The person's answer to approval `approval`, and to no other: the
        Done says why not when that question is no longer open; the
        settlement arrives on the streams."""
        return await self._request(  # type: ignore[return-value]
            lambda n: Answer(request=n, approval=approval, allow=allow))

    async def aclose(self) -> None:
        """Leave the control attachment (the agent goes on)."""
        control, self._control = self._control, None
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if control is not None:
            with contextlib.suppress(Exception):
                await control.aclose()

    async def _request(self, make: Callable[[int], ClientMessage]) -> ServerMessage:
        number = next(self._numbers)
        answer: asyncio.Future[ServerMessage] = asyncio.get_running_loop().create_future()
        self._pending[number] = answer
        try:
            await self._send(make(number))
            return await asyncio.wait_for(answer, REQUEST_TIMEOUT)
        except TimeoutError:
            raise AgentUnavailable(f"the agent did not answer within {REQUEST_TIMEOUT:.0f} s") from None
        finally:
            self._pending.pop(number, None)

    async def _send(self, message: ClientMessage) -> None:
        for attempt in (1, 2):  # a control attachment the agent closed is opened once more
            control = await self._control_connection()
            try:
                await control.send(message)
                return
            except ConnectionError:
                if self._control is control:
                    self._control = None
                if attempt == 2:
                    raise AgentUnavailable("the agent closed the connection") from None

    async def _control_connection(self) -> Connection:
        async with self._opening:
            if self._control is None:
                connection = await self._connect()
                # Requests only: a question is asked where a page watches.
                await connection.send(Hello(client=CLIENT, watching=False))
                self._control = connection
                self._reader = asyncio.create_task(self._read(connection), name="web:control")
            return self._control

    async def _read(self, connection: Connection) -> None:
        try:
            async for message in connection.messages():
                request = getattr(message, "request", None)
                if isinstance(message, (Done, Status)) and request in self._pending:
                    future = self._pending[request]
                    if not future.done():
                        future.set_result(message)
        finally:
            if self._control is connection:
                self._control = None
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(AgentUnavailable("the agent closed the connection"))

    async def _connect(self) -> Connection:
        try:
            return await self._attach()
        except ConnectionError as exc:
            raise AgentUnavailable(str(exc)) from exc


def event_frame(message: ServerMessage, answer: StreamedAnswer | None = None,
                current: Reader | None = None) -> str:
    """One server-sent event: the message as JSON, its `seq` as the event id
    (a resume point), assistant text also as sanitised HTML (with `answer`, a
    piece of an answer carries the whole answer so far rendered), a delivery
    of events also read into its parts; an approval's arguments also as the
    person reads them (`view`; `current` reads a file's text now, for a diff)."""
    data = message.model_dump(mode="json")
    if answer is not None and (html := answer.html_for(message)) is not None:
        data["html"] = html
    if isinstance(message, ApprovalAsked):  # hidden characters shown as the terminal shows them
        data["arguments_shown"], data["flagged"] = shown_plainly(message.arguments)
        data["reason_shown"] = shown_plainly(message.reason)[0]
        data["view"] = approval_view.view(message.tool, data["arguments_shown"], current)
    for key in ("turn", "result", "call"):
        view = getattr(message, key, None)
        if isinstance(view, TurnView) and view.tool_name:
            data[key]["tool_words"] = tool_name(view.tool_name)
        if isinstance(view, TurnView) and view.kind == "assistant":
            data[key]["html"] = markdown_html(view.content)
        elif isinstance(view, TurnView) and view.kind == "event":
            data[key]["delivery"] = delivery_json(view.content)
    body = json.dumps(data, ensure_ascii=False)
    return f"id: {message.seq}\ndata: {body}\n\n"
