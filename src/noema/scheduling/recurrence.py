"""Recurring schedules: a rule in cron or plain words, and when it fires.

Every rule is kept as a five-field cron expression, evaluated by `cronsim`
2.8 in the schedule's own time zone. We chose it over `croniter` because it
is small, has no dependencies, and is written to follow what Debian's cron
does when the clocks change, which is the behaviour people expect: a job
at a wall time the clocks skip (02:30 on the night they jump forward)
runs once at the first minute after the jump, and a job at a wall time
that happens twice (the night they go back) runs once, the first time.
Jobs every minute or every hour follow real time, so they neither stop
for an hour nor run twice in one.

Plain words are read by a small grammar of our own into a cron expression
(the `recurrent` package reads English only, into RFC 5545 rules; one
representation for both languages keeps the evaluation in one place):
- "every day at 8", "daily at 7:30", "cada día a las 8", "todos los días por la mañana";
- "every weekday at 8:30", "weekdays at 9", "cada día laborable a las 8",
  "todos los días laborables", "de lunes a viernes a las 7", "entre semana";
- "every weekend at 10", "los fines de semana a las 11";
- "every monday at 10", "mondays and thursdays at 18:00", "cada lunes a las 10",
  "los martes y jueves por la tarde", "monday to wednesday at 9";
- "every month on the 1st at 9", "el día 15 de cada mes a las 12", "monthly" (the 1st);
- "every 15 minutes", "every hour", "every 2 hours", "cada 10 minutos", "cada hora",
  "cada media hora" (the interval must divide an hour, or a day, evenly, as in cron).
A rule without a time fires at 09:00 (its part of the day's hour if one is
named, as in `words`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from .words import (
    FILLER,
    WEEKDAY_WORD,
    WEEKDAYS,
    PhraseError,
    TimeOfDay,
    cut,
    normalise,
    take_part_of_day,
    take_time,
    with_part,
)

DEFAULT_HOUR = 9
MAX_COUNT = 1000  # missed firings counted one by one; beyond, "more than 1000"

_CRON_FIELD = r"[\w*/,\-#?]+"
_CRON = re.compile(rf"^{_CRON_FIELD}(?:\s+{_CRON_FIELD}){{4}}$")
_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
EXAMPLES = ("'every weekday at 8:30', 'every monday at 10', 'every day at 9', "
            "'every 15 minutes', 'cada lunes a las 10', 'todos los días laborables a las 8', "
            "or cron such as '30 8 * * 1-5'")


@dataclass(frozen=True, slots=True)
class Recurrence:
    """A rule as cron, with words that say it back."""

    cron: str
    description: str

    def __post_init__(self) -> None:
        check_cron(self.cron)


def check_cron(expression: str) -> None:
    """Raise PhraseError unless `expression` is a cron expression that can fire."""
    if not _CRON.match(expression):
        raise PhraseError(f"{expression!r} is not a five-field cron expression")
    try:
        next(CronSim(expression, datetime(2000, 1, 1, tzinfo=ZoneInfo("UTC"))))
    except (CronSimError, StopIteration) as exc:
        raise PhraseError(f"cron {expression!r} is not usable: {exc}") from None


def parse_rule(text: str) -> Recurrence:
    """The recurrence `text` names (cron or plain words); raises PhraseError."""
    raw = " ".join(text.split())
    if _CRON.match(raw) and any(c.isdigit() or c == "*" for c in raw.split()[0]):
        check_cron(raw)
        return Recurrence(raw, f"cron '{raw}'")
    phrase = normalise(raw)
    if not phrase:
        raise PhraseError(f"say how often: for example {EXAMPLES}")
    interval = _interval(phrase)
    if interval is not None:
        return interval
    clock, rest = take_time(phrase)
    part, _, rest = take_part_of_day(rest)
    clock = with_part(clock, part) or TimeOfDay(DEFAULT_HOUR)
    days, rest = _take_days(rest)
    unread = [w for w in rest.replace(",", " ").split() if w not in _RULE_FILLER]
    if unread:
        raise PhraseError(f"cannot read {' '.join(unread)!r} in {raw!r}; write for example "
                          f"{EXAMPLES}")
    if days is None:
        raise PhraseError(f"{raw!r} does not say which days; write for example {EXAMPLES}")
    dom, dow, label = days
    at = f"{clock.hour:02d}:{clock.minute:02d}"
    return Recurrence(f"{clock.minute} {clock.hour} {dom} * {dow}", f"{label} at {at}")


_RULE_FILLER = FILLER | {"every", "each", "cada", "todos", "todas", "from", "in", "en"}

_INTERVAL = re.compile(
    r"^(?:every|each|cada)\s+(?:(?P<n>\d+)\s+)?(?P<unit>minutes?|mins?|hours?|minutos?|horas?)$")
_HALF_HOUR = re.compile(r"^(?:every\s+half\s+(?:an\s+)?hour|cada\s+media\s+hora)$")


def _interval(phrase: str) -> Recurrence | None:
    if phrase in ("hourly", "every hour", "cada hora"):
        return Recurrence("0 * * * *", "every hour, on the hour")
    if _HALF_HOUR.match(phrase):
        return Recurrence("*/30 * * * *", "every 30 minutes (at :00 and :30)")
    match = _INTERVAL.match(phrase)
    if match is None:
        return None
    n = int(match.group("n") or 1)
    if match.group("unit").startswith("min") and n == 60:
        return Recurrence("0 * * * *", "every hour, on the hour")
    if match.group("unit").startswith("min"):
        if n < 1 or 60 % n:
            raise PhraseError(f"every {n} minutes does not divide an hour evenly; use one of "
                              "1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, or cron")
        cron = "* * * * *" if n == 1 else f"*/{n} * * * *"
        return Recurrence(cron, f"every {n} minute(s), counted from the hour")
    if n < 1 or 24 % n:
        raise PhraseError(f"every {n} hours does not divide a day evenly; use one of "
                          "1, 2, 3, 4, 6, 8, 12, or cron")
    cron = "0 * * * *" if n == 1 else f"0 */{n} * * *"
    return Recurrence(cron, f"every {n} hour(s), on the hour, counted from midnight")


_WD = rf"(?:{WEEKDAY_WORD})s?"
_RANGE = re.compile(rf"\b(?:from\s+|de\s+)?(?:el\s+)?(?P<a>{_WD})\s+(?:to|through|thru|-|a|al|"
                    rf"hasta)\s+(?:el\s+)?(?P<b>{_WD})\b")
_WORKDAYS = re.compile(r"\b(?:weekdays?|workdays?|working\s+days?|business\s+days?|"
                       r"(?:dias?\s+)?laborables?|entre\s+semana)\b")
_WEEKENDS = re.compile(r"\b(?:weekends?|(?:los\s+)?fines?\s+de\s+semana)\b")
_EVERY_DAY = re.compile(r"\b(?:every\s+day|each\s+day|daily|cada\s+dia|(?:todos\s+)?los\s+dias|"
                        r"diariamente|a\s+diario)\b")
_MONTHLY = re.compile(r"\b(?:every\s+month|each\s+month|monthly|(?:de\s+)?cada\s+mes|"
                      r"todos\s+los\s+meses|mensualmente)\b")
_DAY_OF_MONTH = re.compile(r"\b(?:(?:the|el)\s+)?(?:day\s+|dia\s+)?(?P<d>\d{1,2})"
                           r"(?:st|nd|rd|th)?\b")
_ONE_WEEKDAY = re.compile(rf"\b(?P<wd>{WEEKDAY_WORD})s?\b")

_Days = tuple[str, str, str]  # day of month, day of week (cron fields), words


def _cron_day(name: str) -> int:
    name = name if name in WEEKDAYS else name[:-1]  # "mondays", "sabados"
    return (WEEKDAYS[name] + 1) % 7  # cron counts from Sunday, 0


def _take_days(text: str) -> tuple[_Days | None, str]:
    match = _RANGE.search(text)
    if match:
        a, b = _cron_day(match.group("a")), _cron_day(match.group("b"))
        wraps = f"{a}-6,0" + (f"-{b}" if b else "")  # past Saturday, on from Sunday
        return ("*", f"{a}-{b}" if a <= b else wraps,
                f"every {_DAY_NAMES[a]} to {_DAY_NAMES[b]}"), cut(text, match)
    for pattern, dow, label in ((_WORKDAYS, "1-5", "every weekday (Monday to Friday)"),
                                (_WEEKENDS, "0,6", "every Saturday and Sunday"),
                                (_EVERY_DAY, "*", "every day")):
        match = pattern.search(text)
        if match:
            return ("*", dow, label), cut(text, match)
    match = _MONTHLY.search(text)
    if match:
        rest = cut(text, match)
        day = _DAY_OF_MONTH.search(rest)
        dom = int(day.group("d")) if day else 1
        if not 1 <= dom <= 28:
            raise PhraseError("a monthly day must be 1 to 28, so that every month has it "
                              "(use cron for the last days of a month)")
        return (str(dom), "*", f"every month on day {dom}"), cut(rest, day) if day else rest
    found = sorted({_cron_day(m.group(0)) for m in _ONE_WEEKDAY.finditer(text)})
    if found:
        rest = _ONE_WEEKDAY.sub(" ", text)
        names = [_DAY_NAMES[d] for d in found]
        label = "every " + (names[0] if len(names) == 1 else
                            ", ".join(names[:-1]) + " and " + names[-1])
        return ("*", ",".join(map(str, found)), label), " ".join(rest.split())
    return None, text


def occurrences(cron: str, zone: ZoneInfo, after: float) -> Iterator[float]:
    """The times a rule fires, strictly after `after` (seconds since the epoch), in order."""
    start = datetime.fromtimestamp(after, zone)
    for moment in CronSim(cron, start):
        yield moment.timestamp()


def next_after(cron: str, zone: ZoneInfo, after: float) -> float:
    """The first time a rule fires strictly after `after`."""
    return next(occurrences(cron, zone, after))


@dataclass(frozen=True, slots=True)
class Missed:
    """The firings of a rule in an interval: how many (capped), the first and the last."""

    count: int
    first: float
    last: float
    capped: bool = False  # there were more than `count`


def missed_between(cron: str, zone: ZoneInfo, after: float, until: float,
                   cap: int = MAX_COUNT) -> Missed | None:
    """The firings strictly after `after` and at or before `until`, or None.

    Counting stops at `cap`; the last one is then found from `until` backwards
    by stepping forward again from a late enough point, so a rule every minute
    missed for a year costs `cap` steps, not half a million.
    """
    count, first, last = 0, None, None
    for moment in occurrences(cron, zone, after):
        if moment > until:
            break
        count += 1
        first = moment if first is None else first
        last = moment
        if count >= cap:
            tail = _last_before(cron, zone, moment, until)
            return Missed(count, first, tail, capped=tail > moment)
    if first is None or last is None:
        return None
    return Missed(count, first, last)


def _last_before(cron: str, zone: ZoneInfo, known: float, until: float) -> float:
    # Step back in growing strides until a firing lies between the probe and
    # `until`, then walk forward from there.
    stride = 3600.0
    while True:
        probe = max(known, until - stride)
        last = None
        for moment in occurrences(cron, zone, probe):
            if moment > until:
                break
            last = moment
        if last is not None or probe == known:
            return last if last is not None else known
        stride *= 4
