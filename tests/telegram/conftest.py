"""The Telegram channel's tests run against the session's fake Bot API (`telegram_server`, in
tests/conftest.py)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from noema.channels.base import ChannelContext, Desk
from noema.channels.telegram.channel import TelegramChannel
from noema.channels.telegram.settings import TelegramSettings
from noema.memory.turns import ROLE_OF_KIND, Turn, TurnKind
from noema.paths import AgentPaths
from noema.perception.events import Event
from noema.perception.hub import Backoff, Bookmark, SensorHub
from noema.perception.untrusted import SessionDelimiter
from noema.security.settings import FilesSettings, HandsSettings, RootSettings
from noema.tools.hands import Hands, build_hands
from tests.fakes.telegram_server import TOKEN, FakeTelegramServer

PERSON = 4242  # the person's chat
QUICK = Backoff(initial=0.01, factor=2.0, maximum=0.05)


@pytest.fixture
def server(telegram_server: FakeTelegramServer) -> FakeTelegramServer:
    telegram_server.reset()
    return telegram_server


@dataclass
class FakeDesk:
    """The agent as the channel sees it, recording what it is given."""

    turns: list[Turn] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # submits and commands, in order
    stopped: int = 0
    refuse: int = 0  # submits to refuse (a full disk)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def submit(self, text: str, *, channel: str = "terminal", sender: str | None = None) -> Turn:
        if self.refuse:
            self.refuse -= 1
            raise OSError(28, "No space left on device")
        turn = Turn(next(self._ids), time.time(), TurnKind.USER, ROLE_OF_KIND[TurnKind.USER],
                    text, channel=channel, sender=sender)
        self.turns.append(turn)
        self.order.append(f"submit {text}")
        self.changed.set()
        return turn

    async def stop(self) -> bool:
        self.stopped += 1
        self.order.append("stop")
        self.changed.set()
        return True

    def status(self) -> str:
        return "idle; 3 turns in the session"

    def submitted(self, channel: str) -> list[Turn]:
        return [t for t in self.turns if t.channel == channel]

    def desk(self) -> Desk:
        return Desk(self.submit, self.stop, self.status, self.submitted)

    async def wait(self, check, timeout: float = 10.0) -> None:
        """Wait until `check()` holds (re-checked whenever the desk changes)."""
        async def until() -> None:
            while not check():
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(until(), timeout)


@dataclass
class Rig:
    """A channel over the fake server, run by a hub, with a fake desk."""

    root: Path
    server: FakeTelegramServer
    hands: Hands
    desk: FakeDesk = field(default_factory=FakeDesk)
    notices: list[str] = field(default_factory=list)
    channel: TelegramChannel | None = None
    hub: SensorHub | None = None
    events: list[Event] = field(default_factory=list)  # what the channel's sensor emitted
    bookmark: Callable[[str], Bookmark] | None = None  # the sensory archive's, if any

    def settings(self, **changes) -> TelegramSettings:
        values = dict(chat_ids=(PERSON,), base_url=self.server.base_url, quiet_window_s=0.2,
                      max_hold_s=5.0, poll_timeout_s=2)
        values.update(changes)
        return TelegramSettings(**values)

    def context(self, token: str = TOKEN) -> ChannelContext:
        paths = AgentPaths(name="ana", root=self.root)
        secrets = {"TELEGRAM_BOT_TOKEN": token} if token else {}
        return ChannelContext(paths, secrets, self.hands, SessionDelimiter.new(),
                              ZoneInfo("UTC"), self.notices.append, bookmark=self.bookmark)

    async def open(self, *, token: str = TOKEN, **changes) -> TelegramChannel:
        """Build the channel, give it the desk and start its sensor."""
        self.channel = TelegramChannel(self.settings(**changes), self.context(token),
                                       backoff=QUICK, send_delay=0.01)
        await self.channel.start(self.desk.desk())
        self.hub = SensorHub(self._event, backoff=Backoff(initial=0.05, maximum=0.1))
        for sensor in self.channel.sensors():
            self.hub.add(sensor)
        self.hub.start()
        return self.channel

    def _event(self, event: Event) -> None:
        self.events.append(event)
        self.desk.changed.set()  # a waiting test looks again

    async def close(self) -> None:
        """Stop as the app does: the sensors, then the channel."""
        if self.hub is not None:
            await self.hub.stop()
        if self.channel is not None:
            await self.channel.aclose()
        self.hub = self.channel = None


@pytest.fixture
async def rig(tmp_path: Path, server: FakeTelegramServer) -> AsyncIterator[Rig]:
    files = FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),))
    hands = build_hands(HandsSettings(files=files), AgentPaths(name="ana", root=tmp_path / "agent"))
    (tmp_path / "agent").mkdir(exist_ok=True)
    made = Rig(tmp_path / "agent", server, hands)
    try:
        yield made
    finally:
        await made.close()
        hands.close()
