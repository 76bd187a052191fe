"""Recent counts and rates per channel, for `sensor_status`.

Counts live in one-second buckets for the longest window, so recording an
event is O(1) and a snapshot is exact to the second.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

DEFAULT_WINDOWS = (60.0, 300.0, 900.0)


@dataclass(frozen=True, slots=True)
class WindowCount:
    """Events of the last `seconds` (dropped ones included in `received`)."""

    seconds: float
    received: int
    dropped: int

    @property
    def per_minute(self) -> float:
        return self.received * 60.0 / self.seconds


@dataclass(frozen=True, slots=True)
class ChannelCounts:
    """Totals since the agent started and counts over recent windows."""

    received: int
    dropped: int
    last_at: float | None
    windows: tuple[WindowCount, ...]


class _Channel:
    __slots__ = ("buckets", "dropped", "last_at", "received")

    def __init__(self) -> None:
        self.received = 0
        self.dropped = 0
        self.last_at: float | None = None
        self.buckets: deque[list[int]] = deque()  # [second, received, dropped]


class ChannelStats:
    """Counters per channel on an injected clock."""

    def __init__(self, windows: tuple[float, ...] = DEFAULT_WINDOWS) -> None:
        if not windows or any(w <= 0 for w in windows):
            raise ValueError("windows are positive numbers of seconds")
        self.windows = tuple(sorted(windows))
        self._horizon = int(self.windows[-1]) + 1
        self._channels: dict[str, _Channel] = {}

    def record(self, channel: str, now: float, dropped: bool = False) -> None:
        c = self._channels.get(channel)
        if c is None:
            c = self._channels[channel] = _Channel()
        c.received += 1
        c.last_at = now
        second = int(now)
        buckets = c.buckets
        if buckets and buckets[-1][0] == second:
            bucket = buckets[-1]
        else:
            bucket = [second, 0, 0]
            buckets.append(bucket)
            while buckets[0][0] <= second - self._horizon:
                buckets.popleft()
        bucket[1] += 1
        if dropped:
            c.dropped += 1
            bucket[2] += 1

    def counts(self, channel: str, now: float) -> ChannelCounts:
        """The channel's totals and its counts over each window ending at `now`."""
        c = self._channels.get(channel)
        if c is None:
            return ChannelCounts(0, 0, None, tuple(WindowCount(w, 0, 0) for w in self.windows))
        second = int(now)
        windows = []
        for w in self.windows:
            since = second - int(w)
            received = dropped = 0
            for start, got, lost in c.buckets:
                if start > since:
                    received += got
                    dropped += lost
            windows.append(WindowCount(w, received, dropped))
        return ChannelCounts(c.received, c.dropped, c.last_at, tuple(windows))
