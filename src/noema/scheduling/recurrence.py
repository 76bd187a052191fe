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
- "the first Monday of every month", "el primer lunes de cada mes", "the last
  Friday of the month", "el último viernes de cada mes", "the last day of every month";
- "every 15 minutes", "every hour", "every 2 hours", "cada 10 minutos", "cada hora",
  "cada media hora" (the interval must divide an hour, or a day, evenly, as in cron);
- steps over days, weeks and months, which cron cannot say (see `steps`):
  "every other day", "cada tres días", "día sí, día no", "every two weeks",
  "cada dos semanas", "every other Monday", "un lunes sí y otro no", "every other
  weekend", "every third Friday" (every three weeks, on Friday: the third Friday
  of each month is said "the third Friday of every month"), "every 2 months on
  the 15th", "cada dos meses el primer lunes", "every week", "cada semana".
A rule without a time fires at 09:00 (its part of the day's hour if one is
named, as in `words`). A step without its day fires on the day of its first
firing: "every two weeks" said on a Monday afternoon fires on Tuesdays at
09:00 from tomorrow on; "every 2 months" without a day fires on the 1st, as
"monthly" does. A step is counted from the date of its first firing, the
first day that fits the rule after the moment it is set.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from .steps import Step, Unit, join, split
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
            "'every 15 minutes', 'every other day', 'every two weeks on friday', "
            "'the first monday of every month', 'cada lunes a las 10', "
            "'todos los días laborables a las 8', 'cada dos semanas', "
            "'el último viernes de cada mes', or cron such as '30 8 * * 1-5'")
_CANDIDATES = 2000  # a stepped rule must fire within this many of its cron's firings


@dataclass(frozen=True, slots=True)
class Recurrence:
    """A rule as stored (cron, perhaps with a step: see `steps`), with words that
    say it back."""

    cron: str
    description: str

    def __post_init__(self) -> None:
        check_rule(self.cron)


def check_rule(rule: str) -> None:
    """Raise PhraseError unless `rule` (cron, perhaps with a step) can fire."""
    cron, step = split(rule)
    check_cron(cron)
    if step is None:
        return
    start = datetime.combine(step.first, datetime.min.time(), ZoneInfo("UTC"))
    for number, moment in enumerate(CronSim(cron, start)):
        if step.keeps(moment.date()):
            return
        if number >= _CANDIDATES:
            break
    raise PhraseError(f"rule {rule!r} never fires")


def check_cron(expression: str) -> None:
    """Raise PhraseError unless `expression` is a cron expression that can fire."""
    if not _CRON.match(expression):
        raise PhraseError(f"{expression!r} is not a five-field cron expression")
    try:
        next(CronSim(expression, datetime(2000, 1, 1, tzinfo=ZoneInfo("UTC"))))
    except (CronSimError, StopIteration) as exc:
        raise PhraseError(f"cron {expression!r} is not usable: {exc}") from None


def parse_rule(text: str, now: datetime) -> Recurrence:
    """The recurrence `text` names (cron or plain words), set at `now` (aware, in
    the schedule's zone: a step is counted from the first firing after it);
    raises PhraseError."""
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime in the schedule's zone")
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
    step, rest = _take_step(phrase)
    clock, rest = take_time(rest)
    part, _, rest = take_part_of_day(rest)
    clock = with_part(clock, part) or TimeOfDay(DEFAULT_HOUR)
    days, rest = _take_days(rest, monthly=step is not None and step[1] == "month")
    unread = [w for w in rest.replace(",", " ").split() if w not in _RULE_FILLER]
    if unread:
        raise PhraseError(f"cannot read {' '.join(unread)!r} in {raw!r}; write for example "
                          f"{EXAMPLES}")
    if step is not None:
        return _stepped(step, days, clock, now, raw)
    if days is None:
        raise PhraseError(f"{raw!r} does not say which days; write for example {EXAMPLES}")
    dom, dow, label = days
    return Recurrence(f"{clock.minute} {clock.hour} {dom} * {dow}",
                      f"{label} at {clock.hour:02d}:{clock.minute:02d}")


