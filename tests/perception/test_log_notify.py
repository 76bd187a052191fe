"""The log sensor reads on the kernel's change notification: lines appended
and rotations made by another process are read without a poll (the poll
interval here is an hour), and it polls where there is no notification."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.orchestrator.agent import Agent, AgentListener, Senses
from noema.orchestrator.cycle import ReasoningCycle
from noema.orchestrator.settings import ReflexSettings
from noema.perception.archive import SensoryArchive
from noema.perception.clock import ManualClock
from noema.perception.hub import Emitter, SensorHub
from noema.perception.packing import render_pool_event
from noema.perception.pipeline import Pipeline
from noema.perception.sensors import LogFileSensor, logfollow
from noema.perception.sensors.logwatch import LogWatch, concerns
from noema.perception.untrusted import SessionDelimiter
from noema.providers.catalog import build_provider
from noema.providers.settings import ModelSettings
from noema.tools.registry import ToolRegistry
from tests.fakes import FakeOpenAIServer, FakeReply
from tests.foundation.test_cli import chat_with

from .conftest import T0

HOUR = 3600.0


def run_elsewhere(code: str, *args: str) -> None:
    """Run `code` in another process, as a service writing its log would."""
    subprocess.run([sys.executable, "-c", code, *args], check=True, timeout=30)


APPEND = "import sys\nwith open(sys.argv[1], 'a') as f: f.write(sys.argv[2] + '\\n')"
ROTATE = ("import os, sys\nos.replace(sys.argv[1], sys.argv[1] + '.1')\n"
          "with open(sys.argv[1] + '.1', 'a') as f: f.write('last words of the old file\\n')\n"
          "with open(sys.argv[1], 'w') as f: f.write('first words of the new file\\n')")


class Lines:
    """What a sensor emitted, and a way to wait until it has emitted `n` lines."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._grew = asyncio.Event()

    def __call__(self, event) -> None:
        self.texts.append(event.text)
        self._grew.set()

    async def until(self, n: int) -> list[str]:
        async with asyncio.timeout(20):  # an hour's poll would never get there
            while len(self.texts) < n:
                self._grew.clear()
                await self._grew.wait()
        return self.texts


