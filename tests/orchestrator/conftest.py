"""Builders shared by the orchestrator tests: sensors, events, a core."""

from __future__ import annotations

import itertools

import pytest

from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.orchestrator.core import Reflexes
from noema.orchestrator.settings import ReflexSettings
from noema.perception.events import Event, Nature, SensorInfo, TreatmentParams, Urgency

T0 = 1_774_825_200.0
_ids = itertools.count(1)

CATALOGUE = {
    "alerts": SensorInfo("alerts", "alerts from monitoring", Nature.DISCRETE),
    "logs": SensorInfo("logs", "log lines", Nature.AGGREGATABLE,
                       treatment=TreatmentParams(window=60.0)),
    "chat": SensorInfo("chat", "chat messages", Nature.MERGEABLE,
                       treatment=TreatmentParams(quiet_gap=5.0, max_hold=30.0)),
    "mail": SensorInfo("mail", "unread mail count", Nature.STATE),
    "pager": SensorInfo("pager", "the on-call pager", Nature.DISCRETE,
                        default_urgency=Urgency.URGENT, can_silence=False),
}


def event(channel: str = "alerts", text: str = "something happened", *, at: float = T0,
          sender: str | None = None, key: str = "", authorised: bool = False) -> Event:
    """An event with a readable, unique ID."""
    return Event(id=f"e{next(_ids)}", channel=channel, sender=sender or channel,
                 authorised=authorised, occurred_at=at, received_at=at, key=key, text=text)


def reflexes(**settings: object) -> Reflexes:
    """A core over the test catalogue; quiet windows off unless asked for."""
    defaults: dict[str, object] = {"idle_quiet_window_s": 0.0, "idle_max_wait_s": 0.0,
                                   "world_tokens_per_hour": None}
    defaults.update(settings)
    return Reflexes(CATALOGUE, ReflexSettings.model_validate(defaults))


@pytest.fixture
def store(tmp_path):
    s = TurnStore(tmp_path / "turns.db")
    yield s
    s.close()


@pytest.fixture
def session(store):
    return Session.load(store)
