"""What the core knows of the cycle in flight, and the status it reports.

The record is the core's own bookkeeping (fed by the cycle's inputs); the
views are frozen copies for displays, so no caller can change the core.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .decisions import Origin, WorldEntry
from .queue import QueueCounts


class Phase(enum.StrEnum):
    IDLE = "idle"  # no cycle; entries may wait (quiet window, budget, hold)
    RUNNING = "running"  # a cycle is in flight
    CANCELLING = "cancelling"  # the shell is aborting the cycle as decided


class Safety(enum.StrEnum):
    SAFE = "safe"  # no tool with side effects has started in this cycle
    UNSAFE = "unsafe"


@dataclass(frozen=True, slots=True)
class RunningTool:
    call: int
    name: str
    side_effects: bool


@dataclass(slots=True)
class CycleRecord:
    """What the core knows of the cycle in flight."""

    run: int
    origin: Origin
    started_at: float
    step: int = 0
    chunks: int = 0
    tools_started: int = 0
    side_effects_started: int = 0
    last_confirmed_action: str | None = None
    running: RunningTool | None = None
    # Entries given to the model's own pool_event(): `handing` until the call's
    # result is stored, then `handed`. An abort puts back what was not stored.
    handing: list[WorldEntry] = field(default_factory=list)
    handed: list[WorldEntry] = field(default_factory=list)

    @property
    def safety(self) -> Safety:
        return Safety.UNSAFE if self.side_effects_started else Safety.SAFE


@dataclass(frozen=True, slots=True)
class CycleView:
    """A read-only copy of the cycle record, for status displays."""

    run: int
    origin: Origin
    started_at: float
    step: int
    chunks: int
    tools_started: int
    side_effects_started: int
    last_confirmed_action: str | None
    running_tool: str | None
    safety: Safety


@dataclass(frozen=True, slots=True)
class ReflexStatus:
    """Everything a status line needs about the reflexes."""

    phase: Phase
    cycle: CycleView | None
    waiting: QueueCounts
    held: bool  # entries wait for new input after a stop or a failure
    guard_engaged: bool
    world_tokens_spent: int
    world_tokens_per_hour: int | None
    world_budget_exhausted: bool
    world_budget_frees_at: float | None
    wake_at: float | None
