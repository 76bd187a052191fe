"""Alertmanager's payload read by the alert's own times, and condensed when large:
pure logic, no server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from noema.perception.alertmanager import (
    ALERT_TEXT_CHARS, MAX_SEPARATE, Alert, AlertClock, Notification, as_of, instant, reports,
)

BASE = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def stamp(minutes: int) -> str:
    return (BASE + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.123456789Z")


def report(status: str, minutes: int, fingerprint: str = "f1") -> Alert:
    if status == "firing":
        return Alert(status="firing", fingerprint=fingerprint, startsAt=stamp(minutes),
                     endsAt="0001-01-01T00:00:00Z")
    return Alert(status="resolved", fingerprint=fingerprint, startsAt=stamp(minutes - 1),
                 endsAt=stamp(minutes))


def test_times_are_read_as_alertmanager_writes_them():
    assert instant("2026-11-30T10:00:00.123456789Z") == BASE.replace(microsecond=123456)
    assert instant("2026-11-30T12:00:00+02:00") == BASE
    assert instant("0001-01-01T00:00:00Z") is None and instant("") is None
    assert instant("yesterday") is None and instant("2026-11-30T10:00:00") is None  # no zone
    firing = Alert(status="firing", fingerprint="f", startsAt=stamp(0), updatedAt=stamp(5))
    assert as_of(firing) == instant(stamp(5))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["firing", "resolved"]), st.integers(0, 50)),
                min_size=1, max_size=12), st.randoms())
def test_whatever_the_arrival_order_the_newest_state_is_the_one_kept(history, rng):
    """Deliver one alert's reports in any order: the last one taken is the
    newest by its own time (resolved winning a tie), never a late old one."""
    arrivals = list(history)
    rng.shuffle(arrivals)
    clock = AlertClock()
    taken = [(status, minutes) for status, minutes in arrivals
             if clock.fresh(report(status, minutes))]
    newest = max(history, key=lambda r: (r[1], r[0] == "resolved"))
    assert taken[-1] == newest
    assert [m for _, m in taken] == sorted(m for _, m in taken)  # never backwards in time


def test_a_report_without_a_readable_time_is_taken_as_it_comes():
    clock = AlertClock()
    assert clock.fresh(report("resolved", 10))
    assert clock.fresh(Alert(status="firing", fingerprint="f1", startsAt="soon"))


def test_the_clock_forgets_the_oldest_fingerprints_past_its_bound():
    clock = AlertClock(remembered=2)
    for fingerprint in ("a", "b", "c"):
        assert clock.fresh(report("resolved", 10, fingerprint))
    assert clock.fresh(report("firing", 1, "a"))  # forgotten: taken
    assert not clock.fresh(report("firing", 1, "c"))


def notification(alerts: list[dict]) -> Notification:
    return Notification.model_validate({"version": "4", "status": "firing", "alerts": alerts,
                                        "groupKey": "g", "groupLabels": {"job": "node"}})


def test_up_to_the_bound_each_alert_is_its_own_report_and_beyond_one_summary():
    few = notification([{"status": "firing", "fingerprint": f"f{n}",
                         "labels": {"alertname": "Up"}} for n in range(MAX_SEPARATE)])
    found, stale = reports(few, AlertClock())
    assert [r.key for r in found] == [f"f{n}" for n in range(MAX_SEPARATE)] and stale == 0
    many = notification([{"status": "resolved" if n % 4 == 0 else "firing",
                          "fingerprint": f"f{n}", "labels": {"alertname": f"A{n % 7}"}}
                         for n in range(MAX_SEPARATE + 1)])
    (summary,), _ = reports(many, AlertClock())
    assert summary.key.startswith("group ")
    assert "11 alerts in group job=node: 8 firing, 3 resolved" in summary.text
    assert "and 2 other names" in summary.text


def test_one_alert_s_text_is_bounded():
    huge = notification([{"status": "firing", "fingerprint": "f",
                          "labels": {"alertname": "X", "blob": "y" * 50_000}}])
    (only,), _ = reports(huge)
    assert len(only.text) <= ALERT_TEXT_CHARS and only.text.endswith("…")
