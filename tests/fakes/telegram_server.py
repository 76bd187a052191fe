"""A fake Telegram Bot API on 127.0.0.1, for the Telegram channel's tests and
its latency benchmark.

It speaks the methods the channel uses, with the real API's shapes and
refusals: `getMe`; `getUpdates` with real long polling (an `offset` confirms
every update before it, `timeout` waits, an injected message wakes a waiting
poll at once); `sendMessage` (refuses text over 4096 characters and
MarkdownV2 that the real parser refuses, with `{"ok": false, "error_code":
400, "description": "Bad Request: ..."}`); `getFile` and the file download;
`sendChatAction`. A wrong token gets the real 401.

The test side injects updates from any chat (`inject_text`, `inject_photo`,
`inject_document`), reads what was sent (`sent`, `wait_sent`), and can make
the next calls of a method fail (`fail`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ._server import _Uvicorn

TOKEN = "123456:TEST-token-for-the-fake-bot-api"
BOT_ID = 123456
MAX_TEXT = 4096
RESERVED = "_*[]()~`>#+-=|{}.!"


class EntityError(ValueError):
    """Text the real MarkdownV2 parser refuses; the message is the API's wording."""


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def parse_markdown_v2(text: str) -> str:
    """The plain text of a MarkdownV2 message, or EntityError as the real API words it.

    Covers what the API defines: `\\` escapes any ASCII character, bold `*`,
    italic `_`, underline `__`, strikethrough `~`, spoiler `||`, inline code,
    pre blocks; every other reserved character must be escaped. (Links and
    block quotes are refused here: the channel never writes them.)
    """
    out: list[str] = []
    open_marks: list[tuple[str, int]] = []
    names = {"*": "Bold", "_": "Italic", "__": "Underline", "~": "Strikethrough",
             "||": "Spoiler"}
    i = 0

    def offset(at: int) -> int:
        return len(text[:at].encode())

    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 < len(text) and 1 <= ord(text[i + 1]) <= 126:
                out.append(text[i + 1])
                i += 2
                continue
            raise EntityError("Character '\\' is reserved and must be escaped with the "
                              "preceding '\\'")
        if text.startswith("```", i):
            i = _code(text, i, 3, out, "Pre", offset)
            continue
        if c == "`":
            i = _code(text, i, 1, out, "Code", offset)
            continue
        mark = "__" if text.startswith("__", i) else "||" if text.startswith("||", i) else c
        if mark in names:
            if open_marks and open_marks[-1][0] == mark:
                open_marks.pop()
            else:
                open_marks.append((mark, i))
            i += len(mark)
            continue
        if c in RESERVED:
            raise EntityError(f"Character '{c}' is reserved and must be escaped with the "
                              "preceding '\\'")
        out.append(c)
        i += 1
    if open_marks:
        mark, at = open_marks[0]
        raise EntityError(f"Can't find end of {names[mark]} entity at byte offset {offset(at)}")
    return "".join(out)


def _code(text: str, start: int, fence: int, out: list[str], name: str, offset) -> int:
    """Read a code span or pre block from `start`; the index after it."""
    i = start + fence
    body: list[str] = []
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            body.append(text[i + 1])
            i += 2
            continue
        if text.startswith("`" * fence, i):
            content = "".join(body)
            if fence == 3 and "\n" in content:  # the first line names the language
                first, rest = content.split("\n", 1)
                if first and " " not in first:
                    content = rest
            out.append(content)
            return i + fence
        if text[i] == "`":  # a lone backtick inside a pre block must be escaped
            raise EntityError("Character '`' is reserved and must be escaped with the "
                              "preceding '\\'")
        body.append(text[i])
        i += 1
    raise EntityError(f"Can't find end of {name} entity at byte offset {offset(start)}")


@dataclass(frozen=True, slots=True)
class SentMessage:
    """A message the bot sent: as sent, and its text after parsing."""

    chat_id: int
    text: str
    parse_mode: str | None
    plain: str
    message_id: int
    buttons: tuple[tuple[str, str], ...] = ()  # inline keyboard: (label, callback data)


@dataclass
class _Failure:
    remaining: int
    status: int
    description: str


@dataclass
class _Files:
    data: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # file_id → (path, bytes)


