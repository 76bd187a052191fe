"""Settings of the orchestrator's reflexes: urgency rules and guards.

The TOML shape (the section name is the composition root's choice):

    [reflexes]
    message_while_busy = "priority"    # queue | priority | urgent
    idle_quiet_window_s = 2.0          # an idle agent waits this long for a burst to end
    idle_max_wait_s = 20.0             # ...but never longer than this
    world_tokens_per_hour = 200000     # cycles the world starts; omit for no limit, 0 for none

    [reflexes.progress]
    max_cancellations = 3              # this many cancellations...
    window_s = 60.0                    # ...within this window let the cycle finish

    [[reflexes.rules]]                 # first matching rule wins; sensors give defaults
    channel = "logs"                   # glob on the channel
    text = "(?i)\\b(panic|out of memory)\\b"   # regex searched in the event text
    urgency = "urgent"
    bypass_stopped_sensor = true       # reaches the model even if it silenced "logs"

    [[reflexes.rules]]
    channel = "telegram"
    sender = "@ana*"                   # glob on the sender
    authorised = true                  # only senders the person authorised
    urgency = "priority"

Every field of a rule but `urgency` and `bypass_stopped_sensor` is a
condition; a rule needs at least one, and all of its conditions must hold.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

UrgencyName = Literal["normal", "priority", "urgent"]
BusyMode = Literal["queue", "priority", "urgent"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)


class UrgencyRuleSettings(_Section):
    """One urgency rule as written in the configuration."""

    channel: str | None = Field(None, description="glob on the event's channel")
    sender: str | None = Field(None, description="glob on the event's sender")
    key: str | None = Field(None, description="glob on the event's key")
    text: str | None = Field(None, description="regular expression searched in the text")
    authorised: bool | None = Field(None, description="match only (un)authorised senders")
    urgency: UrgencyName
    bypass_stopped_sensor: bool = Field(
        False, description="deliver even when the model silenced the sensor"
    )

    @field_validator("text")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"{value!r} is not a valid regular expression: {exc}") from None
        return value

    @field_validator("channel", "sender", "key")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("a pattern cannot be empty; leave the key out to match anything")
        return value

    @model_validator(mode="after")
    def _has_a_condition(self) -> UrgencyRuleSettings:
        if all(
            getattr(self, name) is None
            for name in ("channel", "sender", "key", "text", "authorised")
        ):
            raise ValueError(
                "a rule needs at least one of channel, sender, key, text or authorised "
                "(a rule that matches everything would hide the sensors' defaults)"
            )
        if self.bypass_stopped_sensor and self.urgency == "normal":
            raise ValueError(
                "bypass_stopped_sensor is only for priority and urgent rules: a normal event "
                "has no reason to reach a model that silenced its sensor"
            )
        return self


class ProgressGuardSettings(_Section):
    """How many cancellations a cycle tolerates before it is let finish."""

    max_cancellations: int = Field(3, ge=1, le=100)
    window_s: float = Field(60.0, gt=0, le=86_400)


class ReflexSettings(_Section):
    """The orchestrator's reflexes: urgency rules and the guards around them."""

    rules: tuple[UrgencyRuleSettings, ...] = ()
    message_while_busy: BusyMode = Field(
        "priority", description="urgency of a message the person types while the agent works"
    )
    idle_quiet_window_s: float = Field(2.0, ge=0, le=3_600)
    idle_max_wait_s: float = Field(20.0, ge=0, le=86_400)
    world_tokens_per_hour: int | None = Field(
        200_000, ge=0, description="token budget of cycles the world starts; None: unlimited"
    )
    progress: ProgressGuardSettings = ProgressGuardSettings()

    @model_validator(mode="after")
    def _wait_bounds(self) -> ReflexSettings:
        if self.idle_max_wait_s < self.idle_quiet_window_s:
            raise ValueError("idle_max_wait_s must be at least idle_quiet_window_s")
        return self
