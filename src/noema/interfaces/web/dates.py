"""Dates and times as every page shows them: one format ("7 Dec 2026, 19:52"),
in the person's time zone (`[agent] timezone`, else the machine's own).

The page's scripts format the times they receive with the same format and
zone (`noema.when` in common.js reads the zone from the page's body), so a
time reads the same whether the server or the browser wrote it.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from markupsafe import Markup, escape


def zone_named(name: str | None) -> ZoneInfo | None:
    """The zone `name` names (None: the machine's own, as for an unknown name)."""
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def moment(ts: float, zone: ZoneInfo | None) -> datetime:
    """A Unix time as a date and time in `zone` (None: the machine's zone)."""
    return datetime.fromtimestamp(ts, zone) if zone is not None else \
        datetime.fromtimestamp(ts).astimezone()


def when_text(ts: float, zone: ZoneInfo | None) -> str:
    """`7 Dec 2026, 19:52`: the one way the pages write a date and time."""
    at = moment(ts, zone)
    return f"{at.day} {at:%b %Y, %H:%M}"


def clock_text(ts: float, zone: ZoneInfo | None) -> str:
    """`19:52`: a time of today, in the same zone."""
    return f"{moment(ts, zone):%H:%M}"


def when_html(ts: float | None, zone: ZoneInfo | None) -> Markup:
    """A `<time>` element holding `when_text`, its machine-readable moment beside it."""
    if ts is None:
        return Markup("")
    at = moment(ts, zone)
    return Markup('<time datetime="{}">{}</time>').format(
        escape(at.isoformat(timespec="seconds")), when_text(ts, zone))


__all__ = ["clock_text", "moment", "when_html", "when_text", "zone_named"]
