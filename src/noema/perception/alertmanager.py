"""Prometheus Alertmanager's webhook payload (version 4), and what each alert says.

Each alert becomes one state report keyed by its fingerprint, so an alert
that fires and then resolves is one value that changes, never two events
that pile up. The text carries the alert's own labels and annotations and
those its group shares, since that is all the model will read of it.

Order is decided by the alert's own times, not by when a notification
arrives: Alertmanager retries and may deliver an old "firing" after the
"resolved" that followed it. `AlertClock` remembers, per fingerprint, the
time of the newest state seen (a resolved alert's `endsAt`, a firing one's
`startsAt` or `updatedAt`) and drops a report older than it.

A notification of many alerts (a whole cluster failing at once) is condensed
into one report for its group: counts by status and by name, the first few
alerts named, the rest left in the archive's payload. Each alert's text is
bounded too, so no notification can fill the model's context.
"""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Labels = dict[str, str]


class _Lenient(BaseModel):
    # Alertmanager adds fields between releases: unknown ones are ignored, not refused.
    model_config = ConfigDict(extra="ignore", frozen=True)


class Alert(_Lenient):
    """One alert of a notification."""

    status: Literal["firing", "resolved"]
    labels: Labels = {}
    annotations: Labels = {}
    startsAt: str = ""  # noqa: N815 (Alertmanager's field names)
    endsAt: str = ""  # noqa: N815
    updatedAt: str = ""  # noqa: N815 (sent by some relays; not by Alertmanager itself)
    generatorURL: str = ""  # noqa: N815
    fingerprint: str = Field(min_length=1, max_length=256)


class Notification(_Lenient):
    """One webhook notification: a group of alerts."""

    version: Literal["4"]
    status: Literal["firing", "resolved"]
    receiver: str = ""
    groupKey: str = ""  # noqa: N815
    truncatedAlerts: int = 0  # noqa: N815
    groupLabels: Labels = {}  # noqa: N815
    commonLabels: Labels = {}  # noqa: N815
    commonAnnotations: Labels = {}  # noqa: N815
    externalURL: str = ""  # noqa: N815
    alerts: list[Alert] = Field(min_length=1, max_length=1000)


@dataclass(frozen=True, slots=True)
class AlertReport:
    """What one alert becomes: an event's key, text and payload."""

    key: str
    text: str
    payload: dict[str, Any]


MAX_SEPARATE = 10  # a notification of more alerts is condensed into one report
NAMED_IN_SUMMARY = 5  # alerts a condensed report describes
ALERT_TEXT_CHARS = 1200  # the most one alert's text may take
SUMMARY_LINE_CHARS = 160  # one alert's line inside a condensed report
REMEMBERED = 10_000  # fingerprints whose newest time is kept


def _pairs(labels: Labels) -> str:
    return ", ".join(f"{name}={value}" for name, value in sorted(labels.items()))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def instant(text: str) -> datetime | None:
    """An RFC 3339 time as Alertmanager writes it (nanoseconds allowed); None when
    absent, unreadable or Go's zero time (an alert still firing has that endsAt)."""
    if not text or text.startswith("0001-01-01"):
        return None
    head, dot, rest = text.partition(".")
    if dot:  # Python reads at most six fraction digits: cut the rest, keep the zone
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[:min(digits, 6)]}{rest[digits:]}"
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def as_of(alert: Alert) -> datetime | None:
    """The time the alert's state is from: resolved at `endsAt`, firing since
    `startsAt` (or `updatedAt`, whichever is later)."""
    if alert.status == "resolved":
        return instant(alert.endsAt)
    times = [t for t in (instant(alert.startsAt), instant(alert.updatedAt)) if t is not None]
    return max(times) if times else None


class AlertClock:
    """The newest state time seen per fingerprint, to drop reports older than it.

    Held in memory (the newest `REMEMBERED` fingerprints): after a restart the
    first report of each alert is taken as it comes.
    """

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._seen: OrderedDict[str, tuple[datetime, str]] = OrderedDict()
        self._remembered = remembered

    def fresh(self, alert: Alert) -> bool:
        """Whether `alert` is not older than what was seen of it; if so, it is now the newest.

        A report without a readable time cannot be placed and is taken. At the
        same instant "resolved" wins: an alert cannot fire again before it ended.
        """
        moment = as_of(alert)
        if moment is None:
            return True
        known = self._seen.get(alert.fingerprint)
        if known is not None:
            seen_at, seen_status = known
            if moment < seen_at or (moment == seen_at and seen_status == "resolved"
                                    and alert.status == "firing"):
                return False
        self._seen[alert.fingerprint] = (moment, alert.status)
        self._seen.move_to_end(alert.fingerprint)
        while len(self._seen) > self._remembered:
            self._seen.popitem(last=False)
        return True


