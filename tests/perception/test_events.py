"""The event model refuses to build an invalid event."""

from __future__ import annotations

import dataclasses
import math

import pytest

from noema.perception.events import (
    Event,
    Nature,
    Payload,
    SensorInfo,
    TreatmentParams,
    Urgency,
)

from .conftest import T0, event


def test_create_fills_id_sender_and_times():
    e = Event.create("chat", "hola", received_at=T0)
    assert len(e.id) == 32 and e.sender == "chat"
    assert e.occurred_at == e.received_at == T0
    assert e.batch_id is None and e.batch_seq is None
    assert Event.create("chat", "x", received_at=T0).id != e.id


@pytest.mark.parametrize("channel", ["", "Chat", "9logs", "a b", "x" * 65, None])
def test_bad_channel_names_are_refused(channel):
    with pytest.raises(ValueError):
        event(channel=channel)


@pytest.mark.parametrize("when", [math.nan, math.inf, -1.0])
def test_timestamps_must_be_finite_and_not_negative(when):
    with pytest.raises(ValueError):
        event(at=when)


def test_timestamps_must_be_numbers():
    with pytest.raises(TypeError):
        Event("i", "chat", "ana", False, "yesterday", T0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Event("i", "chat", "ana", False, True, T0)  # a bool is not a time


def test_sender_and_authorised_are_checked():
    with pytest.raises(ValueError):
        Event("i", "chat", "", False, T0, T0)
    with pytest.raises(TypeError):
        Event("i", "chat", "ana", "yes", T0, T0)  # type: ignore[arg-type]


def test_batch_coordinates_come_together():
    with pytest.raises(ValueError):
        event(batch="b1")
    with pytest.raises(ValueError):
        event(seq=3)
    with pytest.raises(ValueError):
        event(batch="b1", seq=-1)
    assert event(batch="b1", seq=0).batch_seq == 0


def test_events_are_frozen():
    e = event()
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.text = "changed"  # type: ignore[misc]


def test_payload_is_deeply_read_only_and_round_trips():
    source = {"a": [1, {"b": "c"}], "d": None, "e": 1.5}
    e = event(payload=source)
    source["a"].append(99)  # the event kept its own copy
    assert e.payload.thaw() == {"a": [1, {"b": "c"}], "d": None, "e": 1.5}
    assert isinstance(e.payload["a"], tuple)
    with pytest.raises(TypeError):
        e.payload["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        e.payload["a"][1]["b"] = "z"
    assert e.payload.to_json() == '{"a":[1,{"b":"c"}],"d":null,"e":1.5}'
    assert e.payload == Payload(e.payload.thaw())
    assert hash(e.payload) == hash(Payload({"e": 1.5, "d": None, "a": [1, {"b": "c"}]}))
    assert e.payload != Payload(source)


@pytest.mark.parametrize("bad", [{"x": math.nan}, {"x": object()}, {1: "y"}, {"x": {2, 3}}])
def test_payload_must_be_json_data(bad):
    with pytest.raises((TypeError, ValueError)):
        event(payload=bad)


def test_payload_depth_is_bounded():
    deep: dict = {}
    cursor = deep
    for _ in range(30):
        cursor["n"] = {}
        cursor = cursor["n"]
    with pytest.raises(ValueError):
        Payload(deep)


def test_urgency_is_ordered():
    assert Urgency.NORMAL < Urgency.PRIORITY < Urgency.URGENT
    assert max(Urgency) is Urgency.URGENT
    assert sorted([Urgency.URGENT, Urgency.NORMAL, Urgency.PRIORITY]) == [
        Urgency.NORMAL, Urgency.PRIORITY, Urgency.URGENT]
    assert Urgency("priority") is Urgency.PRIORITY


def test_sensor_info_validates_and_normalises():
    info = SensorInfo("logs", "lines", "aggregatable", parameters={"path": "/x"},
                      default_urgency="urgent")  # type: ignore[arg-type]
    assert info.nature is Nature.AGGREGATABLE and info.default_urgency is Urgency.URGENT
    assert info.parameters["path"] == "/x"
    with pytest.raises(ValueError):
        SensorInfo("logs", "  ", Nature.DISCRETE)
    with pytest.raises(ValueError):
        SensorInfo("logs", "x", "sometimes")  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [
    {"window": 0}, {"quiet_gap": -1}, {"max_hold": math.inf}, {"hold": 0},
    {"quiet_gap": 10, "max_hold": 5},
])
def test_treatment_params_are_checked(kwargs):
    with pytest.raises(ValueError):
        TreatmentParams(**kwargs)
