"""The clock sensor: tells the model when much time has passed since the last exchange.

It sleeps until the next moment worth a word instead of ticking: the first
notice comes when the silence reaches the threshold, the next ones each time
the silence doubles (3 h, 6 h, 12 h...). A new exchange starts over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, tzinfo

from ..clock import Clock, wall_clock
from ..events import Nature, SensorInfo
from ..hub import Emitter, Sleep
from ..timefmt import format_duration, full_time

DEFAULT_LONG_SILENCE = 3 * 3600.0


@dataclass(slots=True)
class SilenceWatch:
    """When a silence deserves a notice; pure, `now` and the last exchange passed in."""

    threshold: float
    since: float | None = None  # start of the silence being watched
    notices: int = 0  # notices given for it

    def __post_init__(self) -> None:
        if not self.threshold > 0:
            raise ValueError("the long-silence threshold must be positive")

    def due(self, since: float) -> float:
        """When the next notice for a silence that began at `since` is due."""
        notices = self.notices if since == self.since else 0
        return since + self.threshold * 2**notices

    def check(self, now: float, since: float) -> float | None:
        """The silence in seconds if a notice is due now (and count it), else None."""
        if since != self.since:
            self.since, self.notices = since, 0
        if now < self.due(since):
            return None
        self.notices += 1
        while self.due(since) <= now:  # after a long sleep, one notice covers the gap
            self.notices += 1
        return now - since


class ClockSensor:
    """Reports long silences; `last_exchange()` gives the time of the latest exchange."""

    def __init__(
        self,
        last_exchange: Callable[[], float | None],
        *,
        long_silence: float = DEFAULT_LONG_SILENCE,
        channel: str = "clock",
        clock: Clock = wall_clock,
        sleep: Sleep = asyncio.sleep,
        tz: tzinfo = UTC,
    ) -> None:
        self._last_exchange = last_exchange
        self._watch = SilenceWatch(long_silence)
        self._clock = clock
        self._sleep = sleep
        self._tz = tz
        self.info = SensorInfo(
            channel,
            "The passing of time: a notice when much time has gone by since the last exchange.",
            Nature.STATE,
            parameters={"long_silence": format_duration(long_silence)},
        )

    async def run(self, emit: Emitter) -> None:
        started = self._clock()
        while True:
            now = self._clock()
            last = self._last_exchange()
            since = started if last is None else last
            silence = self._watch.check(now, since)
            if silence is not None:
                emit(
                    f"It is {full_time(now, self._tz)}. {format_duration(silence)} have "
                    "passed since the last exchange.",
                    sender="clock", key="silence", authorised=True,
                    payload={"silence_seconds": round(silence), "since": since},
                )
            # The last exchange may move while asleep; waking at the due time
            # re-reads it, so a later exchange only costs one extra check.
            await self._sleep(max(1.0, self._watch.due(since) - now))
