"""An agent served by a Host, in this process, over a scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from noema.app import App, build_app
from noema.config import Config
from noema.interfaces.host.attach import Attached, attach, socket_path
from noema.interfaces.host.host import Host
from noema.interfaces.host.protocol import ServerMessage
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider

WAIT = 20.0  # seconds: generous, the machine is shared


@dataclass
class Served:
    app: App
    host: Host
    paths: AgentPaths
    model: ScriptedProvider

    async def attach(self, client: str = "test", since: int | None = None) -> Attached:
        return await attach(self.paths, client=client, since=since)


async def serve(paths: AgentPaths, config: Config, model: ScriptedProvider,
                backlog: int = 5000) -> Served:
    host = Host(paths.name, backlog=backlog)
    app = build_app(paths, config, provider=model, listener=host)
    host.bind(app)
    await app.start()
    await host.serve(socket_path(paths))
    return Served(app, host, paths, model)


async def shut(served: Served) -> None:
    try:
        await served.host.aclose()
    finally:
        await served.app.aclose()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    model = ScriptedProvider([], token_delay_s=0.001)
    s = await serve(AgentPaths.for_agent("ana", tmp_path / "home"), Config(), model)
    try:
        yield s
    finally:
        await shut(s)


async def until(messages: AsyncIterator[ServerMessage],
                done: Callable[[ServerMessage], bool], *, timeout: float = WAIT
                ) -> list[ServerMessage]:
    """Messages up to and including the first one `done` accepts."""
    seen: list[ServerMessage] = []

    async def read() -> list[ServerMessage]:
        async for message in messages:
            seen.append(message)
            if done(message):
                return seen
        raise AssertionError(f"the connection ended first; saw {[m.type for m in seen]}")

    return await asyncio.wait_for(read(), timeout)