def describe(alert: Alert, group: Notification) -> AlertReport:
    """The alert as the model reads it: status, name, what it says, then its labels
    and its group's."""
    name = alert.labels.get("alertname", "alert")
    said = alert.annotations.get("summary") or alert.annotations.get("description") or ""
    parts = [f"{alert.status.upper()}: {name}" + (f" — {said}" if said else "")]
    own = {k: v for k, v in alert.labels.items() if k != "alertname"}
    if own:
        parts.append(f"labels: {_pairs(own)}")
    others = {k: v for k, v in alert.annotations.items() if v != said}
    if others:
        parts.append(f"annotations: {_pairs(others)}")
    if group.groupLabels:
        parts.append(f"group: {_pairs(group.groupLabels)}")
    if group.commonAnnotations:
        parts.append(f"group annotations: {_pairs(group.commonAnnotations)}")
    if alert.status == "resolved" and alert.endsAt:
        parts.append(f"resolved at {alert.endsAt}")
    elif alert.startsAt:
        parts.append(f"since {alert.startsAt}")
    payload = {
        "status": alert.status, "labels": alert.labels, "annotations": alert.annotations,
        "startsAt": alert.startsAt, "endsAt": alert.endsAt,
        "generatorURL": alert.generatorURL, "fingerprint": alert.fingerprint,
        "groupLabels": group.groupLabels, "commonLabels": group.commonLabels,
        "commonAnnotations": group.commonAnnotations, "externalURL": group.externalURL,
        "receiver": group.receiver,
    }
    return AlertReport(alert.fingerprint, _cut("; ".join(parts), ALERT_TEXT_CHARS), payload)


def _line(alert: Alert) -> str:
    name = alert.labels.get("alertname", "alert")
    said = alert.annotations.get("summary") or alert.annotations.get("description") or ""
    own = {k: v for k, v in alert.labels.items() if k != "alertname"}
    text = f"{alert.status.upper()}: {name}" + (f" — {said}" if said else "")
    return _cut(text + (f" ({_pairs(own)})" if own else ""), SUMMARY_LINE_CHARS)


def condensed(alerts: list[Alert], group: Notification) -> AlertReport:
    """Many alerts of one group as one report: counts, the first few named.

    Keyed by the group, so a later notification of the same group replaces it.
    """
    statuses = Counter(a.status for a in alerts)
    names = Counter(a.labels.get("alertname", "alert") for a in alerts)
    counts = ", ".join(f"{statuses[s]} {s}" for s in ("firing", "resolved") if statuses[s])
    by_name = ", ".join(f"{_cut(n, 80)} ×{c}" for n, c in names.most_common(NAMED_IN_SUMMARY))
    if len(names) > NAMED_IN_SUMMARY:
        by_name += f", and {len(names) - NAMED_IN_SUMMARY} other names"
    where = f" in group {_cut(_pairs(group.groupLabels), 200)}" if group.groupLabels else ""
    parts = [f"{len(alerts)} alerts{where}: {counts}", f"by name: {by_name}"]
    if group.truncatedAlerts:
        parts.append(f"Alertmanager left out {group.truncatedAlerts} more")
    shown = alerts[:NAMED_IN_SUMMARY]
    parts.append(f"the first {len(shown)} below, the other {len(alerts) - len(shown)} in this"
                 " event's archived data")
    parts.append("first: " + " | ".join(_line(a) for a in shown))
    digest = hashlib.sha256((group.groupKey or _pairs(group.groupLabels)).encode()).hexdigest()
    payload = {
        "condensed": True, "groupKey": group.groupKey, "groupLabels": group.groupLabels,
        "receiver": group.receiver, "externalURL": group.externalURL,
        "counts": dict(statuses), "names": dict(names),
        "alerts": [{"fingerprint": a.fingerprint, "status": a.status,
                    "alertname": a.labels.get("alertname", ""), "startsAt": a.startsAt,
                    "endsAt": a.endsAt} for a in alerts],
    }
    return AlertReport(f"group {digest[:16]}", "; ".join(parts), payload)


def reports(notification: Notification, clock: AlertClock | None = None
            ) -> tuple[list[AlertReport], int]:
    """What the notification says that is news, and how many of its alerts were
    older than what `clock` had seen (dropped).

    Up to `MAX_SEPARATE` alerts are one report each, in their order; more are
    one condensed report for their group.
    """
    alerts = list(notification.alerts)
    fresh = [a for a in alerts if clock is None or clock.fresh(a)]
    stale = len(alerts) - len(fresh)
    if len(fresh) > MAX_SEPARATE:
        return [condensed(fresh, notification)], stale
    return [describe(alert, notification) for alert in fresh], stale
