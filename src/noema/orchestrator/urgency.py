"""Urgency rules: when an event must be seen, decided from the configuration.

A rule matches on the event's channel, sender and key (globs), a regular
expression searched in its text, and whether its sender is authorised; the
first rule whose conditions all hold decides. With no matching rule the
event's own urgency hint applies, if it carries one, else the sensor's
declared default. Classification is a pure function: no clock, no I/O, a few
microseconds per event.

**Hints.** A sensor whose source says how urgent its message is (a script
posting to the webhook, say) passes that on as the payload's `urgency_hint`:
it replaces the sensor's default for that one event, higher or lower, and
the person's rules still come first, so a rule can ignore it. The hint is
as trustworthy as the sensor makes it: a sensor that takes hints from
outside caps them (the webhook holds an outside sender's hint to
`[webhook] outside_urgency_max`, `priority` unless the person says
otherwise, so a stranger cannot make its own message urgent). A hint that
is not an urgency's name is ignored.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..perception.events import Event, Urgency
from .settings import BusyMode, UrgencyRuleSettings

_NOT_A_RULE = -1
HINT_FIELD = "urgency_hint"  # the payload field that carries a source's own urgency


@dataclass(frozen=True, slots=True)
class UrgencyRule:
    """A compiled rule; `None` conditions match anything."""

    urgency: Urgency
    channel: re.Pattern[str] | None = None
    sender: re.Pattern[str] | None = None
    key: re.Pattern[str] | None = None
    text: re.Pattern[str] | None = None
    authorised: bool | None = None
    bypass_stopped_sensor: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.urgency, Urgency):
            raise TypeError("a rule's urgency must be an Urgency")
        if self.bypass_stopped_sensor and self.urgency is Urgency.NORMAL:
            raise ValueError("only priority and urgent rules may bypass a stopped sensor")

    @classmethod
    def from_settings(cls, settings: UrgencyRuleSettings) -> UrgencyRule:
        return cls(
            urgency=Urgency(settings.urgency),
            channel=_glob(settings.channel),
            sender=_glob(settings.sender),
            key=_glob(settings.key),
            text=re.compile(settings.text) if settings.text is not None else None,
            authorised=settings.authorised,
            bypass_stopped_sensor=settings.bypass_stopped_sensor,
        )

    def matches(self, event: Event) -> bool:
        """Whether every condition of the rule holds for the event."""
        return (
            (self.channel is None or self.channel.fullmatch(event.channel) is not None)
            and (self.sender is None or self.sender.fullmatch(event.sender) is not None)
            and (self.key is None or self.key.fullmatch(event.key) is not None)
            and (self.authorised is None or self.authorised is event.authorised)
            and (self.text is None or self.text.search(event.text) is not None)
        )


def _glob(pattern: str | None) -> re.Pattern[str] | None:
    # Globs are compiled once: fnmatch would recompile (or cache-miss) per event.
    return re.compile(fnmatch.translate(pattern)) if pattern is not None else None


@dataclass(frozen=True, slots=True)
class Verdict:
    """How urgent an event is and why: `rule` is the deciding rule's index (-1
    for none); with no rule, `hinted` says the event's own hint decided, not
    the sensor's default."""

    urgency: Urgency
    bypass_stopped_sensor: bool = False
    rule: int = _NOT_A_RULE
    hinted: bool = False

    def __post_init__(self) -> None:
        if self.bypass_stopped_sensor and self.rule == _NOT_A_RULE:
            raise ValueError("only a rule can let an event bypass a stopped sensor")
        if self.hinted and self.rule != _NOT_A_RULE:
            raise ValueError("a rule decided, so the hint did not")

    @property
    def from_rule(self) -> bool:
        return self.rule != _NOT_A_RULE


class UrgencyRules:
    """The configured rules, in order of precedence."""

    def __init__(self, rules: Sequence[UrgencyRule] = ()) -> None:
        self._rules = tuple(rules)

    @classmethod
    def from_settings(cls, rules: Sequence[UrgencyRuleSettings]) -> UrgencyRules:
        return cls([UrgencyRule.from_settings(r) for r in rules])

    def __len__(self) -> int:
        return len(self._rules)

    def classify(self, event: Event, default: Urgency = Urgency.NORMAL) -> Verdict:
        """The first matching rule's verdict, else the event's own hint, else the
        sensor's default urgency."""
        for index, rule in enumerate(self._rules):
            if rule.matches(event):
                return Verdict(rule.urgency, rule.bypass_stopped_sensor, index)
        hint = urgency_hint(event)
        if hint is not None:
            return Verdict(hint, hinted=True)
        return Verdict(default)


def urgency_hint(event: Event) -> Urgency | None:
    """The urgency the event's source asked for, if it carries a valid one."""
    value = event.payload.get(HINT_FIELD)
    if not isinstance(value, str):
        return None
    try:
        return Urgency(value)
    except ValueError:
        return None


# A message the person types while the agent works, by the configured mode.
BUSY_MODE_URGENCY: dict[BusyMode, Urgency] = {
    "queue": Urgency.NORMAL,
    "priority": Urgency.PRIORITY,
    "urgent": Urgency.URGENT,
}
