"""Stopping and starting channels on a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.perception.gate import CannotSilence, Gate
from noema.perception.stats import ChannelStats
from noema.perception.treatments import UnknownChannel

from .conftest import CATALOGUE, T0


def test_a_stopped_channel_reopens_by_itself_when_the_duration_ends():
    gate = Gate(CATALOGUE)
    until = gate.stop(["logs", "chat"], 600, T0)
    assert until == T0 + 600
    assert not gate.admit("logs", T0 + 599.9) and not gate.is_open("chat", T0 + 599.9)
    assert gate.admit("files", T0 + 10)  # other channels are untouched
    state = gate.state("logs", T0 + 100)
    assert not state.open and state.dropped == 1 and state.time_left(T0 + 100) == 500
    assert gate.admit("logs", T0 + 600) and gate.is_open("chat", T0 + 600)
    assert gate.state("logs", T0 + 700).open


def test_start_reopens_at_once_and_reports_which_were_closed():
    gate = Gate(CATALOGUE)
    gate.stop(["logs"], 600, T0)
    assert gate.start(["logs", "chat"], T0 + 60) == ["logs"]
    assert gate.admit("logs", T0 + 61)
    assert gate.start(["logs"], T0 + 62) == []


def test_stopping_again_sets_a_new_end_and_keeps_counting():
    gate = Gate(CATALOGUE)
    gate.stop(["logs"], 600, T0)
    gate.admit("logs", T0 + 1)
    gate.stop(["logs"], 60, T0 + 100)
    state = gate.state("logs", T0 + 100)
    assert state.until == T0 + 160 and state.dropped == 1


def test_silences_are_capped():
    gate = Gate(CATALOGUE, max_silence=3600)
    assert gate.stop(["logs"], 10 * 86400, T0) == T0 + 3600


def test_refusals_change_nothing():
    gate = Gate(CATALOGUE)
    with pytest.raises(CannotSilence):
        gate.stop(["logs", "user"], 60, T0)
    with pytest.raises(UnknownChannel):
        gate.stop(["logs", "telegram"], 60, T0)
    with pytest.raises(ValueError):
        gate.stop(["logs"], 0, T0)
    assert gate.is_open("logs", T0 + 1)
    with pytest.raises(UnknownChannel):
        gate.start(["nowhere"], T0)


def test_a_rule_may_bypass_a_closed_gate():
    gate = Gate(CATALOGUE)
    gate.stop(["logs"], 60, T0)
    assert gate.admit("logs", T0 + 1, bypass=True)
    assert not gate.admit("logs", T0 + 2)
    state = gate.state("logs", T0 + 3)
    assert (state.bypassed, state.dropped) == (1, 1)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["stop", "start", "tick"]), st.integers(1, 900)),
                max_size=30))
def test_the_gate_is_closed_exactly_until_the_latest_end(ops):
    gate = Gate(CATALOGUE)
    now, closed_until = T0, None
    for op, amount in ops:
        if op == "stop":
            closed_until = gate.stop(["logs"], amount, now)
        elif op == "start":
            gate.start(["logs"], now)
            closed_until = None
        else:
            now += amount
        expected_open = closed_until is None or now >= closed_until
        assert gate.is_open("logs", now) == expected_open


def test_stats_count_windows_and_rates():
    stats = ChannelStats((60.0, 300.0))
    for second in range(600):  # one event a second for ten minutes, the last 100 s dropped
        stats.record("logs", T0 + second, dropped=second >= 500)
    counts = stats.counts("logs", T0 + 599)
    assert (counts.received, counts.dropped, counts.last_at) == (600, 100, T0 + 599)
    one, five = counts.windows
    assert (one.received, one.dropped, one.per_minute) == (60, 60, 60.0)
    assert (five.received, five.dropped) == (300, 100)
    later = stats.counts("logs", T0 + 899)
    assert later.windows[1].received == 0 and later.received == 600
    assert stats.counts("chat", T0).windows[0].received == 0
