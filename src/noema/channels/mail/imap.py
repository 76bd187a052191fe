"""One IMAP connection, in the few commands the channel needs (aioimaplib).

aioimaplib speaks the protocol and IDLE; this module adds what it leaves to
its callers: a lost connection wakes whoever waits on it, a server's
refusal is a `MailServerError` with its words, and FETCH responses are read
into (uid, flags, bytes).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from dataclasses import dataclass

import aioimaplib

from .settings import MailSettings

LOGOUT_WAIT_S = 0.5
_UID = re.compile(rb"UID (\d+)")
_FLAGS = re.compile(rb"FLAGS \(([^)]*)\)")
_SIZE = re.compile(rb"RFC822\.SIZE (\d+)")
_UIDVALIDITY = re.compile(rb"UIDVALIDITY (\d+)")
_UIDNEXT = re.compile(rb"UIDNEXT (\d+)")
_EXISTS = re.compile(rb"^(\d+) EXISTS")
_FETCH = re.compile(rb"^\d+ FETCH ")


class MailServerError(Exception):
    """The mail server refused a command, failed, or went away."""


@dataclass(frozen=True, slots=True)
class Folder:
    """A selected folder's identity and extent."""

    name: str
    uidvalidity: int
    uidnext: int
    exists: int


@dataclass(frozen=True, slots=True)
class Fetched:
    """One message of a FETCH response."""

    uid: int
    flags: frozenset[str]
    data: bytes  # the literal fetched (the whole mail, or its header)
    size: int | None = None  # RFC822.SIZE, when it was asked for


