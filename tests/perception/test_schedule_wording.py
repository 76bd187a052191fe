"""Schedule messages read the way a person reads time: nothing is "in 0 s",
firings delivered together run forward in time, and the small hours "at
night" on a named day belong to that day's night (the next date), never to
the night before it."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from noema.perception.clock import ManualClock
from noema.perception.hub import Emitter
from noema.perception.sensors.scheduler import SchedulerSensor
from noema.providers.base import ToolCall
from noema.scheduling.listing import from_now, schedule_lines
from noema.scheduling.phrases import resolve_when
from noema.scheduling.store import ScheduleStore
from noema.scheduling.tools import schedule_tools
from noema.tools.registry import ToolContext, ToolRegistry

MADRID = ZoneInfo("Europe/Madrid")
NOW = datetime(2026, 3, 26, 12, 0, tzinfo=MADRID)  # a Thursday, noon


@pytest.mark.parametrize("moment, said", [
    (0.0, "in less than a second"), (0.4, "in less than a second"),
    (-0.4, "less than a second ago"), (1.0, "in 1 s"), (0.9999997, "in 1 s"), (1.25, "in 1.2 s"),
    (-75, "1 min 15 s ago"),
    (3600, "in 1 h"),
])
def test_from_now_never_says_zero(moment, said):
    assert from_now(1000.0 + moment, 1000.0) == said


def test_an_alarm_due_this_very_second_is_listed_without_zero_seconds():
    clock = [1_790_000_000.0]
    store = ScheduleStore(":memory:")
    registry = ToolRegistry(schedule_tools(store, MADRID, clock=lambda: clock[0]))

    async def call(name: str, **arguments) -> str:
        result = await registry.call(ToolCall("c", name, json.dumps(arguments)),
                                     ToolContext("c", 1, 1))
        assert not result.is_error, result.content
        return result.content

    set_text = asyncio.run(call("schedule_alarm", reason="tea", when="in 0.3 seconds"))
    assert "in less than a second: tea" in set_text and " 0.3 s" not in set_text
    for later in (0.3, 0.1):  # due now, and a hair after
        clock[0] += later
        listed = schedule_lines(store.active(), clock[0])
        assert "in 0 s" not in listed and "0.0 s" not in listed
        assert "in less than a second" in listed or "less than a second ago" in listed


@pytest.mark.parametrize("phrase, expected", [
    ("tonight at 2", "2026-03-27T02:00:00+01:00"),
    ("mañana a las 2 de la noche", "2026-03-28T02:00:00+01:00"),
    ("mañana a las 12 de la noche", "2026-03-28T00:00:00+01:00"),
    ("el viernes a las 3 de la noche", "2026-03-28T03:00:00+01:00"),
    ("tomorrow at 10 at night", "2026-03-27T22:00:00+01:00"),  # the evening stays that day
    ("a las 2 de la noche", "2026-03-27T02:00:00+01:00"),  # no day: the coming night
    ("mañana a las 5 de la madrugada", "2026-03-27T05:00:00+01:00"),  # said as morning
])
def test_the_small_hours_of_a_named_night_fall_on_the_next_date(phrase, expected):
    resolved = resolve_when(phrase, NOW)
    assert resolved.at.isoformat() == expected
    assert resolved.at > NOW
    if "mañana a las 2" in phrase:
        assert any("belongs to the night that begins on Friday 27 March" in n
                   for n in resolved.notes)


def test_in_the_small_hours_tonight_is_the_night_already_begun():
    one_am = datetime(2026, 3, 26, 1, 0, tzinfo=MADRID)
    assert resolve_when("tonight at 2", one_am).at.isoformat() == "2026-03-26T02:00:00+01:00"


class _Stop(Exception):
    pass


async def test_firings_due_together_are_emitted_oldest_first():
    """Schedules numbered against their times (#1 due last) fire in time order,
    so a delivery of them spans forward: 07:00–09:00, never 09:00–07:00."""
    now = datetime(2026, 3, 27, 15, 30, tzinfo=MADRID).timestamp()
    clock = ManualClock(now)
    store = ScheduleStore(":memory:")
    for hour in (9, 8, 7):
        store.add_alarm(f"at {hour}", datetime(2026, 3, 27, hour, tzinfo=MADRID).timestamp(),
                        rule="x", zone="Europe/Madrid", now=now - 86400)
    events: list = []

    async def sleep(seconds: float) -> None:
        raise _Stop

    sensor = SchedulerSensor(store, clock=clock, sleep=sleep)
    with pytest.raises(_Stop):
        await sensor.run(Emitter(sensor.info.channel, clock, events.append))
    assert [e.payload["schedule_id"] for e in events] == [3, 2, 1]
    times = [e.occurred_at for e in events]
    assert times == sorted(times)