def _stepped(step: tuple[int, Unit], days: _Days | None, clock: TimeOfDay, now: datetime,
             raw: str) -> Recurrence:
    """A rule with a step: the cron of its candidate days, and the step counted from
    the date of the first candidate after `now`."""
    n, unit = step
    every = "every" if n == 1 else f"every {n} {unit}s"
    if unit == "day":
        if days is not None and days[:2] != ("*", "*"):
            raise PhraseError(f"{raw!r}: a step of days cannot keep to chosen days; say "
                              "'every 2 weeks on monday' or 'every other day'")
        dom, dow, label = "*", "*", "every day" if n == 1 else every
    elif unit == "week":
        if days is not None and days[0] != "*":
            raise PhraseError(f"{raw!r}: a step of weeks fires on days of the week; say "
                              "'every 2 weeks on monday', or 'every 2 months on the 15th'")
        if days is None:
            first = _first(f"{clock.minute} {clock.hour} * * *", now)
            dow = str(first.isoweekday() % 7)
            days = ("*", dow, _DAY_NAMES[int(dow)])
        dom, dow, label = days
        which = label.removeprefix("every ").removeprefix("on ")
        which = {"day": "every day of the week", "weekday (Monday to Friday)":
                 "Monday to Friday"}.get(which, which)
        label = f"{'every week' if n == 1 else every} on {which}"
    else:
        if days is not None and days[0] == "*" and "#" not in days[1] and "L" not in days[1]:
            raise PhraseError(f"{raw!r}: a step of months fires on a day of the month; say "
                              "'every 2 months on the 15th' or 'every 2 months on the first "
                              "monday'")
        dom, dow, label = days if days is not None else ("1", "*", "every month on day 1")
        label = f"{every} {label.removeprefix('every month ')}" if n > 1 else label
    cron = f"{clock.minute} {clock.hour} {dom} * {dow}"
    at = f"{clock.hour:02d}:{clock.minute:02d}"
    if n == 1:
        return Recurrence(cron, f"{label} at {at}")
    first = _first(cron, now)
    chosen = Step(n, unit, first.date())
    return Recurrence(join(cron, chosen), f"{label} at {at}, counted from "
                                          f"{first:%A} {first.day} {first:%B %Y}")


def _first(cron: str, now: datetime) -> datetime:
    """The first time a plain cron rule fires after `now`, in `now`'s zone."""
    check_cron(cron)
    return next(iter(CronSim(cron, now)))


_RULE_FILLER = FILLER | {"every", "each", "cada", "todos", "todas", "from", "in", "en"}

# How many days, weeks or months a step spans, in the words people use.
_ORDINAL_STEPS = {"other": 2, "alternate": 2, "second": 2, "third": 3, "fourth": 4,
                  "fifth": 5, "sixth": 6}
_STEP_N = r"(?P<n>\d+(?:st|nd|rd|th)?|" + "|".join(_ORDINAL_STEPS) + ")"
_UNITS: dict[str, Unit] = {
    "day": "day", "days": "day", "dia": "day", "dias": "day",
    "week": "week", "weeks": "week", "semana": "week", "semanas": "week",
    "month": "month", "months": "month", "mes": "month", "meses": "month",
}
_UNIT = r"(?P<unit>days?|weeks?|months?|dias?|semanas?|mes(?:es)?)"
# A weekday or a weekend follows the step ("every other weekend"); "every other
# weekday" is not read: alternate working days and alternate weeks both fit it.
_WD_AHEAD = rf"(?=(?:{WEEKDAY_WORD})s?\b|weekends?\b|fines?\s+de\s+semana\b)"
_MONTH_MARK = re.compile(r"\b(?:every\s+month|each\s+month|monthly|(?:de\s+)?cada\s+mes|"
                         r"todos\s+los\s+meses|mensualmente|(?:of|in)\s+(?:the\s+)?month|"
                         r"del\s+mes)\b")
# Each pattern with the number and unit of its step when the words do not carry
# them (None: read from the match; a missing number is 2, as in "alternate days").
_STEP_PATTERNS: tuple[tuple[re.Pattern[str], int | None, Unit | None], ...] = (
    (re.compile(rf"\b(?:every|each|cada)\s+{_STEP_N}\s+{_UNIT}\b"), None, None),
    (re.compile(rf"\b(?:on\s+)?alternate\s+{_UNIT}\b"), 2, None),
    (re.compile(rf"\b(?:en\s+)?{_UNIT}\s+altern[oa]s\b"), 2, None),
    (re.compile(r"\b(?:every\s+|each\s+)?(?:fortnight|fortnightly|biweekly)\b|"
                r"\bquincenal(?:mente)?\b|\bcada\s+quincena\b"), 2, "week"),
    (re.compile(r"\b(?:every\s+week|each\s+week|weekly|cada\s+semana|todas\s+las\s+semanas|"
                r"semanalmente)\b"), 1, "week"),
    # "un día sí y otro no", "día sí, día no", "una semana sí y otra no"
    (re.compile(rf"\b(?:1\s+)?{_UNIT}\s+si\s+(?:y\s+)?(?:(?:1|otr[oa])\s+)?"
                rf"(?:(?:dias?|semanas?|mes(?:es)?)\s+)?no\b"), 2, None),
)
_WEEKDAY_STEPS: tuple[re.Pattern[str], ...] = (
    # "every other monday", "every third friday", "cada 2 viernes"
    re.compile(rf"\b(?:every|each|cada)\s+{_STEP_N}\s+{_WD_AHEAD}"),
    re.compile(rf"\balternate\s+{_WD_AHEAD}"),
    # "un lunes sí y otro no", "lunes alternos"
    re.compile(rf"\b(?:1\s+)?(?P<wd>{WEEKDAY_WORD})s?\s+si\s+(?:y\s+)?(?:(?:1|otr[oa])\s+)?no\b"),
    re.compile(rf"\b(?P<wd>{WEEKDAY_WORD})s?\s+altern[oa]s\b"),
)


