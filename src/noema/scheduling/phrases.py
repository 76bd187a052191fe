"""When an alarm is due, read from words in English or Spanish, or an ISO time.

A small grammar of our own, over the shared vocabulary of `words`. We tried
`dateparser` 1.5 first, the best-known multilingual parser: at a fixed
"now" it read "tomorrow at 9" and "mañana a las 9" as tomorrow at the
current time, "at 9" as the 27th of September, "3 de diciembre a las 10"
in the year 2110, and did not read "el viernes por la tarde", "esta noche"
or "pasado mañana" at all. An alarm set at the wrong time is worse than a
refusal, so every phrase here is read by rules written down below, a
phrase with a word the grammar does not know is refused (with examples),
and the result is always echoed back as an absolute time for the model to
check.

Accepted (any order, accents optional):
- an ISO time, "2026-03-27T16:00" (in the agent's zone unless it names an offset);
- a delay: "in 20 minutes", "in an hour", "in half an hour", "in 2 days",
  "en 10 minutos", "dentro de 2 horas", "en media hora", "in 1h30m";
- a day: "today", "tomorrow", "the day after tomorrow", "hoy", "mañana",
  "pasado mañana", a weekday ("friday", "next friday", "el viernes",
  "el próximo viernes"), or a date ("december 3", "3 de diciembre", "3 dec 2027");
- a time: "at 9", "at 9:30", "5pm", "17:00", "noon", "a las 9", "a la 1",
  "a las 8 y media", "a las 5 de la tarde", "mediodía"; or a part of the
  day ("in the afternoon", "tonight", "por la tarde", "esta noche"), whose
  hours are listed in `words`.

The rules for what people leave unsaid:
- A bare hour is read on the 24-hour clock: "a las 5" is 05:00; "a las 5 de
  la tarde", "5pm" or "17:00" say the afternoon.
- A time with no day is today if it is still ahead, else tomorrow.
- A day with no time is at 09:00 (its part of the day's hour if one is named).
- A small hour "at night" on a named day is in that day's night, so on the
  next date: "tonight at 2", "el viernes a las 2 de la noche" (Saturday
  02:00), "mañana a las 12 de la noche" (the midnight that ends tomorrow).
- A weekday is the next one to come, never today: on a Friday, "el viernes"
  is a week away (say "today"/"hoy" for today). "next friday" is the same day.
- A date with no year is the next time that date comes.
- A delay in minutes or hours is elapsed time ("in 2 hours" across a change
  of clocks is still two hours); in days or weeks it keeps the wall time.
- A wall time the clocks skip (02:30 on the night they jump forward) is
  moved forward by the jump (03:30); one that happens twice (the night they
  go back) is the first of the two. Both are said in the echo.
- A time that has passed when it was named explicitly ("today at 8" at
  noon, an ISO time in the past) is refused, not moved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo

from ..perception.timefmt import parse_duration
from .words import (
    MONTH_WORD,
    MONTHS,
    WEEKDAY_WORD,
    WEEKDAYS,
    PhraseError,
    TimeOfDay,
    cut,
    leftover,
    normalise,
    take_part_of_day,
    take_time,
    with_part,
)

DEFAULT_HOUR = 9  # a day named without a time
SMALL_HOURS_END = 6  # "at night" before this hour is after midnight
_FURTHEST = timedelta(days=3660)  # further than this is taken for a typo

EXAMPLES = ("'in 20 minutes', 'tomorrow at 9', 'friday at 5pm', 'december 3 at 10:00', "
            "'mañana a las 9', 'el viernes por la tarde', 'en media hora', "
            "or an ISO time such as '2026-03-27T16:00'")


@dataclass(frozen=True, slots=True)
class Resolved:
    """The absolute time a phrase means, and what was assumed to reach it."""

    at: datetime  # aware, in the agent's zone
    notes: tuple[str, ...] = ()

    @property
    def timestamp(self) -> float:
        return self.at.timestamp()


def describe(at: datetime) -> str:
    """An instant as the model and the person should read it back:
    "Friday 27 March 2026, 16:00 CET (UTC+01:00)"."""
    offset = at.strftime("%z")
    return f"{at:%A} {at.day} {at:%B %Y, %H:%M} {at.tzname()} (UTC{offset[:3]}:{offset[3:]})"


def resolve_when(text: str, now: datetime) -> Resolved:
    """The absolute time `text` names, seen from `now` (aware, in the agent's zone).

    Raises PhraseError, whose message says why and shows what can be written.
    """
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime in the agent's zone")
    zone = now.tzinfo
    raw = text.strip()
    if not raw:
        raise PhraseError(f"say when: for example {EXAMPLES}")
    iso = _iso(raw, zone)
    if iso is not None:
        return Resolved(_ahead(iso[0], now), iso[1])
    phrase = normalise(raw)
    delay, rest = _take_delay(phrase)
    if delay is not None:
        if leftover(rest):
            raise PhraseError(f"a delay ('in 20 minutes') cannot be combined with other words "
                              f"({' '.join(leftover(rest))!r}); write one or the other")
        return _after_delay(delay, now)
    clock, rest = take_time(phrase)
    part, names_today, rest = take_part_of_day(rest)
    day, rest = _take_day(rest, now.date())
    if names_today:
        if day is not None and day.on != now.date():
            raise PhraseError(f"{raw!r} names two different days; name one")
        day = _Day(now.date())
    unread = leftover(rest)
    if unread:
        raise PhraseError(f"cannot read {' '.join(unread)!r} in {raw!r}; write for example "
                          f"{EXAMPLES}")
    clock = with_part(clock, part)
    if clock is None and day is None:
        raise PhraseError(f"{raw!r} names no day and no time; write for example {EXAMPLES}")
    notes: list[str] = []
    if clock is None:
        clock = TimeOfDay(DEFAULT_HOUR)
        notes.append(f"no time was given: {DEFAULT_HOUR:02d}:00 is assumed")
    if day is None:
        today, placed = _placed(now.date(), clock, zone)
        if today > now:
            return Resolved(today, placed)
        at, more = _placed(now.date() + timedelta(days=1), clock, zone)
        return Resolved(at, (f"{clock.hour:02d}:{clock.minute:02d} has passed today: "
                             "tomorrow is meant", *more))
    day = _night_of(day, clock, now)
    at, placed = _placed(day.on, clock, zone)
    if day.year_open and at <= now:  # a date without a year: the next time it comes
        try:
            at, placed = _placed(day.on.replace(year=day.on.year + 1), clock, zone)
        except ValueError:  # the 29th of February
            raise PhraseError(f"{raw!r} names a day that next year does not have; "
                              "give the year") from None
    return Resolved(_ahead(at, now), (*notes, *placed, *day.notes))


@dataclass(frozen=True, slots=True)
class _Day:
    on: date
    year_open: bool = False  # a date given without its year
    notes: tuple[str, ...] = ()


def _night_of(day: _Day, clock: TimeOfDay, now: datetime) -> _Day:
    """The small hours of a named day's night fall on the next date: "tonight at
    2", "el viernes a las 2 de la noche", "mañana a las 12 de la noche". In the
    small hours themselves, tonight is the night already begun."""
    if clock.part != "night" or clock.hour >= SMALL_HOURS_END:
        return day
    if day.on == now.date() and now.hour < SMALL_HOURS_END:
        return day
    on = day.on + timedelta(days=1)
    note = (f"{clock.hour:02d}:{clock.minute:02d} at night belongs to the night that begins "
            f"on {day.on:%A} {day.on.day} {day.on:%B}: {on:%A} {on.day} {on:%B} is meant")
    return _Day(on, day.year_open, (*day.notes, note))


_ISO_SHAPE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?"
                        r"(?:Z|[+-]\d{2}:?\d{2})?$")


def _iso(text: str, zone: tzinfo) -> tuple[datetime, tuple[str, ...]] | None:
    if not _ISO_SHAPE.match(text):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise PhraseError(f"{text!r} is not a valid ISO time ({exc})") from None
    if moment.tzinfo is None:
        return _placed(moment.date(), TimeOfDay(moment.hour, moment.minute), zone,
                       second=moment.second)
    return moment.astimezone(zone), ()


def _ahead(at: datetime, now: datetime) -> datetime:
    """`at`, if it is still ahead of `now`; a time named explicitly is never moved."""
    if at <= now:
        raise PhraseError(f"{describe(at)} has already passed (it is now {describe(now)}); "
                          "name a time ahead")
    if at - now > _FURTHEST:
        raise PhraseError(f"{describe(at)} is more than ten years away; name a nearer time")
    return at


_DELAY_UNITS: dict[str, float] = {
    "second": 1, "sec": 1, "secs": 1, "s": 1, "segundo": 1,
    "minute": 60, "min": 60, "mins": 60, "minuto": 60,
    "hour": 3600, "hr": 3600, "hrs": 3600, "h": 3600, "hora": 3600,
    "day": 86400, "dia": 86400,
    "week": 7 * 86400, "semana": 7 * 86400,
}
_AMOUNTS = {"a": 1, "an": 1, "half an": 0.5, "half a": 0.5, "media": 0.5, "medio": 0.5}
_DELAY = re.compile(
    r"\b(?:in|en|dentro\s+de)\s+(?P<n>\d+(?:\.\d+)?|half\s+an?|an?|media|medio)\s+"
    r"(?P<unit>seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|segundos?|minutos?|"
    r"horas?|dias?|semanas?)\b(?:\s+(?:and\s+a\s+half|y\s+media))?"
)
_HALF = re.compile(r"\s+(?:and\s+a\s+half|y\s+media)\b")
_COMPACT_DELAY = re.compile(r"\b(?:in|en|dentro\s+de)\s+(?P<d>(?:\d+(?:\.\d+)?[smhd])+)\b")


@dataclass(frozen=True, slots=True)
class _Delay:
    seconds: float
    calendar_days: int = 0  # days and weeks keep the wall time


def _take_delay(text: str) -> tuple[_Delay | None, str]:
    match = _DELAY.search(text)
    if match:
        amount_word = " ".join(match.group("n").split())
        amount = _AMOUNTS[amount_word] if amount_word in _AMOUNTS else float(amount_word)
        unit = match.group("unit")
        unit = unit if unit in _DELAY_UNITS else unit.rstrip("s")
        if _HALF.search(match.group(0)):
            amount += 0.5
        seconds = amount * _DELAY_UNITS[unit]
        if not 0 < seconds <= _FURTHEST.total_seconds():
            raise PhraseError("a delay must be positive and at most ten years")
        if _DELAY_UNITS[unit] >= 86400 and float(amount).is_integer():
            return _Delay(0, int(seconds // 86400)), cut(text, match)
        return _Delay(seconds), cut(text, match)
    match = _COMPACT_DELAY.search(text)
    if match:
        return _Delay(parse_duration(match.group("d"))), cut(text, match)
    return None, text


def _after_delay(delay: _Delay, now: datetime) -> Resolved:
    zone = now.tzinfo
    assert zone is not None
    if delay.calendar_days:
        wall = now.replace(tzinfo=None) + timedelta(days=delay.calendar_days)
        at, notes = _placed(wall.date(), TimeOfDay(wall.hour, wall.minute), zone,
                            second=wall.second)
        return Resolved(at, tuple(notes))
    return Resolved(datetime.fromtimestamp(now.timestamp() + delay.seconds, zone))


_RELATIVE_DAYS = (
    (re.compile(r"\b(?:pasado\s+manana|the\s+day\s+after\s+tomorrow)\b"), 2),
    (re.compile(r"\b(?:manana|tomorrow)\b"), 1),
    (re.compile(r"\b(?:hoy|today)\b"), 0),
)
_WEEKDAY = re.compile(
    r"\b(?P<next>(?:next|this|coming|el\s+proximo|proximo|el\s+que\s+viene)\s+)?"
    rf"(?P<wd>{WEEKDAY_WORD})\b(?P<after>\s+(?:que\s+viene|proximo))?"
)
_YEAR = r"(?:\s*,?\s+(?:de\s+|del\s+)?(?P<y>\d{4}))?"
_DATE_PATTERNS = (
    re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+|de\s+)?(?P<mo>{MONTH_WORD})\b"
               + _YEAR),
    re.compile(rf"\b(?P<mo>{MONTH_WORD})\s+(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b"
               + _YEAR),
)


def _take_day(text: str, today: date) -> tuple[_Day | None, str]:
    for pattern, offset in _RELATIVE_DAYS:
        match = pattern.search(text)
        if match:
            return _Day(today + timedelta(days=offset)), cut(text, match)
    for pattern in _DATE_PATTERNS:
        match = pattern.search(text)
        if match:
            return _date(match, today), cut(text, match)
    match = _WEEKDAY.search(text)
    if match:
        wanted = WEEKDAYS[match.group("wd")]
        ahead = (wanted - today.weekday()) % 7 or 7  # never today: see the module's rules
        on = today + timedelta(days=ahead)
        notes = (("today is that weekday: the one a week from today is meant",)
                 if ahead == 7 else ())
        return _Day(on, notes=notes), cut(text, match)
    return None, text


def _date(match: re.Match[str], today: date) -> _Day:
    day, month = int(match.group("d")), MONTHS[match.group("mo")]
    year = int(match.group("y")) if match.group("y") else today.year
    try:
        on = date(year, month, day)
    except ValueError:
        raise PhraseError(f"{match.group(0)!r} is not a date in the calendar") from None
    return _Day(on, year_open=match.group("y") is None)


def _wall(on: date, clock: TimeOfDay, zone: tzinfo, notes: list[str], second: int = 0
          ) -> datetime:
    """The instant a wall time on a day names, by the rule for skipped and
    repeated wall times (notes say which applied)."""
    wall = datetime.combine(on, time(clock.hour, clock.minute, second), tzinfo=zone)
    # A round trip through UTC moves a skipped wall time forward by the jump
    # (fold=0 reads it with the offset before the change).
    real = datetime.fromtimestamp(wall.timestamp(), zone)
    if real.replace(tzinfo=None) != wall.replace(tzinfo=None):
        notes.append(f"{clock.hour:02d}:{clock.minute:02d} does not exist on {on:%d %B %Y} "
                     f"(the clocks jump forward): {real:%H:%M} is meant")
    elif wall.replace(fold=1).utcoffset() != wall.utcoffset():
        notes.append(f"{clock.hour:02d}:{clock.minute:02d} happens twice on {on:%d %B %Y} "
                     f"(the clocks go back): the first, {real.tzname()}, is meant")
    return real


def _placed(on: date, clock: TimeOfDay, zone: tzinfo, second: int = 0
            ) -> tuple[datetime, tuple[str, ...]]:
    notes: list[str] = []
    return _wall(on, clock, zone, notes, second), tuple(notes)
