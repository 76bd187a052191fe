"""A step over a cron rule: "every 2 weeks", "every other day", "every 3 months".

Cron cannot say "every other Monday": its fields name days of a week or of a
month, never every second week, and `*/2` in the day field restarts on the
1st of each month (the 31st and the 1st both fire). So a rule that steps over
days, weeks or months is kept as a cron expression that lists the candidate
firings, followed by a step counted from a first date:

    0 9 * * 1 every 2 weeks from 2026-12-14

A candidate fires when its date lies a whole number of steps from that first
date: counted in days for days; in weeks for weeks, each week from Monday,
so "every 2 weeks on Monday and Thursday" fires on both days of one week and
on neither of the next; in calendar months for months. Nothing fires before
the first date. Dates are read on the wall clock of the schedule's zone, so a
change of clocks never moves a firing to another day.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

from .words import PhraseError

Unit = Literal["day", "week", "month"]
MAX_STEP = {"day": 366, "week": 52, "month": 24}  # beyond these, say it with a date

_STEP = re.compile(r"^(?P<cron>.+?)\s+every\s+(?P<n>\d+)\s+(?P<unit>day|week|month)s?\s+"
                   r"from\s+(?P<first>\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True, slots=True)
class Step:
    """Every `n` days, weeks or months, counted from the date `first`."""

    n: int
    unit: Unit
    first: date

    def __post_init__(self) -> None:
        if self.unit not in MAX_STEP:
            raise PhraseError(f"a step is counted in days, weeks or months, not {self.unit!r}")
        if not 2 <= self.n <= MAX_STEP[self.unit]:
            raise PhraseError(f"a step of {self.unit}s must be 2 to {MAX_STEP[self.unit]} "
                              f"(one is the plain rule)")

    def keeps(self, on: date) -> bool:
        """Whether a candidate firing on the date `on` is one of the steps."""
        if on < self.first:
            return False
        if self.unit == "day":
            return (on - self.first).days % self.n == 0
        if self.unit == "week":
            weeks = (_monday(on) - _monday(self.first)).days // 7
            return weeks % self.n == 0
        months = (on.year - self.first.year) * 12 + on.month - self.first.month
        return months % self.n == 0

    def text(self) -> str:
        """The step as it is written after the cron expression."""
        return f"every {self.n} {self.unit}s from {self.first.isoformat()}"


def _monday(on: date) -> date:
    return on - timedelta(days=on.weekday())


def split(rule: str) -> tuple[str, Step | None]:
    """A stored rule's cron expression and its step, if it has one."""
    match = _STEP.match(rule.strip())
    if match is None:
        return rule.strip(), None
    try:
        first = date.fromisoformat(match.group("first"))
    except ValueError:
        raise PhraseError(f"{match.group('first')!r} in {rule!r} is not a date") from None
    unit: Unit = match.group("unit")  # type: ignore[assignment]  # the pattern allows only these
    return match.group("cron"), Step(int(match.group("n")), unit, first)


def join(cron: str, step: Step | None) -> str:
    """The stored form of a cron expression with an optional step."""
    return cron if step is None else f"{cron} {step.text()}"
