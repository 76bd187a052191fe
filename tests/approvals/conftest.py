"""Helpers for the approvals asked while the person is away: an agent with
Telegram on the fake Bot API, whose `schedule_alarm` asks first."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from noema.app import App, build_app
from noema.interfaces.host.attach import socket_path
from noema.interfaces.host.host import Host
from noema.config import validate
from noema.orchestrator.agent import AgentListener
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider, ScriptedResponse
from tests.fakes.telegram_server import TOKEN, FakeTelegramServer

PERSON = 4242
STRANGER = 999
WAIT = 30.0  # seconds: generous, for a loaded machine


@pytest.fixture
def server(telegram_server: FakeTelegramServer) -> FakeTelegramServer:
    telegram_server.reset()
    return telegram_server


def telegram_app(home: Path, server: FakeTelegramServer, script: list[ScriptedResponse],
                 *, timeout_s: float = 60.0, listener: AgentListener | None = None) -> App:
    """An agent on the fake Telegram whose alarms need the person's yes. With
    no `listener` (a host, which asks its clients first) nothing is attached:
    the approver is the one the host uses then."""
    paths = AgentPaths.for_agent("ana", home)
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.secrets_file.write_text(f'TELEGRAM_BOT_TOKEN = "{TOKEN}"\n')
    os.chmod(paths.secrets_file, 0o600)
    config = validate({
        "telegram": {"chat_ids": [PERSON], "base_url": server.base_url,
                     "quiet_window_s": 0.1, "poll_timeout_s": 1},
        "autonomy": {"tools": {"schedule_alarm": "ask"}, "approval_timeout_s": timeout_s},
    }, "t")
    app = build_app(paths, config, provider=ScriptedProvider(script), listener=listener)
    if listener is None:
        app.attach_approver(app.ask_away)
    return app


@asynccontextmanager
async def hosted(home: Path, server: FakeTelegramServer, script: list[ScriptedResponse],
                 **host_options) -> AsyncIterator[tuple[Host, App]]:
    """The agent on the fake Telegram, served by its host on its unix socket
    as `noema run` serves it; closed host first, then the agent."""
    host = Host("ana", **host_options)
    app = telegram_app(home, server, script, listener=host)
    host.bind(app)
    await app.start()
    await host.serve(socket_path(app.paths))
    try:
        yield host, app
    finally:
        try:
            await host.aclose()
        finally:
            await app.aclose()


def seen_by_model(app: App) -> list[str]:
    """Every message text of every request the model received, spaces restored
    (inside the untrusted envelope a space is written ˆ)."""
    model = app.provider
    assert isinstance(model, ScriptedProvider)
    return [m.content.replace("ˆ", " ") for r in model.requests for m in r.messages]


async def until(condition: Callable[[], bool], what: str, wait: float = WAIT) -> None:
    for _ in range(int(wait / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def question(server: FakeTelegramServer, count: int = 1):
    """The `count`-th message with buttons the bot sent."""
    await asyncio.to_thread(server.wait_for,
                            lambda: sum(1 for m in server.sent if m.buttons) >= count, WAIT)
    return [m for m in server.sent if m.buttons][count - 1]
