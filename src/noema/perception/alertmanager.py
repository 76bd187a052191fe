"""Prometheus Alertmanager's webhook payload (version 4), and what each alert says.

Each alert becomes one state report keyed by its fingerprint, so an alert
that fires and then resolves is one value that changes, never two events
that pile up. The text carries the alert's own labels and annotations and
those its group shares, since that is all the model will read of it.
"""

from __future__ import annotations

from dataclasses import dataclass
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


def _pairs(labels: Labels) -> str:
    return ", ".join(f"{name}={value}" for name, value in sorted(labels.items()))


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
    return AlertReport(alert.fingerprint, "; ".join(parts), payload)


def reports(notification: Notification) -> list[AlertReport]:
    """One report per alert of the notification, in its order."""
    return [describe(alert, notification) for alert in notification.alerts]
