"""An SMTP server on 127.0.0.1 that delivers into a `LocalDovecot`: the other
half of the mail system the demo runs on this machine.

aiosmtpd speaks SMTP; this module only decides who may receive. Only the
local Dovecot's users are accepted as recipients and any other address is
refused, so nothing the demo's agent sends can leave the machine. Each mail
accepted is put in its recipients' inboxes with dovecot-lda and kept in
`accepted`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from aiosmtpd.smtp import SMTP

from .local_server import LocalDovecot

MAX_BYTES = 10 * 1024 * 1024  # the largest mail taken


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
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: SMTP(self, hostname="127.0.0.1", data_size_limit=MAX_BYTES),
            "127.0.0.1", 0)
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

    # -- aiosmtpd's handler hooks -----------------------------------------------------

    async def handle_RCPT(self, server, session, envelope, address: str,  # noqa: N802
                          rcpt_options) -> str:
        if self._local_user(address) is None:
            return "550 no such user here: this relay delivers only on this machine"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802
        data = envelope.original_content or envelope.content
        sender = envelope.mail_from or ""
        for address in envelope.rcpt_tos:
            user = self._local_user(address)
            assert user is not None  # RCPT let only local users through
            await asyncio.to_thread(self.dovecot.deliver, user, data, sender or "<>")
        self.accepted.append(Accepted(sender, tuple(envelope.rcpt_tos), data))
        self._arrived.set()
        return "250 OK delivered"

    def _local_user(self, address: str) -> str | None:
        local, _, domain = address.lower().partition("@")
        return local if domain == self.domain and local in self.dovecot.users() else None
