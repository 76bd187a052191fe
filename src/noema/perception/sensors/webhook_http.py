"""The webhook's HTTP/1.1 server: h11 parses, this module only bounds and paces.

h11 is a sans-IO HTTP/1.1 parser (the one uvicorn uses): it rejects what the
standard forbids (bad header names and values, conflicting lengths, a
transfer coding other than chunked) and bounds the head it buffers. What it
leaves to its caller is decided here, in one place:

- **time**: each request's head must arrive within `head_timeout_s` of the
  moment the server starts waiting for it (a keep-alive connection's idle wait
  included), its body within `body_timeout_s` of the head, and the answer
  must be taken within `send_timeout_s`; a slow client is closed, not waited on.
- **room**: a connection that has not yet been admitted (its head read, its
  token checked) is *waiting*; at most `max_waiting` wait at once, and a new
  connection past that closes the one that has waited longest. A flood of slow
  connections therefore only ever holds a fixed number of places, and a
  client that sends its request at once (the token holder) is always among
  the newest and is read before it could be pushed out.
- **shape**: the request line, the number of header lines and each line's
  length are bounded; `Content-Length` together with `Transfer-Encoding` is
  refused and the connection closed (a proxy in front may frame the body the
  other way, and the next request would then be read from the middle of it).

Every refusal closes the connection unless the whole request was read, so
nothing a client sent after a refused head is ever read as a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import h11

from .webhook_messages import PROTOCOL_KINDS, Answer, Closing, Handler, Head, Limits

log = logging.getLogger(__name__)

__all__ = ["PROTOCOL_KINDS", "Answer", "Closing", "Handler", "Head", "HttpServer", "Limits"]

_READ = 64 * 1024
_LINGER_S = 1.0  # how long a closing connection's late bytes are drained
_LINGER_BYTES = 1024 * 1024


class _Refused(Exception):
    def __init__(self, closing: Closing) -> None:
        super().__init__(closing.detail)
        self.closing = closing


@dataclass
class _Connection:
    task: asyncio.Task
    writer: asyncio.StreamWriter
    dropped: bool = False  # closed by the server: pushed out, or the server stops


@dataclass
class HttpServer:
    """Serves `handler` on an already bound, listening socket until cancelled."""

    handler: Handler
    limits: Limits = field(default_factory=Limits)
    _waiting: OrderedDict[int, _Connection] = field(default_factory=OrderedDict)
    _all: dict[int, _Connection] = field(default_factory=dict)
    _ids: itertools.count = field(default_factory=itertools.count)

    @property
    def waiting(self) -> int:
        """How many connections wait to be admitted now."""
        return len(self._waiting)

    @property
    def connections(self) -> int:
        """How many connections are open now, waiting or not."""
        return len(self._all)

    async def serve(self, sock, ready: Callable[[], None]) -> None:
        """Accept on `sock`; `ready` is called once it accepts."""
        server = await asyncio.start_server(self._accepted, sock=sock, limit=_READ)
        try:
            ready()
            await asyncio.Future()  # until cancelled
        finally:
            server.close()
            for connection in list(self._all.values()):
                connection.dropped = True  # its task must end quietly, not cancelled
                connection.task.cancel()
            for connection in list(self._all.values()):
                with contextlib.suppress(BaseException):
                    await connection.task
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                        ) -> None:
        number = next(self._ids)
        task = asyncio.current_task()
        assert task is not None
        connection = _Connection(task, writer)
        self._all[number] = connection
        self._wait(number, connection)
        orderly = False
        try:
            await self._converse(number, connection, reader, writer)
            orderly = True
        except asyncio.CancelledError:
            if not connection.dropped:
                raise
        except (ConnectionError, OSError):
            pass  # the client went away: nothing to answer
        except Exception:  # our own bug: logged, and only this connection is lost
            log.exception("the webhook failed on a request")
        finally:
            self._waiting.pop(number, None)
            self._all.pop(number, None)
            if orderly:
                await _linger(reader, writer)
            writer.transport.abort()

    def _wait(self, number: int, connection: _Connection) -> None:
        """Count `connection` as waiting; past the bound, push the longest waiting out."""
        self._waiting[number] = connection
        self._waiting.move_to_end(number)
        while len(self._waiting) > self.limits.max_waiting:
            _, oldest = self._waiting.popitem(last=False)
            oldest.dropped = True
            self.handler.report(Closing(503, "pushed out", "too many clients are waiting"))
            oldest.task.cancel()

    def _admitted(self, number: int) -> None:
        self._waiting.pop(number, None)

    async def _converse(self, number: int, connection: _Connection,
                        reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client = str(peer[0]) if peer else "unknown"
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_head_bytes)
        first = True
        while True:
            bare = False  # a HEAD request: its answer has headers and no body
            try:
                async with asyncio.timeout(self.limits.head_timeout_s):
                    request = await _next(conn, reader)
                if request is None:  # closed between requests
                    return
                bare = request.method == b"HEAD"
                head = self._head(request, client)
            except _Refused as refused:
                await self._close_with(conn, writer, refused.closing, bare)
                return
            except TimeoutError:
                if not first and not conn.trailing_data[0]:
                    return  # an idle keep-alive connection: closed without a word
                await self._close_with(conn, writer, Closing(
                    408, "too slow", "the request's head took too long"))
                return
            first = False
            try:
                admission = self.handler.admit(head)
            except Exception:  # our bug: logged, and the client still gets an answer
                await self._failed(conn, writer, bare)
                return
            if isinstance(admission, Answer):
                await self._send(conn, writer, admission, close=True, bare=bare)
                return
            self._admitted(number)
            if conn.they_are_waiting_for_100_continue:
                writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
            try:
                async with asyncio.timeout(self.limits.body_timeout_s):
                    body = await self._body(conn, reader)
            except _Refused as refused:
                await self._close_with(conn, writer, refused.closing, bare)
                return
            except TimeoutError:
                await self._close_with(conn, writer, Closing(
                    408, "too slow", "the request's body took too long"), bare)
                return
            try:
                answer = self.handler.take(head, body, admission)
                if not isinstance(answer, Answer):
                    answer = await answer
            except Exception:  # our bug: logged, and the client still gets an answer
                await self._failed(conn, writer, bare)
                return
            await self._send(conn, writer, answer, close=answer.status >= 400, bare=bare)
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
            self._wait(number, connection)

    def _head(self, request: h11.Request, client: str) -> Head:
        """The request's head, refused if its shape is outside the limits."""
        limits = self.limits
        target = bytes(request.target)
        if len(target) > limits.max_target_bytes:
            raise _Refused(Closing(414, "target too long",
                                   f"the request target may be at most {limits.max_target_bytes}"
                                   " bytes"))
        headers = tuple((bytes(name), bytes(value)) for name, value in request.headers)
        if len(headers) > limits.max_header_lines:
            raise _Refused(Closing(431, "too many headers",
                                   f"at most {limits.max_header_lines} header lines are read"))
        if any(len(name) + len(value) + 2 > limits.max_header_line_bytes
               for name, value in headers):
            raise _Refused(Closing(431, "header too long",
                                   f"a header line may be at most {limits.max_header_line_bytes}"
                                   " bytes"))
        if len(target) + sum(len(n) + len(v) + 4 for n, v in headers) > limits.max_head_bytes:
            # h11 bounds only a head still incomplete; one that came whole is measured here
            raise _Refused(Closing(431, "head too large",
                                   f"the request's head may be at most {limits.max_head_bytes}"
                                   " bytes"))
        names = {name for name, _ in headers}
        if b"transfer-encoding" in names and b"content-length" in names:
            raise _Refused(Closing(400, "ambiguous length",
                                   "Content-Length and Transfer-Encoding together are refused"))
        text = target.decode("latin-1")
        return Head(request.method.decode("latin-1"), text, text.split("?", 1)[0],
                    headers, client)

    async def _body(self, conn: h11.Connection, reader: asyncio.StreamReader) -> bytes:
        chunks, size = [], 0
        while True:
            event = await _next(conn, reader)
            if event is None:
                raise _Refused(Closing(400, "malformed", "the body ended early"))
            if isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.limits.max_body_bytes:  # stop here: the rest is never read
                    raise _Refused(Closing(413, "too big", "the body may be at most "
                                           f"{self.limits.max_body_bytes} bytes"))
                chunks.append(bytes(event.data))

    async def _failed(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                      bare: bool) -> None:
        log.exception("the webhook failed on a request")
        await self._close_with(conn, writer, Closing(
            500, "failed", "the webhook failed on this request; the agent's log says why"),
            bare)

    async def _close_with(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                          closing: Closing, bare: bool = False) -> None:
        self.handler.report(closing)
        if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            await self._send(conn, writer, Answer(closing.status, {"error": closing.detail}),
                             close=True, bare=bare)

    async def _send(self, conn: h11.Connection, writer: asyncio.StreamWriter, answer: Answer,
                    close: bool, bare: bool = False) -> None:
        """Write `answer`; `bare` (a HEAD request) sends its headers without the body.

        The length header is the body's either way: that is what a HEAD answer
        says. Should h11 refuse what we built (a bug of ours), the client still
        gets a status line and the connection is closed, never silence.
        """
        body = json.dumps(answer.body).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(body))),
                   *answer.headers]
        if close:
            headers.append(("connection", "close"))
        phrase = HTTPStatus(answer.status).phrase
        try:
            data = conn.send(h11.Response(status_code=answer.status, headers=headers,
                                          reason=phrase.encode()))
            if not bare:
                data += conn.send(h11.Data(data=body))
            data += conn.send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            log.exception("the webhook built an answer HTTP/1.1 refuses; a bare one is sent")
            data = (f"HTTP/1.1 {answer.status} {phrase}\r\ncontent-length: 0\r\n"
                    "connection: close\r\n\r\n").encode("ascii")
        writer.write(data)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.limits.send_timeout_s):
                await writer.drain()


async def _next(conn: h11.Connection, reader: asyncio.StreamReader) -> Any:
    """h11's next event, reading as needed; None if the client closed cleanly first."""
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            status = exc.error_status_hint
            kind = "head too large" if status == 431 else "malformed"
            raise _Refused(Closing(status, kind, f"the request is not valid HTTP/1.1 ({exc})")
                           ) from None
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(_READ))
            continue
        if isinstance(event, h11.ConnectionClosed):
            return None
        return event


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Close our side, then read and drop what the client still sends, briefly.

    Closing a socket with unread bytes in it resets the connection, and the
    reset can destroy the answer before the client reads it (a refused body
    is still arriving). So the answer goes first, then a short, bounded drain.
    """
    with contextlib.suppress(Exception):
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(_LINGER_S):
            dropped = 0
            while dropped < _LINGER_BYTES:
                data = await reader.read(_READ)
                if not data:
                    return
                dropped += len(data)
