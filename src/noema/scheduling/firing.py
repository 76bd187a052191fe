"""When a schedule fires, and what a firing says: plain functions, the clock passed in.

`progress` is where the scheduler stands in a schedule: None before its
first firing, else the time of the latest occurrence it fired.

The missed-fire policy:
- An alarm whose time came while the agent was not running fires once, as
  soon as the agent runs, marked late with how late.
- A recurring schedule that came due several times while the agent was not
  running fires once, with the count and the first and last times missed;
  it then carries on from now (the missed occurrences are not replayed).
- A firing less than `LATE_AFTER` seconds after its time is on time: the
  agent's own wake-up takes a moment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from ..perception.timefmt import format_duration
from .phrases import describe
from .recurrence import missed_between, next_after
from .store import Kind, Schedule

LATE_AFTER = 60.0
# How long an alarm the store marks fired is still checked against the
# sensor's own place: far longer than the archive's commit delay, which is
# the only window in which the two can disagree.
RECHECK_ENDED = 86400.0


@dataclass(frozen=True, slots=True)
class Firing:
    """A schedule coming due: its latest occurrence, and how many were missed."""

    schedule: Schedule
    due_at: float  # the latest occurrence that came due
    first_at: float  # the earliest occurrence not fired yet
    count: int  # occurrences this firing stands for (1 when none was missed)
    late_by: float  # seconds between `due_at` and the firing
    capped: bool = False  # more occurrences than `count` were missed

    @property
    def late(self) -> bool:
        return self.late_by >= LATE_AFTER


def zone_of(schedule: Schedule) -> ZoneInfo:
    return ZoneInfo(schedule.zone)


def next_due(schedule: Schedule, progress: float | None) -> float | None:
    """When the schedule next comes due (perhaps already past), or None if it never will."""
    if schedule.cancelled_at is not None:
        return None
    if schedule.kind is Kind.ALARM:
        return schedule.at if progress is None else None
    assert schedule.cron is not None
    start = schedule.created_at if progress is None else max(progress, schedule.created_at)
    return next_after(schedule.cron, zone_of(schedule), start)


def due_firing(schedule: Schedule, progress: float | None, now: float) -> Firing | None:
    """The firing the schedule owes at `now`, or None if nothing is due."""
    due = next_due(schedule, progress)
    if due is None or due > now:
        return None
    if schedule.kind is Kind.ALARM:
        return Firing(schedule, due, due, 1, now - due)
    assert schedule.cron is not None
    start = schedule.created_at if progress is None else max(progress, schedule.created_at)
    missed = missed_between(schedule.cron, zone_of(schedule), start, now)
    assert missed is not None  # `due` is one of them
    return Firing(schedule, missed.last, missed.first, missed.count, now - missed.last,
                  missed.capped)


def firing_text(firing: Firing) -> str:
    """What the model reads when a schedule fires."""
    s = firing.schedule
    zone = zone_of(s)
    when = describe(datetime.fromtimestamp(firing.due_at, zone))
    if s.kind is Kind.ALARM:
        text = f"Alarm #{s.id} ({when}): {s.reason}"
    else:
        text = f"Recurring schedule #{s.id} ({s.rule}; this one {when}): {s.reason}"
    if firing.count > 1:
        more = "more than " if firing.capped else ""
        first = describe(datetime.fromtimestamp(firing.first_at, zone))
        text += (f"\nIt came due {more}{firing.count} times while the agent was not running "
                 f"(the first {first}); this one notice stands for all of them.")
    if firing.late:
        text += (f"\nIt fires {format_duration(firing.late_by)} late: the agent was not "
                 "running when it came due.")
    return text


def firing_payload(firing: Firing) -> dict[str, object]:
    """The firing as data, for the archive and the model's tools."""
    s = firing.schedule
    return {
        "schedule_id": s.id, "kind": s.kind.value, "rule": s.rule, "urgency": s.urgency.value,
        "due_at": firing.due_at, "first_at": firing.first_at, "count": firing.count,
        "capped": firing.capped, "late_seconds": round(firing.late_by, 3),
        "late": firing.late,
    }
