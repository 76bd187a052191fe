"""Schedules written out for the model's `schedule_list` and the person's
`noema schedule list`: one line each, with the ID to cancel it by."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from ..perception.timefmt import format_duration
from .firing import next_due, zone_of
from .phrases import describe
from .store import Kind, Schedule


def from_now(moment: float, now: float) -> str:
    """ "in 5 min", "5 min ago": never "in 0 s" for what is due this very moment.
    (Half a second is the bound: a delay of one second computed in floating
    point may be a hair under it, and is still "in 1 s".)"""
    if abs(moment - now) < 0.5:
        return "in less than a second" if moment >= now else "less than a second ago"
    if moment > now:
        return f"in {format_duration(moment - now)}"
    return f"{format_duration(now - moment)} ago"


def _when(moment: float, schedule: Schedule, now: float) -> str:
    at = describe(datetime.fromtimestamp(moment, zone_of(schedule)))
    return f"{at}, {from_now(moment, now)}"


def schedule_line(schedule: Schedule, now: float) -> str:
    """One schedule: ID, what it is, when it fires next (or how it ended), urgency, reason."""
    s = schedule
    if s.kind is Kind.ALARM:
        what = f"alarm ({s.rule!r})"
    else:
        what = f"recurring {s.rule!r} (cron {s.cron})" if s.rule != s.cron else f"cron {s.cron}"
    if s.cancelled_at is not None:
        state = f"cancelled {_when(s.cancelled_at, s, now)}"
    elif s.kind is Kind.ALARM and s.fired_through is not None:
        state = f"fired; it was due {_when(s.fired_through, s, now)}"
    else:
        due = next_due(s, s.fired_through)
        state = "never fires again" if due is None else f"next {_when(due, s, now)}"
        if s.fired_count:
            state += f"; fired {s.fired_count} time(s) so far"
    urgency = "" if s.urgency.value == "normal" else f" [{s.urgency.value}]"
    outside = " [set on outside words: fires as an outsider's event]" if s.outside else ""
    return f"#{s.id} {what}: {state}{urgency}{outside} — {s.reason}"


def schedule_lines(schedules: Iterable[Schedule], now: float) -> str:
    """Every schedule given, one line each, or a sentence saying there is none."""
    lines = [schedule_line(s, now) for s in schedules]
    return "\n".join(lines) if lines else "No schedules."
