"""Urgency rules: when an event must be seen, decided from the configuration.

A rule matches on the event's channel, sender and key (globs), a regular
expression searched in its text, and whether its sender is authorised; the
first rule whose conditions all hold decides. With no matching rule the
sensor's declared default applies. Classification is a pure function: no
clock, no I/O, a few microseconds per event.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..perception.events import Event, Urgency
from .settings import BusyMode, UrgencyRuleSettings

_NOT_A_RULE = -1


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
    """How urgent an event is and why; `rule` is its index, -1 for the sensor default."""

    urgency: Urgency
    bypass_stopped_sensor: bool = False
    rule: int = _NOT_A_RULE

    def __post_init__(self) -> None:
        if self.bypass_stopped_sensor and self.rule == _NOT_A_RULE:
            raise ValueError("only a rule can let an event bypass a stopped sensor")

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
        """The first matching rule's verdict, else the sensor's default urgency."""
        for index, rule in enumerate(self._rules):
            if rule.matches(event):
                return Verdict(rule.urgency, rule.bypass_stopped_sensor, index)
        return Verdict(default)


# A message the person types while the agent works, by the configured mode.
BUSY_MODE_URGENCY: dict[BusyMode, Urgency] = {
    "queue": Urgency.NORMAL,
    "priority": Urgency.PRIORITY,
    "urgent": Urgency.URGENT,
}
