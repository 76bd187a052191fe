"""A sensor that crashes: the agent's listener hears it, and the attached
interfaces and `noema status` show it crashed, with when it starts again."""

from __future__ import annotations

import asyncio
import re

from noema.app import build_app
from noema.config import Config
from noema.interfaces.host.protocol import AskStatus, Notice, Status
from noema.interfaces.terminal.status_text import format_status
from noema.orchestrator.agent import AgentListener
from noema.paths import AgentPaths
from noema.perception.events import Nature, SensorInfo
from noema.perception.hub import Backoff
from noema.providers.scripted import ScriptedProvider

from .conftest import WAIT, until

RESTART_IN = 30.0  # long enough that the test sees one crash only


class Crashing:
    """A sensor whose source fails as soon as it is read."""

    info = SensorInfo("crashy", "a source that fails", Nature.DISCRETE)

    async def run(self, emit) -> None:
        raise ConnectionError("the source went away")


class Heard(AgentListener):
    def __init__(self) -> None:
        self.crashes: list[tuple[str, float]] = []
        self.notices: list[str] = []
        self.crashed = asyncio.Event()

    def on_notice(self, text: str) -> None:
        self.notices.append(text)

    def on_sensor_crash(self, channel: str, retry_in: float) -> None:
        self.crashes.append((channel, retry_in))
        self.crashed.set()


async def test_the_listener_hears_which_sensor_crashed_and_when_it_restarts(tmp_path):
    heard = Heard()
    app = build_app(AgentPaths.for_agent("ana", tmp_path / "home"), Config(),
                    provider=ScriptedProvider([]), listener=heard)
    try:
        app.hub.backoff = Backoff(initial=RESTART_IN, maximum=RESTART_IN)
        app.hub.add(Crashing())
        await app.start()
        await asyncio.wait_for(heard.crashed.wait(), WAIT)
        assert heard.crashes == [("crashy", RESTART_IN)]
        assert any("crashy sensor failed (ConnectionError: the source went away); "
                   "retrying in 30 s" in n for n in heard.notices)
    finally:
        await app.aclose()


async def test_attached_clients_and_the_status_see_it_crashed_until_it_restarts(served):
    served.app.pipeline.register(Crashing.info)
    served.app.hub.backoff = Backoff(initial=RESTART_IN, maximum=RESTART_IN)
    chat = await served.attach("chat")
    served.app.hub.add(Crashing())  # the hub runs: it starts at once, and fails
    await until(chat.messages, lambda m: isinstance(m, Notice) and "crashy" in m.text)
    await chat.connection.send(AskStatus(request=1))
    (status,) = [m for m in await until(chat.messages, lambda m: isinstance(m, Status))
                 if isinstance(m, Status)]
    (view,) = [s for s in status.status.sensors if s.channel == "crashy"]
    seconds = int(re.fullmatch(r"crashed, restarting in (\d+) s", view.state).group(1))
    assert 0 < seconds <= RESTART_IN
    assert f"crashed, restarting in {seconds} s" in format_status(status.status)
    assert "crashy sensor failed" in (status.status.last_error or "")
    await chat.connection.aclose()


async def test_once_the_restart_is_due_the_sensor_is_no_longer_shown_crashed(served):
    served.host.on_sensor_crash("scheduler", retry_in=0)
    states = {s.channel: s.state for s in served.host.status().sensors}
    assert states["scheduler"] == "active"
