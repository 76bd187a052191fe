"""Time as an injected dependency.

Every treatment, the gate and the statistics take `now` from the caller, so
the same code runs on the wall clock in the agent and on a hand-moved clock
in tests, benchmarks and the demo.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

Clock = Callable[[], float]
"""Seconds since the epoch, as a float."""

wall_clock: Clock = time.time


class ManualClock:
    """A clock that only moves when told to; `sleep` advances it instead of waiting."""

    def __init__(self, start: float = 1_774_825_200.0) -> None:
        self._now = float(start)

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward; time never runs backwards."""
        if seconds < 0:
            raise ValueError("a clock cannot go back in time")
        self._now += seconds
        return self._now

    def set(self, when: float) -> float:
        """Jump to an absolute time that is not earlier than now."""
        return self.advance(when - self._now)

    async def sleep(self, seconds: float) -> None:
        """Advance the clock and let other tasks run once."""
        self.advance(max(0.0, seconds))
        await asyncio.sleep(0)
