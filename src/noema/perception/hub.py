"""Sensors running as asyncio tasks, each under a supervisor.

A sensor is any object with an `info: SensorInfo` and an
`async run(emit)` that reports what it perceives by calling `emit`. A
sensor that raises is reported and restarted after a growing delay; a
sensor that keeps running long enough is considered healthy again and its
delay starts over. Nothing a sensor does can stop the hub or the agent.

`emit` hands an event on at once, but the event is acknowledged only when
the sensory archive commits it, a short delay later (see
`perception.archive`). A sensor whose source keeps what it has not
acknowledged (a log file it can read again) keeps its place with a
`Bookmark` instead of trusting `emit`: the archive's bookmark is committed
with the events read before it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .clock import Clock, wall_clock
from .events import Event, SensorInfo

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


class Emitter:
    """What a sensor calls to report: builds a valid event of its channel and passes it on."""

    __slots__ = ("_clock", "_sink", "channel")

    def __init__(self, channel: str, clock: Clock, sink: Callable[[Event], None]) -> None:
        self.channel = channel
        self._clock = clock
        self._sink = sink

    def __call__(
        self,
        text: str,
        *,
        sender: str | None = None,
        key: str = "",
        authorised: bool = False,
        occurred_at: float | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> Event:
        event = Event.create(
            self.channel, text, received_at=self._clock(), sender=sender, key=key,
            authorised=authorised, occurred_at=occurred_at, payload=payload,
        )
        self._sink(event)
        return event


class Bookmark(Protocol):
    """Where a sensor stands in its source, kept across restarts (JSON data)."""

    def load(self) -> Mapping[str, Any] | None:
        """The last place saved, or None if there is none."""
        ...

    def save(self, state: Mapping[str, Any]) -> None:
        """Keep the current place."""
        ...


class MemoryBookmark:
    """A bookmark that lasts as long as the process: a sensor restarted after a
    crash resumes, a restarted agent does not."""

    __slots__ = ("_state",)

    def __init__(self) -> None:
        self._state: dict[str, Any] | None = None

    def load(self) -> Mapping[str, Any] | None:
        return None if self._state is None else dict(self._state)

    def save(self, state: Mapping[str, Any]) -> None:
        self._state = dict(state)


class Sensor(Protocol):
    """An event source: mail, chat, a log file, a folder, the clock, a webhook..."""

    @property
    def info(self) -> SensorInfo: ...

    async def run(self, emit: Emitter) -> None:
        """Perceive until cancelled, calling `emit` for every event; raising means a crash."""
        ...


@dataclass(frozen=True, slots=True)
class Backoff:
    """Restart delays: initial, multiplied each crash, capped; reset after a stable run."""

    initial: float = 1.0
    factor: float = 2.0
    maximum: float = 300.0
    stable_after: float = 60.0

    def __post_init__(self) -> None:
        if not (0 < self.initial <= self.maximum and self.factor >= 1 and self.stable_after > 0):
            raise ValueError("backoff needs 0 < initial <= maximum, factor >= 1, stable_after > 0")

    def delay(self, crashes: int) -> float:
        """The wait before restart number `crashes` (1 for the first crash)."""
        return min(self.maximum, self.initial * self.factor ** (crashes - 1))


@dataclass(frozen=True, slots=True)
class SensorCrash:
    """A sensor raised; it restarts after `retry_in` seconds."""

    channel: str
    error: str
    crashes: int  # consecutive crashes without a stable run in between
    retry_in: float


class SensorHub:
    """Runs sensors and forwards their events to `on_event`."""

    def __init__(
        self,
        on_event: Callable[[Event], None],
        *,
        on_crash: Callable[[SensorCrash], None] | None = None,
        clock: Clock = wall_clock,
        sleep: Sleep = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        backoff: Backoff = Backoff(),
    ) -> None:
        self._on_event = on_event
        self._on_crash = on_crash
        self._clock = clock
        self._sleep = sleep
        self._monotonic = monotonic
        self.backoff = backoff
        self._sensors: dict[str, Sensor] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._running = False

    @property
    def sensors(self) -> dict[str, SensorInfo]:
        """The declarations of the sensors added, by channel."""
        return {channel: s.info for channel, s in self._sensors.items()}

    def add(self, sensor: Sensor) -> None:
        """Add a sensor; it starts at once if the hub is running."""
        channel = sensor.info.channel
        if channel in self._sensors:
            raise ValueError(f"a sensor for channel {channel!r} is already added")
        self._sensors[channel] = sensor
        if self._running:
            self._spawn(channel)

    def start(self) -> None:
        """Start every sensor (call from inside the running event loop)."""
        if self._running:
            return
        self._running = True
        for channel in self._sensors:
            self._spawn(channel)

    def running(self, channel: str) -> bool:
        task = self._tasks.get(channel)
        return task is not None and not task.done()

    async def stop(self) -> None:
        """Cancel every sensor and wait for them to end."""
        self._running = False
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    async def __aenter__(self) -> SensorHub:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _spawn(self, channel: str) -> None:
        self._tasks[channel] = asyncio.create_task(
            self._supervise(self._sensors[channel]), name=f"sensor:{channel}"
        )

    async def _supervise(self, sensor: Sensor) -> None:
        channel = sensor.info.channel
        emit = Emitter(channel, self._clock, self._on_event)
        crashes = 0
        while True:
            started = self._monotonic()
            try:
                await sensor.run(emit)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a sensor's failure must never reach the agent
                if self._monotonic() - started >= self.backoff.stable_after:
                    crashes = 0
                crashes += 1
                delay = self.backoff.delay(crashes)
                log.warning("sensor %s crashed (%s); restarting in %.1f s", channel, exc, delay)
                self._report(SensorCrash(channel, f"{type(exc).__name__}: {exc}", crashes, delay))
                await self._sleep(delay)
                continue
            log.info("sensor %s finished", channel)
            return

    def _report(self, crash: SensorCrash) -> None:
        if self._on_crash is None:
            return
        try:
            self._on_crash(crash)
        except Exception:  # a failing reporter must not stop the restarts
            log.exception("reporting the crash of sensor %s failed", crash.channel)
