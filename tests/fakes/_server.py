"""A real HTTP server on 127.0.0.1, in a background thread with its own event
loop, so sync tests, async tests and benchmark scripts can all use it.

Subclasses describe one wire protocol: how a reply becomes SSE events and
how a failure becomes an error response. This base does the HTTP: it reads
and records requests, paces the stream, and notices when a client goes away
in the middle of one.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import deque
from typing import Any

import uvicorn

from .script import FakeFailure, FakeReply, RecordedRequest

DROP = object()  # in an event plan: close the connection here


class _DeliberateDrop(Exception):
    """Raised inside the app so the server aborts the connection mid-body."""


class _Uvicorn(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self._ready.set()


class FakeServer:
    """Base of the fake model servers; use as a context manager."""

    route = "/"  # the POST path the protocol uses

    def __init__(
        self,
        *,
        tokens_per_second: float | None = None,
        default: FakeReply | FakeFailure | None = None,
    ) -> None:
        self.chunk_delay_s = 1.0 / tokens_per_second if tokens_per_second else 0.0
        self.default: FakeReply | FakeFailure = default or FakeReply(text="ok")
        self.disconnected = threading.Event()  # a client left in the middle of a stream
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._queue: deque[FakeReply | FakeFailure] = deque()
        self._requests: list[RecordedRequest] = []
        self._disconnects = 0
        self._completed = 0
        self._port: int | None = None
        self._server: _Uvicorn | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------

    def start(self) -> FakeServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app,
            log_config=None,  # leave the host process's logging alone
            access_log=False,
            lifespan="off",
            interface="asgi3",
            http="h11",
            ws="none",
            timeout_graceful_shutdown=1,
        )
        ready = threading.Event()
        self._server = _Uvicorn(config, ready)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True,
            name=f"{type(self).__name__}:{self._port}",
        )
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{type(self).__name__} did not start")
        return self

    def stop(self) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._server.force_exit = True  # do not wait for streams still open
        self._thread.join(10)
        self._server = self._thread = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the server is not started")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- scripting and inspection --------------------------------------------

    @property
    def tokens_per_second(self) -> float | None:
        return 1.0 / self.chunk_delay_s if self.chunk_delay_s else None

    @tokens_per_second.setter
    def tokens_per_second(self, value: float | None) -> None:
        self.chunk_delay_s = 1.0 / value if value else 0.0

    def script(self, *items: FakeReply | FakeFailure) -> None:
        """Answer the next requests with these, in order; then with `default`."""
        with self._lock:
            self._queue.extend(items)

    def reset(self) -> None:
        """Forget scripts, recordings and counters (between tests)."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._disconnects = 0
            self._completed = 0
        self.default = FakeReply(text="ok")
        self.chunk_delay_s = 0.0
        self.disconnected.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def disconnects(self) -> int:
        """Streams a client abandoned before their end."""
        with self._lock:
            return self._disconnects

    @property
    def completed(self) -> int:
        """Streams sent to their end."""
        with self._lock:
            return self._completed

    def wait_requests_sync(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Wait until at least `count` requests have arrived."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self._requests) >= count, timeout)

    async def wait_requests(self, count: int = 1, timeout: float = 10.0) -> bool:
        """From async code: wait until at least `count` requests have arrived."""
        return await asyncio.to_thread(self.wait_requests_sync, count, timeout)

    async def wait_disconnected(self, timeout: float = 10.0) -> bool:
        """From async code: wait until a client abandons a stream."""
        return await asyncio.to_thread(self.disconnected.wait, timeout)

    # -- protocol hooks ---------------------------------------------------------

    def render_stream(self, reply: FakeReply, request: Any) -> list[bytes | object]:
        """The SSE events of a streamed reply (bytes each, or DROP)."""
        raise NotImplementedError

    def render_whole(self, reply: FakeReply, request: Any) -> Any:
        """The JSON body of a non-streamed reply."""
        raise NotImplementedError

    def render_failure(self, failure: FakeFailure) -> Any:
        """The JSON body of an error response."""
        raise NotImplementedError

    def refusal(self, body: Any) -> FakeFailure | None:
        """The failure a real endpoint would answer this request with, before any
        script is consulted (a request past the model's window, say); None here."""
        return None

    # -- HTTP ------------------------------------------------------------------

    def _next(self) -> FakeReply | FakeFailure:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    async def _app(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        with self._lock:
            self._requests.append(RecordedRequest(scope["method"], scope["path"], headers, body))
            self._arrived.notify_all()
        if scope["method"] != "POST" or scope["path"] != self.route:
            await _send_json(send, 404, {"error": {"message": f"no route {scope['path']}"}})
            return
        item = self.refusal(body) or self._next()
        if isinstance(item, FakeFailure):
            extra = [] if item.retry_after is None else [(b"retry-after", str(item.retry_after).encode())]
            await _send_json(send, item.status, self.render_failure(item), extra)
        elif isinstance(body, dict) and body.get("stream"):
            await self._stream(send, receive, self.render_stream(item, body))
        else:
            await _send_json(send, 200, self.render_whole(item, body))

    async def _stream(self, send: Any, receive: Any, plan: list[bytes | object]) -> None:
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        finished = False
        try:
            await send({
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            })
            for number, event in enumerate(plan):
                if number and self.chunk_delay_s:
                    # Pace like a model, but notice a departure at once.
                    try:
                        await asyncio.wait_for(gone.wait(), self.chunk_delay_s)
                    except TimeoutError:
                        pass
                if gone.is_set():
                    break
                if event is DROP:
                    finished = True  # deliberate, not the client's doing
                    raise _DeliberateDrop("dropping the connection as scripted")
                await send({"type": "http.response.body", "body": event, "more_body": True})
            else:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                finished = True
                with self._lock:
                    self._completed += 1
        finally:
            watcher.cancel()
            if not finished:
                with self._lock:
                    self._disconnects += 1
                self.disconnected.set()


async def _send_json(send: Any, status: int, payload: Any, extra: list | None = None) -> None:
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": data, "more_body": False})


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; `data` is JSON-encoded unless it is already text."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()