class FakeTelegramServer:
    """The fake Bot API; use as a context manager. `base_url` and `file_url`
    are what the library's `Bot(base_url=..., base_file_url=...)` take."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._updates: list[dict[str, Any]] = []
        self._next_update = itertools.count(1)
        self._next_message = itertools.count(1)
        self._sent: list[SentMessage] = []
        self._actions: list[tuple[int, str]] = []
        self._refused: list[str] = []
        self._pressed: list[tuple[str, str]] = []  # answerCallbackQuery: (query id, text)
        self._edits: list[tuple[int, int, str]] = []  # editMessageText: chat, message, text
        self._next_query = itertools.count(1)
        self._calls: list[str] = []
        self._failures: dict[str, _Failure] = {}
        self._files = _Files()
        self._known_chats: set[int] = set()
        self._waiters: set[asyncio.Event] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: _Uvicorn | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None
        self.app = Starlette(routes=[
            Route("/bot{token}/{method}", self._method, methods=["GET", "POST"]),
            Route("/file/bot{token}/{path:path}", self._download, methods=["GET"]),
        ])

    # -- life cycle ---------------------------------------------------------

    def start(self) -> FakeTelegramServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_config=None, access_log=False, lifespan="off",
                                http="h11", ws="none", timeout_graceful_shutdown=1)
        ready = threading.Event()
        self._server = _Uvicorn(config, ready)

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._server.serve(sockets=[sock]))

        self._thread = threading.Thread(target=run, daemon=True, name=f"fake-telegram:{self._port}")
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fake Telegram server did not start")
        return self

    def stop(self) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._server.force_exit = True
        self._wake()
        self._thread.join(10)
        self._server = self._thread = None

    def __enter__(self) -> FakeTelegramServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    # -- the test side --------------------------------------------------------

    def inject_text(self, chat_id: int, text: str) -> int:
        """A text message from `chat_id`; its update_id."""
        return self._inject(chat_id, {"text": text})

    def inject_photo(self, chat_id: int, data: bytes, caption: str = "") -> int:
        """A photo (in two sizes, as Telegram sends them) from `chat_id`."""
        small = self.add_file(data[: max(1, len(data) // 4)], "photos/small.jpg")
        large = self.add_file(data, "photos/large.jpg")
        photo = [{"file_id": fid, "file_unique_id": f"u{fid}", "width": w, "height": w,
                  "file_size": len(content)}
                 for fid, w, content in ((small, 90, data[: max(1, len(data) // 4)]),
                                         (large, 1280, data))]
        return self._inject(chat_id, {"photo": photo, **({"caption": caption} if caption else {})})

    def inject_document(self, chat_id: int, name: str, mime: str, data: bytes,
                        caption: str = "") -> int:
        """A file sent as a document from `chat_id`."""
        fid = self.add_file(data, f"documents/{name}")
        document = {"file_id": fid, "file_unique_id": f"u{fid}", "file_name": name,
                    "mime_type": mime, "file_size": len(data)}
        return self._inject(chat_id, {"document": document,
                                      **({"caption": caption} if caption else {})})

    def inject_press(self, chat_id: int, user_id: int, message_id: int, data: str) -> str:
        """A press of an inline button of the bot's message `message_id`, by
        `user_id` in `chat_id`; the callback query's ID."""
        with self._lock:
            update_id = next(self._next_update)
            query_id = f"q{next(self._next_query)}"
            user = {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"}
            self._updates.append({"update_id": update_id, "callback_query": {
                "id": query_id, "from": user, "chat_instance": str(chat_id), "data": data,
                "message": {"message_id": message_id, "date": int(time.time()),
                            "chat": {"id": chat_id, "type": "private"},
                            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Noema"},
                            "text": "question"}}})
            self._changed.notify_all()
        self._wake()
        return query_id

    @property
    def pressed(self) -> list[tuple[str, str]]:
        """The bot's answers to button presses: (callback query ID, text)."""
        with self._lock:
            return list(self._pressed)

    @property
    def edits(self) -> list[tuple[int, int, str]]:
        """Messages the bot rewrote: (chat, message ID, new text)."""
        with self._lock:
            return list(self._edits)

    def wait_for(self, predicate, timeout: float = 10.0) -> None:
        """Wait until `predicate()` holds; it is called without the server's
        lock, so it may read `sent`, `pressed`, `edits` or the disk."""
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the fake Telegram server never got there")
            with self._changed:
                self._changed.wait(min(left, 0.1))

    def add_file(self, data: bytes, path: str) -> str:
        with self._lock:
            fid = f"F{len(self._files.data) + 1:04d}x"
            self._files.data[fid] = (path, data)
        return fid

    def reset(self) -> None:
        """Forget updates, sent messages, calls and failures (between tests).
        Update IDs keep growing, as Telegram's do."""
        with self._changed:
            self._updates.clear()
            self._sent.clear()
            self._actions.clear()
            self._refused.clear()
            self._pressed.clear()
            self._edits.clear()
            self._calls.clear()
            self._failures.clear()
            self._changed.notify_all()

    def fail(self, method: str, times: int = 1, status: int = 502,
             description: str = "Bad Gateway") -> None:
        """The next `times` calls of `method` fail with this status."""
        with self._lock:
            self._failures[method] = _Failure(times, status, description)

    @property
    def sent(self) -> list[SentMessage]:
        with self._lock:
            return list(self._sent)

    @property
    def actions(self) -> list[tuple[int, str]]:
        with self._lock:
            return list(self._actions)

    @property
    def refused(self) -> list[str]:
        """The descriptions of sendMessage calls refused, in order."""
        with self._lock:
            return list(self._refused)

    def calls(self, method: str) -> int:
        with self._lock:
            return self._calls.count(method)

    @property
    def unconfirmed(self) -> int:
        """Updates not yet confirmed by a later offset."""
        with self._lock:
            return len(self._updates)

    def wait_sent(self, count: int, timeout: float = 10.0) -> list[SentMessage]:
        """Wait until at least `count` messages were sent; all of them."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._sent) >= count, timeout):
                raise TimeoutError(f"{len(self._sent)} message(s) sent, {count} awaited")
            return list(self._sent)

    async def wait_sent_async(self, count: int, timeout: float = 10.0) -> list[SentMessage]:
        return await asyncio.to_thread(self.wait_sent, count, timeout)

    def wait_calls(self, method: str, count: int, timeout: float = 10.0) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self._calls.count(method) >= count, timeout):
                raise TimeoutError(f"{method} called {self._calls.count(method)} time(s)")

    async def wait_calls_async(self, method: str, count: int, timeout: float = 10.0) -> None:
        await asyncio.to_thread(self.wait_calls, method, count, timeout)

    # -- the API ---------------------------------------------------------------

    def _inject(self, chat_id: int, content: dict[str, Any]) -> int:
        with self._lock:
            update_id = next(self._next_update)
            person = {"id": abs(chat_id), "is_bot": False, "first_name": f"User{abs(chat_id)}"}
            self._updates.append({"update_id": update_id, "message": {
                "message_id": next(self._next_message), "date": int(time.time()),
                "chat": {"id": chat_id, "type": "private", "first_name": person["first_name"]},
                "from": person, **content}})
            self._known_chats.add(chat_id)
            self._changed.notify_all()
        self._wake()
        return update_id

    def _wake(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        def wake_all() -> None:
            for waiter in list(self._waiters):
                waiter.set()
        try:
            loop.call_soon_threadsafe(wake_all)
        except RuntimeError:  # the loop closed meanwhile
            pass

    async def _method(self, request: Request) -> Response:
        method = request.path_params["method"]
        try:
            return await self._answer(method, request)
        finally:  # counted once answered, so a waiting test sees its effect
            with self._changed:
                self._calls.append(method)
                self._changed.notify_all()

    async def _answer(self, method: str, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        try:
            params = await _params(request)
        except ClientDisconnect:  # a client killed mid-request
            return Response(status_code=499)
        with self._lock:
            failure = self._failures.get(method)
            if failure is not None and failure.remaining > 0:
                failure.remaining -= 1
                return _error(failure.status, failure.description)
        handler = {"getMe": self._get_me, "getUpdates": self._get_updates,
                   "sendMessage": self._send_message, "getFile": self._get_file,
                   "sendChatAction": self._send_chat_action, "close": self._true,
                   "answerCallbackQuery": self._answer_press,
                   "editMessageText": self._edit_message,
                   "deleteWebhook": self._true}.get(method)
        if handler is None:
            return _error(404, "Not Found")
        return await handler(params)

    async def _true(self, params: dict[str, str]) -> Response:
        return _ok(True)

    async def _get_me(self, params: dict[str, str]) -> Response:
        return _ok({"id": BOT_ID, "is_bot": True, "first_name": "Noema",
                    "username": "noema_test_bot", "can_join_groups": True,
                    "can_read_all_group_messages": False, "supports_inline_queries": False})

    async def _get_updates(self, params: dict[str, str]) -> Response:
        offset = int(params.get("offset", "0") or 0)
        limit = max(1, min(100, int(params.get("limit", "100") or 100)))
        timeout = float(params.get("timeout", "0") or 0)
        deadline = time.monotonic() + timeout
        waiter = asyncio.Event()
        self._waiters.add(waiter)
        try:
            while True:
                with self._lock:
                    if offset > 0:  # confirms every update before it, for good
                        self._updates = [u for u in self._updates if u["update_id"] >= offset]
                    found = (self._updates[offset:] if offset < 0 else self._updates)[:limit]
                    waiter.clear()
                left = deadline - time.monotonic()
                if found or left <= 0 or (self._server and self._server.should_exit):
                    return _ok(found)
                try:
                    await asyncio.wait_for(waiter.wait(), left)
                except TimeoutError:
                    pass
        finally:
            self._waiters.discard(waiter)

    async def _send_message(self, params: dict[str, str]) -> Response:
        try:
            chat_id = int(params["chat_id"])
        except (KeyError, ValueError):
            return _error(400, "Bad Request: chat_id is empty")
        text = params.get("text", "")
        mode = params.get("parse_mode") or None
        with self._lock:
            known = chat_id in self._known_chats
        if not known:
            return self._refuse("Bad Request: chat not found")
        if mode not in (None, "MarkdownV2"):
            return self._refuse(f"Bad Request: unsupported parse_mode {mode}")
        try:
            plain = parse_markdown_v2(text) if mode == "MarkdownV2" else text
        except EntityError as exc:
            return self._refuse(f"Bad Request: can't parse entities: {exc}")
        if not plain.strip():
            return self._refuse("Bad Request: message text is empty")
        if _utf16(plain) > MAX_TEXT:
            return self._refuse("Bad Request: message is too long")
        markup = json.loads(params.get("reply_markup") or "{}")
        buttons = tuple((b["text"], b.get("callback_data", ""))
                        for row in markup.get("inline_keyboard", []) for b in row)
        with self._changed:
            message_id = next(self._next_message)
            self._sent.append(SentMessage(chat_id, text, mode, plain, message_id, buttons))
            self._changed.notify_all()
        return _ok({"message_id": message_id, "date": int(time.time()),
                    "chat": {"id": chat_id, "type": "private"},
                    "from": {"id": BOT_ID, "is_bot": True, "first_name": "Noema"},
                    "text": plain})

    async def _answer_press(self, params: dict[str, str]) -> Response:
        with self._changed:
            self._pressed.append((params.get("callback_query_id", ""), params.get("text", "")))
            self._changed.notify_all()
        return _ok(True)

    async def _edit_message(self, params: dict[str, str]) -> Response:
        try:
            chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        except (KeyError, ValueError):
            return _error(400, "Bad Request: message to edit not found")
        text = params.get("text", "")
        with self._changed:
            self._edits.append((chat_id, message_id, text))
            self._changed.notify_all()
        return _ok({"message_id": message_id, "date": int(time.time()),
                    "chat": {"id": chat_id, "type": "private"}, "text": text})

    def _refuse(self, description: str) -> Response:
        with self._lock:
            self._refused.append(description)
        return _error(400, description)

    async def _send_chat_action(self, params: dict[str, str]) -> Response:
        with self._lock:
            self._actions.append((int(params.get("chat_id", "0")), params.get("action", "")))
        return _ok(True)

    async def _get_file(self, params: dict[str, str]) -> Response:
        fid = params.get("file_id", "")
        with self._lock:
            found = self._files.data.get(fid)
        if found is None:
            return _error(400, "Bad Request: invalid file_id")
        path, data = found
        return _ok({"file_id": fid, "file_unique_id": f"u{fid}", "file_size": len(data),
                    "file_path": path})

    async def _download(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        wanted = request.path_params["path"]
        with self._lock:
            for path, data in self._files.data.values():
                if path == wanted:
                    return Response(data, media_type="application/octet-stream")
        return _error(404, "Not Found")


async def _params(request: Request) -> dict[str, str]:
    """The call's parameters, from the query, a form or a JSON body (as strings)."""
    params = dict(request.query_params)
    body = await request.body()
    kind = request.headers.get("content-type", "")
    if body and kind.startswith("application/json"):
        params.update({k: v if isinstance(v, str) else json.dumps(v)
                       for k, v in json.loads(body).items()})
    elif body:
        params.update(dict(parse_qsl(body.decode(), keep_blank_values=True)))
    return params


def _ok(result: Any) -> JSONResponse:
    return JSONResponse({"ok": True, "result": result})


def _error(code: int, description: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error_code": code, "description": description}, code)
