"""The account: its password (from the secrets, never logged) and the
connection the tools share (the sensor keeps its own, which sits in IDLE)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping

from .imap import ImapConnection, MailServerError
from .settings import MailSettings


class Account:
    """One mail account as the channel uses it."""

    def __init__(self, settings: MailSettings, secrets: Mapping[str, str]) -> None:
        self.settings = settings
        self._password = secrets.get(settings.password_env, "")
        self._shared: ImapConnection | None = None
        self._lock = asyncio.Lock()

    @property
    def password(self) -> str:
        return self._password

    @property
    def problem(self) -> str | None:
        """Why the account cannot work as configured, or None."""
        if not self._password:
            return (f"the mail password is not set: put {self.settings.password_env} in "
                    "secrets.toml or the environment")
        return None

    async def connect(self) -> ImapConnection:
        """A new logged-in connection."""
        if self.problem:
            raise MailServerError(self.problem)
        return await ImapConnection.open(self.settings, self._password)

    @contextlib.asynccontextmanager
    async def folder(self, name: str) -> AsyncIterator[ImapConnection]:
        """The shared connection with `name` selected, one user at a time; a
        connection found lost is replaced once."""
        async with self._lock:
            for attempt in (1, 2):
                try:
                    if self._shared is None or self._shared.lost.is_set():
                        await self._drop()
                        self._shared = await self.connect()
                    if self._shared.folder is None or self._shared.folder.name != name:
                        await self._shared.select(name)
                    break
                except MailServerError:
                    await self._drop()
                    if attempt == 2:
                        raise
            assert self._shared is not None
            try:
                yield self._shared
            except MailServerError:
                await self._drop()
                raise

    async def _drop(self) -> None:
        if self._shared is not None:
            await self._shared.close()
            self._shared = None

    async def aclose(self) -> None:
        async with self._lock:
            await self._drop()
