"""Perception settings from TOML."""

from __future__ import annotations

import tomllib

import pydantic
import pytest

from noema.perception.events import Urgency
from noema.perception.sensors import ClockSensor, FolderSensor, LogFileSensor, build_sensors
from noema.perception.settings import PerceptionSettings
from noema.perception.timefmt import format_duration, parse_duration

EXAMPLE = """
sandwich_k = 2
max_silence = "12h"

[clock]
long_silence = "2h30m"

[treatment]
quiet_gap = 8
max_hold = "2m"

[[logs]]
path = "/var/log/syslog"
window = "2m"
urgency = "priority"

[[logs]]
path = "/srv/app/app.log"
channel = "log.app"

[[folders]]
path = "/home/ana/inbox"
"""


def test_a_full_table_parses_with_durations_and_default_channels():
    s = PerceptionSettings.model_validate(tomllib.loads(EXAMPLE))
    assert s.clock.long_silence == 9000 and s.max_silence == 43200
    assert s.treatment.max_hold == 120 and s.treatment.quiet_gap == 8
    assert [log.channel_name for log in s.logs] == ["log.syslog", "log.app"]
    assert s.logs[0].window == 120 and s.logs[0].urgency is Urgency.PRIORITY
    assert s.folders[0].channel_name == "folder.inbox"
    sensors = build_sensors(s, last_exchange=lambda: None)
    assert [type(x) for x in sensors] == [ClockSensor, LogFileSensor, LogFileSensor,
                                          FolderSensor]
    assert sensors[1].info.default_urgency is Urgency.PRIORITY
    assert sensors[3].info.treatment.max_hold == 120


def test_defaults_need_no_table():
    s = PerceptionSettings()
    assert s.clock.enabled and s.logs == [] and s.sandwich_k == 3
    assert [x.info.channel for x in build_sensors(s, last_exchange=lambda: None)] == ["clock"]
    assert build_sensors(PerceptionSettings(enabled=False), last_exchange=lambda: None) == []


@pytest.mark.parametrize("table", [
    {"clok": {}},
    {"logs": [{"path": "/a", "windw": 3}]},
    {"clock": {"long_silence": "forever"}},
    {"clock": {"long_silence": -5}},
    {"logs": [{"path": "/a/x.log"}, {"path": "/b/x.log"}]},
    {"logs": [{"path": "/a", "channel": "Bad Name"}]},
    {"treatment": {"quiet_gap": 30, "max_hold": 10}},
    {"sandwich_k": 30, "treatment": {"hold": 5}},
    {"folders": [{"path": "/x", "urgency": "whenever"}]},
])
def test_mistakes_are_reported(table):
    with pytest.raises(pydantic.ValidationError):
        PerceptionSettings.model_validate(table)


@pytest.mark.parametrize("text, seconds", [
    ("90", 90), ("90s", 90), ("30m", 1800), ("1h30m", 5400), ("2d", 172800), ("1.5h", 5400),
    (45, 45), ("10 min", 600), ("2 hours 5 minutes", 7500),
])
def test_durations_are_read(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "soon", "5 parsecs", "0", -1, True, "3m later"])
def test_bad_durations_are_refused(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize("seconds, text", [
    (4.5, "4.5 s"), (0.99999, "1 s"), (9.96, "10 s"), (45, "45 s"), (59.97, "1 min"), (60, "1 min"), (309, "5 min 09 s"), (3600, "1 h"),
    (15120, "4 h 12 min"), (93600, "1 d 2 h"),
])
def test_durations_are_written_briefly(seconds, text):
    assert format_duration(seconds) == text