def _honour_cancellation() -> None:
    """Raise CancelledError if this task was cancelled while a command ended.

    Python 3.11's `asyncio.wait_for` (used inside aioimaplib) drops a
    cancellation that lands as the awaited command completes; the task still
    counts it, so it is raised here instead of being lost (a stop would then
    wait on IDLE forever)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _check(response: aioimaplib.Response, what: str) -> aioimaplib.Response:
    if response.result != "OK":
        said = b" ".join(bytes(line) for line in response.lines[-1:]).decode(errors="replace")
        raise MailServerError(f"the IMAP server refused {what}: {response.result} {said}")
    return response


def parse_fetch(lines: list[bytes | bytearray]) -> list[Fetched]:
    """The messages of a FETCH response (each: a line, its literal, a closing line)."""
    found: list[Fetched] = []
    meta: bytes | None = None
    data = b""
    for line in lines:
        if isinstance(line, bytearray):  # the literal of the line before
            data = bytes(line)
            continue
        if _FETCH.match(line):
            if meta is not None:
                found.extend(_one(meta, data))
            meta, data = line, b""
        elif meta is not None:
            meta += b" " + line  # the part after a literal (")" or "UID 5)")
    if meta is not None:
        found.extend(_one(meta, data))
    return found


def _one(meta: bytes, data: bytes) -> list[Fetched]:
    uid = _UID.search(meta)
    if uid is None:  # an unsolicited FETCH (a flag change): not an answer
        return []
    flags = _FLAGS.search(meta)
    names = frozenset(flags.group(1).decode(errors="replace").split()) if flags else frozenset()
    size = _SIZE.search(meta)
    return [Fetched(int(uid.group(1)), names, data, int(size.group(1)) if size else None)]


class _Protocol(aioimaplib.IMAP4ClientProtocol):
    """aioimaplib's protocol, telling when the server reports new mail.

    An untagged EXISTS that arrives with the answer to another command
    (Dovecot sends one at the end of any command after a delivery) is
    dropped by aioimaplib, and IDLE will not repeat it: without this, a
    mail arriving while the sensor works would wait for the next one."""

    def __init__(self, loop, conn_lost_cb, on_exists) -> None:
        super().__init__(loop, conn_lost_cb)
        self._on_exists = on_exists

    def _untagged_response(self, line: bytes):
        if _EXISTS.match(line[2:] if line.startswith(b"* ") else line):
            self._on_exists()
        return super()._untagged_response(line)


class _Client(aioimaplib.IMAP4):
    def __init__(self, *, on_exists, **options) -> None:
        self._on_exists = on_exists
        super().__init__(**options)

    def create_client(self, host, port, loop, conn_lost_cb=None, ssl_context=None) -> None:
        local_loop = loop if loop is not None else asyncio.get_running_loop()
        self.protocol = _Protocol(local_loop, conn_lost_cb, self._on_exists)
        self._client_task = local_loop.create_task(local_loop.create_connection(
            lambda: self.protocol, host, port, ssl=ssl_context))


class ImapConnection:
    """A logged-in IMAP connection with one folder selected."""

    def __init__(self, client: aioimaplib.IMAP4, lost: asyncio.Event, timeout: float,
                 news: asyncio.Event) -> None:
        self._client = client
        self.lost = lost  # set when the server closes the connection or it breaks
        self._timeout = timeout
        self.folder: Folder | None = None
        self.news = news  # set when the server reports a new message count

    def begin_look(self) -> None:
        """Forget the news heard so far: the look about to start reads them."""
        self.news.clear()

    @classmethod
    async def open(cls, settings: MailSettings, password: str) -> ImapConnection:
        """Connect, log in (the password is never logged) and return the connection."""
        host, port = settings.imap_address
        lost, news = asyncio.Event(), asyncio.Event()
        context = ssl.create_default_context() if settings.imap_security == "tls" else None
        try:
            client = _Client(host=host, port=port, timeout=settings.timeout,
                             conn_lost_cb=lambda exc: lost.set(), ssl_context=context,
                             on_exists=news.set)
            await client.wait_hello_from_server()
            _honour_cancellation()
            _check(await client.login(settings.username or "", password), "the login")
            _honour_cancellation()
        except MailServerError:
            raise
        except (OSError, asyncio.TimeoutError, aioimaplib.Abort, aioimaplib.Error) as exc:
            raise MailServerError(f"cannot reach the IMAP server {host}:{port} "
                                  f"({type(exc).__name__}: {exc})") from None
        return cls(client, lost, settings.timeout, news)

    @property
    def has_idle(self) -> bool:
        return self._client.has_capability("IDLE")

    async def _unless_lost(self, command):
        """Await `command`, or raise MailServerError as soon as the connection is
        lost (aioimaplib would wait for an answer until the timeout)."""
        if self.lost.is_set():
            if asyncio.iscoroutine(command):
                command.close()  # never started
            raise MailServerError("the connection to the IMAP server was lost")
        work = asyncio.ensure_future(command)
        lost = asyncio.ensure_future(self.lost.wait())
        try:
            await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            if not work.done():
                work.cancel()
        if not work.done() or work.cancelled():
            raise MailServerError("the connection to the IMAP server was lost")
        return work.result()

    async def _run(self, what: str, command) -> aioimaplib.Response:
        try:
            async with asyncio.timeout(self._timeout):
                response = await self._unless_lost(command)
        except MailServerError:
            raise
        except (OSError, asyncio.TimeoutError, aioimaplib.Abort, aioimaplib.Error) as exc:
            self.lost.set()  # a half-answered command leaves the connection unusable
            raise MailServerError(f"the IMAP server failed {what} "
                                  f"({type(exc).__name__}: {exc})") from None
        _honour_cancellation()
        return _check(response, what)

    async def select(self, name: str) -> Folder:
        """Select `name` (read-write) and return its UIDVALIDITY and extent."""
        response = await self._run(f"selecting {name}", self._client.select(_quote(name)))
        text = b"\n".join(bytes(line) for line in response.lines)
        validity = _UIDVALIDITY.search(text)
        nxt = _UIDNEXT.search(text)
        exists = next((int(m.group(1)) for line in response.lines
                       if (m := _EXISTS.match(bytes(line)))), 0)
        if validity is None:
            raise MailServerError(f"the IMAP server gave no UIDVALIDITY for {name}")
        self.folder = Folder(name, int(validity.group(1)), int(nxt.group(1)) if nxt else 0, exists)
        return self.folder

    async def search(self, *criteria: str) -> list[int]:
        """UIDs matching an IMAP SEARCH, ascending."""
        response = await self._run("a search", self._client.uid_search(*criteria, charset=None))
        uids: list[int] = []
        for line in response.lines[:-1]:
            words = bytes(line).split()
            if words[:1] == [b"SEARCH"]:
                words = words[1:]
            uids += [int(w) for w in words if w.isdigit()]
        return sorted(set(uids))

    async def uids_after(self, uid: int) -> list[int]:
        """UIDs above `uid` (`n:*` always matches the newest, so it is filtered)."""
        return [u for u in await self.search("UID", f"{uid + 1}:*") if u > uid]

    async def fetch(self, uids: list[int], parts: str) -> list[Fetched]:
        """FETCH `parts` (e.g. 'BODY.PEEK[]') of `uids`, in the server's order."""
        if not uids:
            return []
        items = f"(UID FLAGS {parts})"
        response = await self._run("a fetch", self._client.uid("fetch", _set(uids), items))
        return parse_fetch(response.lines[:-1])

    async def sizes(self, uids: list[int]) -> dict[int, int]:
        """RFC822.SIZE of each of `uids` still there: what fetching it whole would cost."""
        return {f.uid: f.size or 0 for f in await self.fetch(uids, "RFC822.SIZE")}

    async def download(self, uid: int, size: int, sink, chunk: int = 1024 * 1024) -> bool:
        """The raw mail `uid` (`size` bytes) into `sink`, `chunk` bytes per command, so
        neither this process nor the client library holds a big mail whole. False if
        the mail is not there."""
        offset = 0
        while offset < size or offset == 0:
            found = await self.fetch([uid], f"BODY.PEEK[]<{offset}.{chunk}>")
            if not found:
                return False
            data = found[0].data
            sink(data)
            offset += len(data)
            if len(data) < chunk:
                break
        return True

    async def noop(self) -> None:
        """A NOOP: the server tells this session of mail that arrived since its last look."""
        await self._run("a NOOP", self._client.noop())

    async def mark_seen(self, uid: int) -> None:
        await self._run("setting \\Seen", self._client.uid("store", str(uid), "+FLAGS.SILENT",
                                                            "(\\Seen)"))

    async def append(self, folder: str, data: bytes, flags: str = "") -> None:
        """Put a message in `folder` (a copy of what was sent, a test's delivery)."""
        await self._run(f"storing a message in {folder}",
                        self._client.append(data, mailbox=_quote(folder), flags=flags or None))

    async def wait_for_change(self, timeout: float) -> bool:
        """IDLE until the server reports something (True) or `timeout` passes
        (False); MailServerError if the connection is lost meanwhile. True at
        once if new mail was reported since `begin_look`."""
        if self.news.is_set():
            return True
        try:
            async with asyncio.timeout(self._timeout):
                idle = await self._unless_lost(self._client.idle_start(timeout=timeout))
        except MailServerError:
            raise
        except (OSError, asyncio.TimeoutError, aioimaplib.Abort) as exc:
            self.lost.set()
            raise MailServerError(f"the IMAP server refused IDLE ({type(exc).__name__}: {exc})"
                                  ) from None
        _honour_cancellation()
        push = asyncio.ensure_future(self._client.wait_server_push(timeout=timeout + 5))
        lost = asyncio.ensure_future(self.lost.wait())
        try:
            await asyncio.wait({push, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            push.cancel()
            lost.cancel()
        if self.lost.is_set():
            raise MailServerError("the connection to the IMAP server was lost")
        changed = push.done() and not push.cancelled() and push.exception() is None and (
            push.result() != aioimaplib.STOP_WAIT_SERVER_PUSH)
        self._client.idle_done()
        try:
            async with asyncio.timeout(self._timeout):
                await self._unless_lost(idle)
        except MailServerError:
            raise
        except (OSError, asyncio.TimeoutError, aioimaplib.Abort) as exc:
            self.lost.set()
            raise MailServerError(f"the IMAP server did not end IDLE ({type(exc).__name__}: "
                                  f"{exc})") from None
        _honour_cancellation()
        return changed

    async def close(self) -> None:
        """Log out politely if the server is still there; never raises."""
        with contextlib.suppress(Exception):
            if not self.lost.is_set():
                if self._client.has_pending_idle():
                    # A stop cut an IDLE short: LOGOUT would queue behind it.
                    self._client.idle_done()
                # Politeness only: a stop must not wait on a slow server.
                await asyncio.wait_for(self._client.logout(), LOGOUT_WAIT_S)
        with contextlib.suppress(Exception):
            transport = self._client.protocol.transport
            if transport is not None:
                transport.close()


def _set(uids: list[int]) -> str:
    return ",".join(str(u) for u in uids)


def _quote(name: str) -> str:
    """A folder name as an IMAP quoted string."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