class Watching:
    """The change notifications started by sensors, so a test can wait until
    its sensor watches: the sensor opens its file before it starts watching,
    so a line appended from then on is new to it and reported by the kernel."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.watches: list[LogWatch] = []
        real_start = LogWatch.start

        def start(watch: LogWatch) -> None:
            real_start(watch)
            self.watches.append(watch)

        monkeypatch.setattr(LogWatch, "start", start)

    async def until(self) -> None:
        try:
            async with asyncio.timeout(20):
                while not any(watch.active for watch in self.watches):
                    await asyncio.sleep(0.01)
        except TimeoutError:
            raise AssertionError("the sensor never started watching its file") from None


@pytest.fixture
def watching(monkeypatch) -> Watching:
    return Watching(monkeypatch)


async def started(sensor: LogFileSensor, lines: Lines, watching: Watching) -> SensorHub:
    hub = SensorHub(lines)
    hub.add(sensor)
    hub.start()
    await watching.until()
    return hub


async def test_a_line_appended_by_another_process_is_read_without_polling(tmp_path, watching):
    log = tmp_path / "app.log"
    log.write_text("old line\n")
    lines = Lines()
    hub = await started(LogFileSensor(log, channel="log.app", poll_interval=HOUR), lines, watching)
    try:
        run_elsewhere(APPEND, str(log), "disk full on /dev/sda1")
        assert await lines.until(1) == ["disk full on /dev/sda1"]
        run_elsewhere(APPEND, str(log), "disk still full")
        assert await lines.until(2) == ["disk full on /dev/sda1", "disk still full"]
    finally:
        await hub.stop()


async def test_a_rotation_by_another_process_is_followed_without_polling(tmp_path, watching):
    log = tmp_path / "app.log"
    log.write_text("")
    lines = Lines()
    hub = await started(LogFileSensor(log, channel="log.app", poll_interval=HOUR), lines, watching)
    try:
        run_elsewhere(APPEND, str(log), "before the rotation")
        await lines.until(1)
        run_elsewhere(ROTATE, str(log))
        assert await lines.until(3) == [
            "before the rotation", "last words of the old file", "first words of the new file"]
        run_elsewhere(APPEND, str(log), "after the rotation")
        assert (await lines.until(4))[-1] == "after the rotation"
    finally:
        await hub.stop()


async def test_changes_to_other_files_of_the_folder_do_not_wake_it(tmp_path, monkeypatch, watching):
    log = tmp_path / "app.log"
    log.write_text("")
    lines = Lines()
    hub = await started(LogFileSensor(log, channel="log.app", poll_interval=HOUR), lines, watching)
    reads: list[int] = []
    real_read = logfollow.LogFollower.read

    def counting(self):
        reads.append(1)
        return real_read(self)

    monkeypatch.setattr(logfollow.LogFollower, "read", counting)
    try:
        run_elsewhere(APPEND, str(tmp_path / "other.log"), "not ours")
        run_elsewhere(APPEND, str(tmp_path / "app.log.bak"), "not ours either")
        await asyncio.sleep(0.2)
        assert reads == []  # not woken by the other files
        run_elsewhere(APPEND, str(log), "ours")
        assert await lines.until(1) == ["ours"]
    finally:
        await hub.stop()


async def test_without_notification_it_polls_then_watches_once_it_can(tmp_path):
    """The folder does not exist yet: nothing to watch, so the sensor polls
    at its interval; once the folder is there it is watched."""
    log = tmp_path / "later" / "app.log"
    slept: list[float] = []
    lines = Lines()

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:
            log.parent.mkdir()
            log.write_text("")
        # Polls pass at once; the slow safety look, once watched, is really waited for.
        await asyncio.sleep(seconds if len(slept) > 2 else 0)

    sensor = LogFileSensor(log, channel="log.app", poll_interval=0.5, sleep=sleep)
    task = asyncio.create_task(sensor.run(Emitter("log.app", ManualClock(T0), lines)))
    try:
        async with asyncio.timeout(20):
            while len(slept) < 3:
                await asyncio.sleep(0.01)
        assert slept[:2] == [0.5, 0.5]  # polled while there was nothing to watch
        # Now watched: the poll is only a slow safety look, and an append is read at once.
        assert slept[2] >= 30
        run_elsewhere(APPEND, str(log), "written after the folder appeared")
        assert await lines.until(1) == ["written after the folder appeared"]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_only_the_file_and_its_numbered_rotations_concern_it():
    path = Path("/var/log/app.log")
    assert concerns(path, "app.log") and concerns(path, "app.log.1")
    assert concerns(path, "app.log.12")
    assert not concerns(path, "app.log.bak") and not concerns(path, "other.log")
    assert not concerns(path, "app.log.") and not concerns(path, "app.logx")


async def test_a_line_appended_by_another_process_reaches_the_model(tmp_path, watching):
    """The real agent, idle, with the real log sensor under the hub and a real
    model client against the fake server: an urgent line wakes it, and the
    model's next request carries the line (the poll interval is an hour)."""
    log = tmp_path / "app.log"
    log.write_text("an old line, never read\n")
    sensor = LogFileSensor(log, channel="log.app", poll_interval=HOUR)
    store = TurnStore(":memory:")
    session = Session.load(store)
    pipeline = Pipeline(SensoryArchive(":memory:"), [sensor.info])
    delimiter = SessionDelimiter("be7c4b1e5eed")
    reflexes = ReflexSettings(rules=({"channel": "log.app", "text": "PANIC",  # type: ignore
                                      "urgency": "urgent"},),
                              idle_quiet_window_s=0, idle_max_wait_s=0)
    with FakeOpenAIServer() as server:
        server.script(FakeReply(text="Noted: the disk."))
        provider = build_provider(ModelSettings(
            provider="openai-compatible", model="fake", base_url=server.base_url,
            max_retries=0), {})
        cycle = ReasoningCycle(session, provider, ToolRegistry([]), lambda: "You are terse.")
        agent = Agent(session, cycle, AgentListener(), context_window=100_000,
                      reflexes=reflexes, senses=Senses(pipeline, lambda items, now:
                                                       render_pool_event(items, delimiter,
                                                                         now=now)))
        hub = SensorHub(agent.perceive)
        hub.add(sensor)
        try:
            async with hub:
                await watching.until()
                run_elsewhere(APPEND, str(log), "PANIC: ext4 journal aborted on sda1")
                assert await server.wait_requests(1, timeout=20)
        finally:
            await agent.stop()
            await agent.close()
            await provider.aclose()
            store.close()
    sent = json.dumps(server.requests[0].body)
    assert "PANIC" in sent and "ext4" in sent and "journal" in sent
    assert "never read" not in sent


@pytest.mark.slow
def test_a_line_appended_by_another_process_reaches_the_model_through_noema_chat(tmp_path):
    """The whole product: `noema chat` in a pty follows a log; another process
    appends an urgent line while the person is at the prompt (read from the
    start, so a sensor still starting cannot miss it); the model's next
    request carries it and its answer is shown."""
    log = tmp_path / "service.log"
    log.write_text("")
    with FakeOpenAIServer() as server:
        server.script(FakeReply(text="The service reported an ext4 panic."))
        config = (
            "[models.reasoning]\nprovider = 'openai-compatible'\nmodel = 'fake-model'\n"
            f"base_url = '{server.base_url}'\n\n"
            f"[[perception.logs]]\npath = '{log}'\nchannel = 'log.service'\n"
            "poll_interval = '1h'\nfrom_start = true\n\n"
            "[reflexes]\nidle_quiet_window_s = 0\nidle_max_wait_s = 0\n\n"
            "[[reflexes.rules]]\nchannel = 'log.service'\ntext = 'PANIC'\nurgency = 'urgent'\n"
        )
        with chat_with(tmp_path, config) as chat:
            chat.expect("you> ")
            run_elsewhere(APPEND, str(log), "PANIC: ext4 journal aborted on sda1")
            chat.expect("reported an ext4 panic")
            chat.sendline("/quit")
            chat.expect(pexpect.EOF)
        sent = json.dumps(server.requests[0].body)
    assert "PANIC" in sent and "journal" in sent
