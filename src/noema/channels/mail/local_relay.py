"""An SMTP server on 127.0.0.1 that delivers into a `LocalDovecot`: the other
half of the mail system the demo runs on this machine.

It speaks the part of SMTP (RFC 5321) a client needs to hand a mail over:
EHLO or HELO, MAIL, RCPT, DATA, RSET, NOOP and QUIT. Only the local Dovecot's
users are accepted as recipients; any other address is refused, so nothing
the demo's agent sends can leave the machine. Each mail accepted is put in
its recipients' inboxes with dovecot-lda and kept in `accepted`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from .local_server import LocalDovecot

MAX_BYTES = 10 * 1024 * 1024  # the largest mail taken
MAX_LINE = 64 * 1024  # a longer line ends the session (StreamReader's own limit)


@dataclass(frozen=True, slots=True)
class Accepted:
    """One mail the relay took and delivered."""

    sender: str
    recipients: tuple[str, ...]
    data: bytes


class LoopbackRelay:
    """SMTP on 127.0.0.1 (`port` once started) for the users of `dovecot` at `domain`."""

    def __init__(self, dovecot: LocalDovecot, domain: str) -> None:
        self.dovecot = dovecot
        self.domain = domain.lower()
        self.port = 0
        self.accepted: list[Accepted] = []
        self._arrived = asyncio.Event()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._session, "127.0.0.1", 0, limit=MAX_LINE)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def wait_for(self, found: Callable[[list[Accepted]], bool], timeout: float) -> None:
        """Until `found(accepted)` holds; TimeoutError after `timeout` seconds."""
        async with asyncio.timeout(timeout):
            while not found(self.accepted):
                self._arrived.clear()
                await self._arrived.wait()

    # -- one client ------------------------------------------------------------------

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _Conversation(self, reader, writer).run()
        except (ConnectionError, ValueError, asyncio.IncompleteReadError):
            pass  # the client went away, or sent a line past the limit
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _local_user(self, address: str) -> str | None:
        local, _, domain = address.lower().partition("@")
        return local if domain == self.domain and local in self.dovecot.users() else None

    async def _deliver(self, sender: str, recipients: list[str], data: bytes) -> None:
        for address in recipients:
            user = self._local_user(address)
            assert user is not None  # RCPT let only local users through
            await asyncio.to_thread(self.dovecot.deliver, user, data, sender or "<>")
        self.accepted.append(Accepted(sender, tuple(recipients), data))
        self._arrived.set()


class _Conversation:
    """The commands of one SMTP session, in order."""

    def __init__(self, relay: LoopbackRelay, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.relay = relay
        self.reader = reader
        self.writer = writer
        self.sender: str | None = None
        self.recipients: list[str] = []

    async def reply(self, *lines: str) -> None:
        code, texts = lines[0][:3], [line[4:] for line in lines]
        out = [f"{code}-{t}" for t in texts[:-1]] + [f"{code} {texts[-1]}"]
        self.writer.write("".join(f"{line}\r\n" for line in out).encode())
        await self.writer.drain()

    async def run(self) -> None:
        await self.reply("220 127.0.0.1 noema loopback relay")
        while line := await self.reader.readline():
            verb, _, argument = line.decode("utf-8", "replace").strip().partition(" ")
            verb = verb.upper()
            if verb == "QUIT":
                await self.reply("221 bye")
                return
            handler = self._commands.get(verb)
            if handler is None:
                await self.reply("502 command not implemented")
            else:
                await handler(self, argument.strip())

    async def _ehlo(self, argument: str) -> None:
        self._reset()
        await self.reply("250 127.0.0.1", "250 8BITMIME", f"250 SIZE {MAX_BYTES}")

    async def _helo(self, argument: str) -> None:
        self._reset()
        await self.reply("250 127.0.0.1")

    async def _mail(self, argument: str) -> None:
        address = _path(argument, "FROM:")
        if address is None:
            await self.reply("501 syntax: MAIL FROM:<address>")
            return
        self._reset()
        self.sender = address
        await self.reply("250 OK")

    async def _rcpt(self, argument: str) -> None:
        address = _path(argument, "TO:")
        if self.sender is None:
            await self.reply("503 MAIL first")
        elif not address:
            await self.reply("501 syntax: RCPT TO:<address>")
        elif self.relay._local_user(address) is None:
            await self.reply("550 no such user here: this relay delivers only on this machine")
        else:
            self.recipients.append(address)
            await self.reply("250 OK")

    async def _data(self, argument: str) -> None:
        if not self.recipients:
            await self.reply("503 RCPT first")
            return
        await self.reply("354 end with <CRLF>.<CRLF>")
        lines, size = [], 0
        while True:
            line = await self.reader.readline()
            if not line:
                raise ConnectionError("the client left in the middle of DATA")
            if line in (b".\r\n", b".\n"):
                break
            if line.startswith(b"."):
                line = line[1:]  # a dot the client doubled (RFC 5321 4.5.2)
            size += len(line)
            if size <= MAX_BYTES:
                lines.append(line)
        if size > MAX_BYTES:
            await self.reply("552 the mail is larger than this relay takes")
        else:
            assert self.sender is not None
            await self.relay._deliver(self.sender, self.recipients, b"".join(lines))
            await self.reply("250 OK delivered")
        self._reset()

    async def _rset(self, argument: str) -> None:
        self._reset()
        await self.reply("250 OK")

    async def _noop(self, argument: str) -> None:
        await self.reply("250 OK")

    def _reset(self) -> None:
        self.sender, self.recipients = None, []

    _commands = {"EHLO": _ehlo, "HELO": _helo, "MAIL": _mail, "RCPT": _rcpt, "DATA": _data,
                 "RSET": _rset, "NOOP": _noop}


def _path(argument: str, prefix: str) -> str | None:
    """The address of `FROM:<a@b> PARAMS` or `TO:<a@b>` (empty for `<>`), or None."""
    if not argument.upper().startswith(prefix):
        return None
    rest = argument[len(prefix):].strip()
    if not rest.startswith("<") or ">" not in rest:
        return None
    return rest[1:rest.index(">")].strip()
