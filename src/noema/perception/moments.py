"""Past moments read from the model's words, for looking back in the archive.

The scheduler's grammar (`scheduling.phrases`) looks ahead; this one looks
back, and is small on purpose. Accepted, in English or Spanish:
- an ISO date or time, "2026-03-24" or "2026-03-24T09:30" (the agent's zone
  unless it names an offset);
- a day: "today", "yesterday", "hoy", "ayer", or a weekday, the last one
  before today ("tuesday", "last tuesday", "el martes", "el martes pasado");
- a time ago: "2h", "90 minutes ago", "3 days ago", "hace 2 horas".

A day stands for its start as `since` and for its end as `until`, so the
same words in both give the whole day.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, tzinfo

from ..scheduling.words import WEEKDAYS, normalise
from .timefmt import parse_duration

_SPANISH_UNITS = {"segundos": "s", "segundo": "s", "minutos": "m", "minuto": "m",
                  "horas": "h", "hora": "h", "dias": "d", "dia": "d", "semanas": "w",
                  "semana": "w"}
_WEEKDAY = re.compile(r"^(?:last |el )?(" + "|".join(WEEKDAYS) + r")(?: pasado)?$")
_HELP = ("write an ISO date or time (2026-03-24, 2026-03-24T09:30), today, yesterday, "
         "a weekday (last tuesday, el martes), or a time ago (2h, 3 days ago, hace 2 horas)")


def read_moment(text: str, now: float, zone: tzinfo, *, end_of_day: bool) -> float:
    """Epoch seconds for a past moment in words; ValueError says what is accepted."""
    value = text.strip()
    try:
        day = _day(value, now, zone)
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a moment: {_HELP}") from None
    if isinstance(day, date):
        moment = datetime.combine(day, time.min, zone)
        if end_of_day:
            moment = datetime.combine(day + timedelta(days=1), time.min, zone)
            return moment.timestamp() - 1e-6
        return moment.timestamp()
    return day


def _day(value: str, now: float, zone: tzinfo) -> date | float:
    """A whole day, or an exact moment."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            return date.fromisoformat(value)
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=zone)
        return moment.timestamp()
    except ValueError:
        pass
    words = normalise(value)
    today = datetime.fromtimestamp(now, zone).date()
    if words in ("today", "hoy"):
        return today
    if words in ("yesterday", "ayer"):
        return today - timedelta(days=1)
    weekday = _WEEKDAY.match(words)
    if weekday:
        back = (today.weekday() - WEEKDAYS[weekday.group(1)]) % 7 or 7
        return today - timedelta(days=back)
    return now - _ago(words)


def _ago(words: str) -> float:
    """Seconds in "2h", "3 days ago", "hace 2 horas", "1 week ago"."""
    words = re.sub(r"^hace |\s+ago$", "", words)
    words = re.sub(r"\b(" + "|".join(_SPANISH_UNITS) + r")\b",
                   lambda m: _SPANISH_UNITS[m.group(1)], words)
    weeks = re.fullmatch(r"(\d+)\s*(?:w|weeks?)", words)
    if weeks:
        return int(weeks.group(1)) * 7 * 86400.0
    return parse_duration(words)
