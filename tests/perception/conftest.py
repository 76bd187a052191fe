"""Shared builders for perception tests: events, catalogues, a clock."""

from __future__ import annotations

import itertools

import pytest

from noema.perception.clock import ManualClock
from noema.perception.events import Event, Nature, SensorInfo, TreatmentParams

T0 = 1_774_825_200.0
_ids = itertools.count()

CATALOGUE = {
    "logs": SensorInfo("logs", "log lines", Nature.AGGREGATABLE,
                       treatment=TreatmentParams(window=60.0)),
    "chat": SensorInfo("chat", "chat messages", Nature.MERGEABLE,
                       treatment=TreatmentParams(quiet_gap=5.0, max_hold=30.0, hold=2)),
    "files": SensorInfo("files", "file changes", Nature.DISCRETE,
                        treatment=TreatmentParams(hold=2)),
    "mail": SensorInfo("mail", "unread count", Nature.STATE),
    "user": SensorInfo("user", "the person at the terminal", Nature.DISCRETE,
                       can_silence=False),
}


def event(
    channel: str = "files",
    text: str = "something happened",
    *,
    at: float = T0,
    sender: str | None = None,
    key: str = "",
    authorised: bool = False,
    batch: str | None = None,
    seq: int | None = None,
    payload: dict | None = None,
) -> Event:
    """An event with a readable, unique ID."""
    return Event(
        id=f"e{next(_ids)}", channel=channel, sender=sender or channel, authorised=authorised,
        occurred_at=at, received_at=at, key=key, text=text, payload=payload or {},
        batch_id=batch, batch_seq=seq,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)
