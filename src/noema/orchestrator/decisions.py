"""What the orchestrator's core decides; the asyncio shell carries it out.

Decisions come out of `Reflexes.handle` in the order they must be performed.
A cancellation is followed, once the shell reports the cycle aborted, by a
`Deliver` and a `StartCycle`; `Deliver(notice=True)` means the cancellation
notice and the package go into the history in one transaction.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..perception.deliveries import Run
from ..perception.events import Urgency
from ..perception.items import Aggregate, Discrete, Item, StateValue, Utterance


class Origin(enum.StrEnum):
    """Who a cycle answers: the person, or the world on its own."""

    PERSON = "person"
    WORLD = "world"


class QueueReason(enum.StrEnum):
    """Why an entry waits instead of interrupting the cycle."""

    NORMAL = "normal events wait for the end of the cycle"
    UNSAFE = "a tool with side effects has run in this cycle"
    GUARD = "the cycle was cancelled too often: it is let finish"
    BUDGET = "the budget for cycles the world starts is spent"
    CANCELLING = "a cancellation is under way: it goes in the next package"
    IDLE = "the agent is idle and waits for the burst to end"
    HELD = "after a stop or a failure the agent waits for new input"
    RESTORING = "events from before the restart are being restored"


def item_time(item: Item) -> float:
    """When the oldest event an item shows was received (its place in time order)."""
    if isinstance(item, Discrete):
        return item.events[0].received_at
    if isinstance(item, Utterance):
        return item.messages[0].received_at
    if isinstance(item, Aggregate):
        return item.first.received_at
    if isinstance(item, StateValue):
        return item.value.received_at
    raise TypeError(f"not a perception item: {type(item).__name__}")


# A package is ordered by arrival around the person's messages first: an
# entry's `epoch` counts the person's messages that arrived before it (for an
# event item, before its newest event), so no event that came after a message
# of the person is delivered ahead of it, whatever its urgency; between two
# messages, urgent > priority > normal, then time. A message of the person is
# never made to look as if it answered words that came after it.
SortKey = tuple[int, int, int, float, int]


@dataclass(frozen=True, slots=True)
class PersonEntry:
    """A message of the person, stored and staged as turn `turn_id`; `epoch`
    is how many messages of the person arrived before it."""

    turn_id: int
    urgency: Urgency
    at: float
    seq: int
    epoch: int = 0

    @property
    def sort_key(self) -> SortKey:
        return (self.epoch, 1, -self.urgency.rank, self.at, self.seq)


@dataclass(frozen=True, slots=True)
class WorldEntry:
    """A package of treated events (one item) with its urgency class and the
    archive offsets of every raw event it stands for; `epoch` is how many
    messages of the person arrived before its newest event."""

    item: Item
    urgency: Urgency
    seq: int
    held: tuple[Run, ...] = ()
    epoch: int = 0

    @property
    def at(self) -> float:
        return item_time(self.item)

    @property
    def sort_key(self) -> SortKey:
        return (self.epoch, 0, -self.urgency.rank, self.at, self.seq)


Entry = PersonEntry | WorldEntry


@dataclass(frozen=True, slots=True)
class Package:
    """What is delivered to the model at once: in the order of arrival around
    the person's messages; between two of them, urgent first, then priority,
    then normal, in time order within a class."""

    entries: tuple[Entry, ...]

    def __post_init__(self) -> None:
        if not self.entries:
            raise ValueError("a package carries at least one entry")
        keys = [e.sort_key for e in self.entries]
        if keys != sorted(keys):
            raise ValueError("a package is ordered by arrival around the person's messages, "
                             "then by urgency class, then time")

    @property
    def person_turns(self) -> tuple[int, ...]:
        return tuple(e.turn_id for e in self.entries if isinstance(e, PersonEntry))

    @property
    def items(self) -> tuple[Item, ...]:
        return tuple(e.item for e in self.entries if isinstance(e, WorldEntry))

    @property
    def world(self) -> tuple[WorldEntry, ...]:
        return tuple(e for e in self.entries if isinstance(e, WorldEntry))

    @property
    def event_count(self) -> int:
        """Raw events the package accounts for (carried whole or by archive reference)."""
        return sum(item.count for item in self.items)

    @property
    def top(self) -> Urgency:
        return self.entries[0].urgency


@dataclass(frozen=True, slots=True)
class Cause:
    """What made the core cancel a cycle: the person or an event of a channel."""

    urgency: Urgency
    channel: str | None = None  # None: the person, at an interface
    sender: str | None = None

    def describe(self) -> str:
        """Completes "... because {cause}"."""
        if self.channel is None:
            return f"the person sent a new message ({self.urgency.value})"
        article = "an" if self.urgency is Urgency.URGENT else "a"
        return f"{article} {self.urgency.value} event arrived from {self.channel}"


# -- decisions ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartCycle:
    """Open cycle number `run` on the history as it now stands."""

    run: int
    origin: Origin


@dataclass(frozen=True, slots=True)
class Deliver:
    """Put a package at the end of the history: the person's staged messages are
    admitted, events go in a synthetic pool_event() call and its result. With
    `notice`, haveCurrentOperationsBeenCancelled() → true comes first, in the
    same transaction."""

    package: Package
    notice: bool = False


@dataclass(frozen=True, slots=True)
class HandOver:
    """The answer to the model's own pool_event() call: what is pending now, and
    the archive offsets of the raw events it stands for."""

    run: int
    items: tuple[Item, ...]
    held: tuple[Run, ...] = ()


@dataclass(frozen=True, slots=True)
class Queued:
    """An entry waits. `head`: ahead of normal entries (priority that could not
    cancel, or anything a guard held back)."""

    ref: str  # the event ID, or "turn:<id>" for a message of the person
    urgency: Urgency
    head: bool
    reason: QueueReason


@dataclass(frozen=True, slots=True)
class SafeCancel:
    """Abort the cycle; its response leaves the history (kept in the store,
    flagged discarded). Then report `CycleAborted`."""

    run: int
    cause: Cause


@dataclass(frozen=True, slots=True)
class UnsafeCancel:
    """Abort the cycle keeping what ran; answer every unfinished call with what
    happened to it. Then report `CycleAborted`."""

    run: int
    cause: Cause


@dataclass(frozen=True, slots=True)
class StopCycle:
    """The person stopped the cycle: abort it, keep what they saw, start nothing."""

    run: int


@dataclass(frozen=True, slots=True)
class KillTool:
    """Stop the tool running in the cycle (stored call turn `call`) now; a tool
    with side effects reports what it did through its ToolContext."""

    run: int
    call: int
    name: str
    side_effects: bool


@dataclass(frozen=True, slots=True)
class Dropped:
    """An event was refused: already seen, or from a channel no sensor declares."""

    event_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class WakeAt:
    """Send a `Tick` at this time (None: no wake-up is needed). Replaces the last one."""

    when: float | None


Decision = (
    StartCycle | Deliver | HandOver | Queued | SafeCancel | UnsafeCancel | StopCycle | KillTool
    | Dropped | WakeAt
)
