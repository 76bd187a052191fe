"""Sensors as supervised tasks: crashes are reported and restarted with backoff."""

from __future__ import annotations

import asyncio

import pytest

from noema.perception.events import Nature, SensorInfo
from noema.perception.hub import Backoff, SensorCrash, SensorHub


class Flaky:
    """Crashes `failures` times, then reports one event and ends."""

    def __init__(self, failures: int, channel: str = "files") -> None:
        self.info = SensorInfo(channel, "flaky", Nature.DISCRETE)
        self.failures = failures
        self.runs = 0

    async def run(self, emit) -> None:
        self.runs += 1
        if self.runs <= self.failures:
            raise OSError(f"device gone ({self.runs})")
        emit("finally", key="ok", payload={"runs": self.runs})


class Forever:
    def __init__(self, channel: str) -> None:
        self.info = SensorInfo(channel, "waits", Nature.DISCRETE)
        self.started = asyncio.Event()
        self.cancelled = False

    async def run(self, emit) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


class Recorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


async def _finish(hub: SensorHub, channel: str) -> None:
    await asyncio.wait_for(hub._tasks[channel], timeout=5)


async def test_a_crashing_sensor_is_reported_and_restarted_with_growing_delays():
    events, crashes, sleeper = [], [], Recorder()
    hub = SensorHub(events.append, on_crash=crashes.append, sleep=sleeper.sleep,
                    clock=lambda: 1000.0, monotonic=lambda: 0.0,
                    backoff=Backoff(initial=1, factor=2, maximum=5))
    flaky = Flaky(4)
    hub.add(flaky)
    hub.start()
    await _finish(hub, "files")
    assert sleeper.delays == [1, 2, 4, 5]
    assert [c.crashes for c in crashes] == [1, 2, 3, 4]
    assert crashes[0] == SensorCrash("files", "OSError: device gone (1)", 1, 1)
    [event] = events
    assert (event.channel, event.text, event.received_at, event.payload["runs"]) == (
        "files", "finally", 1000.0, 5)
    await hub.stop()


async def test_a_run_that_lasted_resets_the_backoff():
    ticks = iter(range(0, 10_000, 100))  # every run looks 100 s long
    sleeper = Recorder()
    hub = SensorHub(lambda e: None, sleep=sleeper.sleep, monotonic=lambda: next(ticks),
                    backoff=Backoff(initial=1, stable_after=60))
    hub.add(Flaky(3))
    hub.start()
    await _finish(hub, "files")
    assert sleeper.delays == [1, 1, 1]


async def test_a_failing_reporter_does_not_stop_restarts():
    def explode(crash):
        raise RuntimeError("reporter broken")

    sleeper = Recorder()
    hub = SensorHub(lambda e: None, on_crash=explode, sleep=sleeper.sleep)
    flaky = Flaky(2)
    hub.add(flaky)
    hub.start()
    await _finish(hub, "files")
    assert flaky.runs == 3


async def test_stop_cancels_every_sensor():
    async with SensorHub(lambda e: None) as hub:
        waiting = Forever("a")
        hub.add(waiting)  # added while running: starts at once
        await asyncio.wait_for(waiting.started.wait(), timeout=5)
        assert hub.running("a") and set(hub.sensors) == {"a"}
    assert waiting.cancelled and not hub.running("a")


def test_a_channel_has_one_sensor():
    hub = SensorHub(lambda e: None)
    hub.add(Forever("a"))
    with pytest.raises(ValueError):
        hub.add(Forever("a"))


def test_backoff_is_validated_and_capped():
    assert [Backoff(2, 3, 20).delay(n) for n in (1, 2, 3, 4)] == [2, 6, 18, 20]
    with pytest.raises(ValueError):
        Backoff(initial=0)
