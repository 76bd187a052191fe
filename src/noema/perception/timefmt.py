"""How durations and instants are written for the model and read from it."""

from __future__ import annotations

import math
import re
from datetime import datetime, tzinfo

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(
    r"(\d+(?:\.\d+)?)\s*(seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)(?![a-z])",
    re.I,
)


def parse_duration(value: str | float | int) -> float:
    """Seconds from a number of seconds or text like "90s", "30m", "1h30m", "2d".

    Raises ValueError for anything else, or for a duration that is not positive.
    """
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text like '30m'")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = value.strip().lower()
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        else:
            parts = _DURATION.findall(text)
            if not parts or _DURATION.sub("", text).strip():
                raise ValueError(
                    f"cannot read {value!r} as a duration: use seconds or text like "
                    "'90s', '30m', '1h30m', '2d'"
                )
            seconds = sum(float(n) * _UNITS[u[0].lower()] for n, u in parts)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError("a duration must be a positive number of seconds")
    return seconds


def format_duration(seconds: float) -> str:
    """A short human duration: "45 s", "5 min 09 s", "4 h 12 min", "3 d 2 h"."""
    seconds = max(0.0, seconds)
    if seconds < 59.95:
        # Decided on the tenths shown, so that a second computed a hair short
        # reads "1 s" like the exact one.
        tenths = round(seconds, 1)
        exact = tenths >= 10 or tenths == int(tenths)
        return f"{seconds:.0f} s" if exact else f"{tenths:.1f} s"
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes:02d} min" if minutes else f"{hours} h"
    return f"{minutes} min {secs:02d} s" if secs else f"{minutes} min"


def clock_time(when: float, tz: tzinfo) -> str:
    """HH:MM:SS of an instant in the given zone."""
    return datetime.fromtimestamp(when, tz).strftime("%H:%M:%S")


def stamp(when: float, reference: float, tz: tzinfo) -> str:
    """HH:MM:SS, with the date in front when it is not the reference instant's day."""
    moment = datetime.fromtimestamp(when, tz)
    if moment.date() == datetime.fromtimestamp(reference, tz).date():
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def full_time(when: float, tz: tzinfo) -> str:
    """Weekday, date and time with the zone's name, e.g. "Sun 2026-03-29 23:00:00 UTC"."""
    return datetime.fromtimestamp(when, tz).strftime("%a %Y-%m-%d %H:%M:%S %Z").strip()
