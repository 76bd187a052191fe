"""Urgency rules, their settings, and the guards' bookkeeping."""

from __future__ import annotations

import pydantic
import pytest

from noema.orchestrator.guards import EventRegistry, ProgressGuard, WorldBudget
from noema.orchestrator.settings import ReflexSettings, UrgencyRuleSettings
from noema.orchestrator.urgency import UrgencyRule, UrgencyRules, Verdict, urgency_hint
from noema.perception.events import Event, Urgency

from .conftest import event


def rules(*specs: dict) -> UrgencyRules:
    return UrgencyRules.from_settings([UrgencyRuleSettings.model_validate(s) for s in specs])


def test_the_first_matching_rule_wins_and_sensors_give_the_default():
    r = rules(
        {"channel": "logs", "text": r"(?i)\bpanic\b", "urgency": "urgent",
         "bypass_stopped_sensor": True},
        {"channel": "logs", "urgency": "normal"},
        {"channel": "tele*", "sender": "@ana", "authorised": True, "urgency": "priority"},
    )
    assert r.classify(event("logs", "kernel PANIC now")) == Verdict(Urgency.URGENT, True, 0)
    assert r.classify(event("logs", "disk fine"), Urgency.PRIORITY) == Verdict(
        Urgency.NORMAL, False, 1)  # a rule may lower a sensor's default
    ana = event("telegram", "hi", sender="@ana", authorised=True)
    assert r.classify(ana).urgency is Urgency.PRIORITY
    impostor = event("telegram", "hi", sender="@ana", authorised=False)
    verdict = r.classify(impostor, Urgency.NORMAL)
    assert verdict == Verdict(Urgency.NORMAL) and not verdict.from_rule


def hinted(channel: str, hint: object, **more) -> Event:
    plain = event(channel, "backup failed", **more)
    return Event(id=plain.id, channel=plain.channel, sender=plain.sender,
                 authorised=plain.authorised, occurred_at=plain.occurred_at,
                 received_at=plain.received_at, text=plain.text,
                 payload={"channel": "backups", "urgency_hint": hint})


def test_an_events_hint_replaces_the_sensors_default_unless_a_rule_decides():
    r = rules({"channel": "webhook", "sender": "noisy", "urgency": "normal"},
              {"channel": "webhook", "text": "disk", "urgency": "urgent"})
    assert r.classify(hinted("webhook", "urgent")) == Verdict(Urgency.URGENT, hinted=True)
    lowered = r.classify(hinted("pager", "normal"), Urgency.URGENT)
    assert lowered == Verdict(Urgency.NORMAL, hinted=True)  # lower than the default, too
    ignored = r.classify(hinted("webhook", "urgent", sender="noisy"))
    assert ignored == Verdict(Urgency.NORMAL, rule=0) and not ignored.hinted
    for nonsense in ("panic", 3, None, {"level": "urgent"}):
        verdict = r.classify(hinted("webhook", nonsense), Urgency.PRIORITY)
        assert verdict == Verdict(Urgency.PRIORITY) and not verdict.hinted
    assert urgency_hint(event("webhook")) is None
    with pytest.raises(ValueError):
        Verdict(Urgency.URGENT, rule=0, hinted=True)


def test_globs_match_whole_names_and_keys():
    r = rules({"key": "disk.*", "urgency": "priority"})
    assert r.classify(event("alerts", key="disk.full")).urgency is Urgency.PRIORITY
    assert r.classify(event("alerts", key="my.disk.full")).urgency is Urgency.NORMAL


def test_a_rule_needs_a_condition_and_a_valid_pattern():
    with pytest.raises(pydantic.ValidationError, match="at least one"):
        UrgencyRuleSettings(urgency="urgent")
    with pytest.raises(pydantic.ValidationError, match="regular expression"):
        UrgencyRuleSettings(text="(unclosed", urgency="urgent")
    with pytest.raises(pydantic.ValidationError, match="only for priority and urgent"):
        UrgencyRuleSettings(channel="logs", urgency="normal", bypass_stopped_sensor=True)
    with pytest.raises(pydantic.ValidationError, match="extra"):
        UrgencyRuleSettings.model_validate({"channel": "x", "urgency": "urgent", "chanel": "y"})
    with pytest.raises(ValueError):
        UrgencyRule(Urgency.NORMAL, bypass_stopped_sensor=True)
    with pytest.raises(ValueError):
        Verdict(Urgency.URGENT, bypass_stopped_sensor=True)  # only a rule can bypass


def test_settings_have_the_documented_defaults_and_refuse_nonsense():
    s = ReflexSettings()
    assert s.message_while_busy == "priority"
    assert s.progress.max_cancellations >= 1 and s.world_tokens_per_hour
    with pytest.raises(pydantic.ValidationError):
        ReflexSettings(message_while_busy="later")
    with pytest.raises(pydantic.ValidationError, match="idle_max_wait_s"):
        ReflexSettings(idle_quiet_window_s=10, idle_max_wait_s=5)
    parsed = ReflexSettings.model_validate(
        {"rules": [{"channel": "pager", "urgency": "urgent"}],
         "progress": {"max_cancellations": 5, "window_s": 30}, "world_tokens_per_hour": None}
    )
    assert parsed.rules[0].urgency == "urgent" and parsed.world_tokens_per_hour is None


def test_the_registry_refuses_repeats_and_stays_bounded():
    registry = EventRegistry(capacity=3)
    assert registry.admit("a") and not registry.admit("a")
    for name in "bcd":
        assert registry.admit(name)
    assert len(registry) == 3 and "a" not in registry and "d" in registry


def test_the_progress_guard_counts_inside_its_window():
    guard = ProgressGuard(2, 10.0)
    guard.record(0.0)
    guard.record(5.0)
    assert guard.engaged(9.0)
    assert not guard.engaged(10.0)  # the first left the window
    guard.reset()
    assert guard.recent(10.0) == 0


def test_the_world_budget_slides_over_the_hour():
    budget = WorldBudget(1000)
    budget.charge(0.0, 600)
    budget.charge(100.0, 600)
    assert budget.exhausted(200.0) and budget.spent(200.0) == 1200
    assert budget.frees_at(200.0) == 3600.0  # when the first charge leaves the hour
    assert not budget.exhausted(3600.0) and budget.spent(3600.0) == 600
    assert WorldBudget(None).exhausted(0.0) is False
    zero = WorldBudget(0)
    assert zero.exhausted(0.0) and zero.frees_at(0.0) is None
