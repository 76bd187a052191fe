"""What the orchestrator's core is told: everything that happens to the agent.

Each input carries `at`, seconds since the epoch on the shell's clock: the
core has no clock of its own. Inputs about a cycle name its `run`, the number
the core gave it in `StartCycle`, so a late report about a cycle that is
gone is caught instead of being applied to the next one.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from ..perception.events import Event, Urgency


def _check_at(at: object) -> None:
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at) or at < 0:
        raise ValueError("`at` must be a finite, non-negative number of seconds")


def _check_run(run: object) -> None:
    if isinstance(run, bool) or not isinstance(run, int) or run < 1:
        raise ValueError("a run number is a positive integer given by the core")


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer")


class Outcome(enum.StrEnum):
    """How a cycle that was not cancelled ended."""

    ANSWERED = "answered"
    STEP_LIMIT = "step_limit"
    REPEATING = "repeating"  # stopped: the model kept making the same call
    NO_PROGRESS = "no_progress"  # stopped: its calls changed only in details, their results not
    FAILED = "failed"  # the provider failed or a bug of ours: nothing follows on its own


# -- the person -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PersonMessage:
    """The person typed a message; it is already stored (staged) as turn `turn_id`."""

    turn_id: int
    at: float

    def __post_init__(self) -> None:
        _check_count("turn_id", self.turn_id)
        _check_at(self.at)


@dataclass(frozen=True, slots=True)
class PersonStop:
    """The person asked to stop (/stop, Ctrl-C, the stop button)."""

    at: float

    def __post_init__(self) -> None:
        _check_at(self.at)


# -- the world ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Perceived:
    """A sensor event that passed the gate, with the urgency its rules gave it."""

    event: Event
    urgency: Urgency
    at: float

    def __post_init__(self) -> None:
        if not isinstance(self.event, Event):
            raise TypeError("Perceived carries an Event")
        if not isinstance(self.urgency, Urgency):
            raise TypeError("Perceived carries an Urgency")
        _check_at(self.at)


@dataclass(frozen=True, slots=True)
class RestoreBegun:
    """Events from before a restart are about to be fed again (as `Perceived`):
    until `RestoreDone`, nothing starts a cycle, so they all go in one package."""

    at: float

    def __post_init__(self) -> None:
        _check_at(self.at)


@dataclass(frozen=True, slots=True)
class RestoreDone:
    """Every event from before the restart has been fed again."""

    at: float

    def __post_init__(self) -> None:
        _check_at(self.at)


@dataclass(frozen=True, slots=True)
class Resume:
    """On start: the person's last question was cut short by a shutdown or a
    crash and never answered. A cycle answers it over the history as it
    stands, unless something the person wrote since starts one anyway."""

    at: float

    def __post_init__(self) -> None:
        _check_at(self.at)


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: the wake-up the core asked for with `WakeAt`, or any later one."""

    at: float

    def __post_init__(self) -> None:
        _check_at(self.at)


# -- the running cycle ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepStarted:
    """The cycle sent a request to the model."""

    run: int
    step: int
    at: float

    def __post_init__(self) -> None:
        _check_run(self.run)
        _check_count("step", self.step)
        _check_at(self.at)


@dataclass(frozen=True, slots=True)
class ModelChunk:
    """A piece of the model's answer arrived."""

    run: int
    at: float

    def __post_init__(self) -> None:
        _check_run(self.run)
        _check_at(self.at)


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A checked tool call (stored as turn `call`) is about to run."""

    run: int
    call: int
    name: str
    side_effects: bool
    at: float

    def __post_init__(self) -> None:
        _check_run(self.run)
        _check_count("call", self.call)
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a tool has a name")
        if not isinstance(self.side_effects, bool):
            raise TypeError("side_effects must be a bool")
        _check_at(self.at)


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """The running tool returned and its result is stored; `ok` unless it reported an error."""

    run: int
    call: int
    ok: bool
    at: float

    def __post_init__(self) -> None:
        _check_run(self.run)
        _check_count("call", self.call)
        if not isinstance(self.ok, bool):
            raise TypeError("ok must be a bool")
        _check_at(self.at)


@dataclass(frozen=True, slots=True)
class Polled:
    """The model itself called pool_event(): it wants what is pending now."""

    run: int
    at: float

    def __post_init__(self) -> None:
        _check_run(self.run)
        _check_at(self.at)


@dataclass(frozen=True, slots=True)
class CycleEnded:
    """The cycle ran to its end; `tokens` it spent in all (input and output)."""

    run: int
    outcome: Outcome
    tokens: int
    at: float

    def __post_init__(self) -> None:
        _check_run(self.run)
        if not isinstance(self.outcome, Outcome):
            raise TypeError("outcome must be an Outcome")
        _check_count("tokens", self.tokens)
        _check_at(self.at)


@dataclass(frozen=True, slots=True)
class CycleAborted:
    """The shell carried out the cancellation the core decided; the history is repaired."""

    run: int
    tokens: int
    at: float

    def __post_init__(self) -> None:
        _check_run(self.run)
        _check_count("tokens", self.tokens)
        _check_at(self.at)


Input = (
    PersonMessage | PersonStop | Perceived | RestoreBegun | RestoreDone | Resume | Tick
    | StepStarted | ModelChunk | ToolStarted | ToolFinished | Polled | CycleEnded | CycleAborted
)