def _step_number(word: str | None) -> int:
    if word is None:
        return 2
    digits = re.match(r"\d+", word)
    return int(digits.group(0)) if digits else _ORDINAL_STEPS[word]


def _take_step(text: str) -> tuple[tuple[int, Unit] | None, str]:
    """A step over days, weeks or months ("every 2 weeks", "día sí, día no"), and the rest."""
    for pattern, n, unit in _STEP_PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        groups = match.groupdict()
        return ((n if n is not None else _step_number(groups.get("n")),
                 unit if unit is not None else _UNITS[groups["unit"]]), cut(text, match))
    if _MONTH_MARK.search(text):
        return None, text  # "the second monday of the month" is a day of the month
    for pattern in _WEEKDAY_STEPS:
        match = pattern.search(text)
        if match is None:
            continue
        weekday = match.groupdict().get("wd") or ""
        n = _step_number(match.groupdict().get("n"))
        rest = text[:match.start()] + f" {weekday} " + text[match.end():]
        return (n, "week"), " ".join(rest.split())
    return None, text

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
_DAY_OF_MONTH = re.compile(r"\b(?:(?:the|el)\s+)?(?:day\s+|dia\s+)?(?P<d>\d{1,2})"
                           r"(?:st|nd|rd|th)?\b")
_ONE_WEEKDAY = re.compile(rf"\b(?P<wd>{WEEKDAY_WORD})s?\b")
_NTH = {"first": 1, "1st": 1, "primer": 1, "primero": 1, "1er": 1,
        "second": 2, "2nd": 2, "segundo": 2, "third": 3, "3rd": 3, "tercer": 3, "tercero": 3,
        "fourth": 4, "4th": 4, "cuarto": 4, "fifth": 5, "5th": 5, "quinto": 5,
        "last": 0, "ultimo": 0}
_NTH_WORD = "|".join(sorted(_NTH, key=len, reverse=True))
_NTH_WEEKDAY = re.compile(rf"\b(?P<nth>{_NTH_WORD})\s+(?P<wd>{WEEKDAY_WORD})s?\b")
_LAST_DAY = re.compile(r"\b(?:last|ultimo)\s+(?:day|dia)\b")
_ORDINAL_NAMES = ("last", "first", "second", "third", "fourth", "fifth")

_Days = tuple[str, str, str]  # day of month, day of week (cron fields), words


def _cron_day(name: str) -> int:
    name = name if name in WEEKDAYS else name[:-1]  # "mondays", "sabados"
    return (WEEKDAYS[name] + 1) % 7  # cron counts from Sunday, 0


def _take_days(text: str, monthly: bool = False) -> tuple[_Days | None, str]:
    """The days a rule fires on (cron's day fields and words), and the rest of the
    text; `monthly` when a step of months has been read, so a day of the month follows."""
    if monthly:
        return _day_of_month(text)
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
    match = _MONTH_MARK.search(text)
    if match:
        return _day_of_month(cut(text, match))
    found = sorted({_cron_day(m.group(0)) for m in _ONE_WEEKDAY.finditer(text)})
    if found:
        rest = _ONE_WEEKDAY.sub(" ", text)
        names = [_DAY_NAMES[d] for d in found]
        label = "every " + (names[0] if len(names) == 1 else
                            ", ".join(names[:-1]) + " and " + names[-1])
        return ("*", ",".join(map(str, found)), label), " ".join(rest.split())
    return None, text


def _day_of_month(text: str) -> tuple[_Days, str]:
    """The day of a monthly rule: "the 15th", "the first monday", "el último viernes",
    "the last day"; the 1st when none is named."""
    match = _NTH_WEEKDAY.search(text)
    if match:
        nth = _NTH[match.group("nth")]
        day = _cron_day(match.group("wd"))
        dow = f"{day}L" if nth == 0 else f"{day}#{nth}"
        label = (f"every month that has a fifth {_DAY_NAMES[day]}, on it" if nth == 5 else
                 f"every month on the {_ORDINAL_NAMES[nth]} {_DAY_NAMES[day]}")
        return ("*", dow, label), cut(text, match)
    match = _LAST_DAY.search(text)
    if match:
        return ("L", "*", "every month on its last day"), cut(text, match)
    day = _DAY_OF_MONTH.search(text)
    dom = int(day.group("d")) if day else 1
    if not 1 <= dom <= 28:
        raise PhraseError("a monthly day must be 1 to 28, so that every month has it "
                          "(say 'the last day of every month', or use cron)")
    return (str(dom), "*", f"every month on day {dom}"), cut(text, day) if day else text


def occurrences(rule: str, zone: ZoneInfo, after: float) -> Iterator[float]:
    """The times a rule (cron, perhaps with a step) fires, strictly after `after`
    (seconds since the epoch), in order."""
    cron, step = split(rule)
    start = datetime.fromtimestamp(after, zone)
    for moment in CronSim(cron, start):
        if step is None or step.keeps(moment.date()):
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
