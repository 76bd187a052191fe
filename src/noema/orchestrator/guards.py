"""Guards around the reflexes: no event twice, progress despite storms, a cost ceiling.

All three are plain bookkeeping over times the caller passes in.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

HOUR = 3600.0


class EventRegistry:
    """IDs of events already accepted: a repeat (a sensor that re-sends, a loop
    through the agent's own actions) is refused instead of delivered twice.

    Bounded: the oldest IDs are forgotten past `capacity`, long after any
    sensor would plausibly repeat them.
    """

    def __init__(self, capacity: int = 100_000) -> None:
        if capacity < 1:
            raise ValueError("the registry keeps at least one ID")
        self._capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()

    def admit(self, event_id: str) -> bool:
        """Record the ID; False if it was already there."""
        if event_id in self._seen:
            return False
        self._seen[event_id] = None
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        return True

    def __contains__(self, event_id: str) -> bool:
        return event_id in self._seen

    def __len__(self) -> int:
        return len(self._seen)


class ProgressGuard:
    """After `limit` cancellations within `window` seconds, the cycle is let
    finish: interrupting events wait at the head of the queue and are packed
    for its end. A cycle that ends on its own clears the count."""

    def __init__(self, limit: int, window: float) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("the guard needs a positive limit and window")
        self.limit = limit
        self.window = window
        self._times: deque[float] = deque()

    def _forget(self, now: float) -> None:
        while self._times and self._times[0] <= now - self.window:
            self._times.popleft()

    def record(self, at: float) -> None:
        self._times.append(at)

    def engaged(self, now: float) -> bool:
        self._forget(now)
        return len(self._times) >= self.limit

    def recent(self, now: float) -> int:
        self._forget(now)
        return len(self._times)

    def reset(self) -> None:
        self._times.clear()


@dataclass(frozen=True, slots=True)
class _Charge:
    at: float
    tokens: int


class WorldBudget:
    """Tokens spent by cycles the world started, over the last hour.

    `per_hour=None` is no limit; 0 means the world never starts a cycle on
    its own (its events wait for the person).
    """

    def __init__(self, per_hour: int | None) -> None:
        if per_hour is not None and per_hour < 0:
            raise ValueError("a budget cannot be negative")
        self.per_hour = per_hour
        self._charges: deque[_Charge] = deque()
        self._total = 0

    def _forget(self, now: float) -> None:
        while self._charges and self._charges[0].at <= now - HOUR:
            self._total -= self._charges.popleft().tokens

    def charge(self, at: float, tokens: int) -> None:
        if tokens:
            self._charges.append(_Charge(at, tokens))
            self._total += tokens

    def spent(self, now: float) -> int:
        self._forget(now)
        return self._total

    def exhausted(self, now: float) -> bool:
        return self.per_hour is not None and self.spent(now) >= self.per_hour

    def frees_at(self, now: float) -> float | None:
        """When enough charges leave the hour for the world to start a cycle again.

        None if it is not exhausted, or never will free (a budget of 0)."""
        if not self.exhausted(now) or not self.per_hour:
            return None
        total = self._total
        for charge in self._charges:
            total -= charge.tokens
            if total < self.per_hour:
                return charge.at + HOUR
        return None  # pragma: no cover - the loop always frees below a positive limit
