"""The scheduler sensor: alarms and recurring schedules coming due, as events.

A firing reaches the model like anything else it perceives: an event of a
declared channel, through the hub, the urgency rules, the archive and the
queue. Its nature is discrete (each firing is a fact of its own) and it
cannot be silenced: an alarm the agent set must not vanish because a noisy
channel was muted.

The urgency a schedule asks for is its channel's declared default, so there
is one sensor per urgency: `scheduler` (normal), `scheduler.priority` and
`scheduler.urgent`. Configured urgency rules still come first, as for every
channel (they match `scheduler*`).

**Exactly once.** The sensor's place in each schedule (the latest
occurrence fired) is kept in its bookmark, saved *before* the event is
emitted, so the archive commits both in one transaction: after a `kill -9`
a firing whose event was lost fires again and one whose event was kept does
not. The store's `fired_through` is updated after, for the lists; with no
bookmark it is the place.

It sleeps until the next schedule comes due, and wakes early when a schedule
is added or cancelled through the store it watches; at least every
`max_sleep` seconds it reads the store again, which catches a `noema
schedule cancel` from another process and a clock that jumped (a laptop
waking up).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...scheduling.firing import RECHECK_ENDED, due_firing, firing_payload, firing_text, next_due
from ...scheduling.store import Schedule, ScheduleStore
from ..clock import Clock, wall_clock
from ..events import Nature, SensorInfo, Urgency
from ..hub import Bookmark, Emitter, Sleep
from ..whose import SOURCES_KEY

CHANNEL = "scheduler"
DEFAULT_MAX_SLEEP = 300.0

_DESCRIPTIONS = {
    Urgency.NORMAL: "Alarms and recurring schedules you set with schedule_alarm and "
                    "schedule_recurring, as they come due.",
    Urgency.PRIORITY: "Alarms and recurring schedules set with urgency 'priority', as they "
                      "come due.",
    Urgency.URGENT: "Alarms and recurring schedules set with urgency 'urgent', as they "
                    "come due.",
}


def channel_for(urgency: Urgency) -> str:
    """The channel a schedule of this urgency fires on."""
    return CHANNEL if urgency is Urgency.NORMAL else f"{CHANNEL}.{urgency.value}"


class SchedulerSensor:
    """Fires the schedules of one urgency kept in a `ScheduleStore`."""

    def __init__(
        self,
        store: ScheduleStore,
        *,
        urgency: Urgency = Urgency.NORMAL,
        clock: Clock = wall_clock,
        sleep: Sleep = asyncio.sleep,
        bookmark: Bookmark | None = None,
        max_sleep: float = DEFAULT_MAX_SLEEP,
    ) -> None:
        if not max_sleep > 0:
            raise ValueError("max_sleep must be positive")
        self._store = store
        self._urgency = urgency
        self._clock = clock
        self._sleep = sleep
        self._bookmark = bookmark
        self._max_sleep = max_sleep
        self._changed = asyncio.Event()
        store.subscribe(self._changed.set)
        self.info = SensorInfo(
            channel_for(urgency), _DESCRIPTIONS[urgency], Nature.DISCRETE,
            parameters={"urgency": urgency.value}, can_silence=False, default_urgency=urgency,
        )

    async def run(self, emit: Emitter) -> None:
        places = self._load()
        while True:
            self._changed.clear()
            now = self._clock()
            mine = [s for s in self._store.candidates(now - RECHECK_ENDED)
                    if s.urgency is self._urgency]
            places = {s.id: places[s.id] for s in mine if s.id in places}
            due = [(firing, schedule) for schedule in mine
                   if (firing := due_firing(schedule, self._place(schedule, places), now))]
            # The oldest due first: a delivery of several runs forward in time,
            # never "09:00–08:30" when a later-numbered schedule was due earlier.
            for firing, schedule in sorted(due, key=lambda pair: pair[0].due_at):
                places[schedule.id] = firing.due_at
                self._save(places)  # before the event: the archive commits both together
                # A schedule outside words asked for speaks as an outsider when
                # it fires: its reason may be a stranger's order, kept for later.
                payload = firing_payload(firing)
                if schedule.sources:  # named, for the person's questions
                    payload[SOURCES_KEY] = [[s.kind.value, s.who] for s in schedule.sources]
                emit(firing_text(firing), sender="scheduler", key=f"schedule:{schedule.id}",
                     authorised=not schedule.outside, occurred_at=firing.due_at,
                     payload=payload)
                self._store.record_firing(schedule.id, firing.due_at, firing.count, now)
            await self._wait(self._next_wake(mine, places, now) - now)

    def _place(self, schedule: Schedule, places: Mapping[int, float]) -> float | None:
        if self._bookmark is None:
            return schedule.fired_through
        return places.get(schedule.id)

    def _next_wake(self, schedules: Iterable[Schedule], places: Mapping[int, float],
                   now: float) -> float:
        dues = [d for s in schedules if (d := next_due(s, self._place(s, places))) is not None]
        return min([now + self._max_sleep, *dues])

    async def _wait(self, delay: float) -> None:
        """Sleep `delay` seconds (at most `max_sleep`), or less if the store changes."""
        if self._changed.is_set():
            return
        sleeper = asyncio.ensure_future(self._sleep(max(0.0, min(delay, self._max_sleep))))
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait({sleeper, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, changed):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _load(self) -> dict[int, float]:
        state = self._bookmark.load() if self._bookmark is not None else None
        places: Mapping[str, Any] = (state or {}).get("places", {})
        return {int(k): float(v) for k, v in places.items()}

    def _save(self, places: Mapping[int, float]) -> None:
        if self._bookmark is not None:
            self._bookmark.save({"places": {str(k): v for k, v in places.items()}})


def scheduler_sensors(
    store: ScheduleStore,
    *,
    clock: Clock = wall_clock,
    sleep: Sleep = asyncio.sleep,
    bookmarks: Callable[[str], Bookmark] | None = None,
    max_sleep: float = DEFAULT_MAX_SLEEP,
) -> list[SchedulerSensor]:
    """One sensor per urgency over one store; `bookmarks` gives a durable bookmark
    by name (the sensory archive's), so firings are exactly once across a kill."""
    return [
        SchedulerSensor(store, urgency=urgency, clock=clock, sleep=sleep, max_sleep=max_sleep,
                        bookmark=bookmarks("sensor:" + channel_for(urgency)) if bookmarks
                        else None)
        for urgency in (Urgency.NORMAL, Urgency.PRIORITY, Urgency.URGENT)
    ]
