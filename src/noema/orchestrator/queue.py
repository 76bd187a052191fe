"""The prioritised queue: what waits to reach the model, by urgency class.

Events go through the treatments of their class (one `Treatments` per
class, so a normal aggregate window never holds back an urgent alert), and
each class's `Holdings` keeps the archive offsets every package stands for,
so a delivery can be recorded in the archive event by event. At a
delivery the priority and urgent classes are drained whole and the normal
class gives what is ripe; the person's messages wait beside them. A package
is ordered urgent > priority > normal, and by time within a class.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..perception.events import Event, SensorInfo, Urgency
from ..perception.items import Aggregate, Discrete, Item, StateValue, Utterance
from ..perception.pipeline import Holdings
from ..perception.treatments import Treatments
from .decisions import Entry, Package, PersonEntry, WorldEntry

# Classes drained whole at every delivery: they must be seen in the next cycle.
_FORCED = {Urgency.URGENT: True, Urgency.PRIORITY: True, Urgency.NORMAL: False}


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """What waits, for the status line: entries ready and packages still in treatment."""

    person: int
    ready: dict[Urgency, int]
    in_treatment: dict[Urgency, int]

    @property
    def events(self) -> int:
        return sum(self.ready.values()) + sum(self.in_treatment.values())


class PendingQueue:
    """Entries waiting for delivery; no clock: every call is given `now`."""

    def __init__(self, catalogue: Mapping[str, SensorInfo]) -> None:
        self._catalogue = catalogue
        self._treatments = {u: Treatments(catalogue) for u in Urgency}
        self._holdings = {u: Holdings() for u in Urgency}
        self._ready: list[Entry] = []
        self._seq = itertools.count(1)
        self._persons = 0  # the person's messages accepted so far
        self._epoch_of: dict[str, int] = {}  # event ID → messages accepted before it

    def knows(self, channel: str) -> bool:
        return channel in self._catalogue

    # -- in -------------------------------------------------------------------

    def add_person(self, turn_id: int, urgency: Urgency, at: float) -> PersonEntry:
        entry = PersonEntry(turn_id, urgency, at, next(self._seq), self._persons)
        self._persons += 1
        self._ready.append(entry)
        return entry

    def add_event(self, event: Event, urgency: Urgency, now: float) -> None:
        """Into the treatment of its class (UnknownChannel if no sensor declares it)."""
        self._treatments[urgency].add(event, now)
        self._holdings[urgency].add(event, self._catalogue[event.channel].nature)
        self._epoch_of[event.id] = self._persons

    def put_back(self, entries: Iterable[Entry]) -> None:
        """Entries handed over in a cycle that was then discarded: they wait again."""
        self._ready.extend(entries)

    # -- state ----------------------------------------------------------------

    def has_person(self) -> bool:
        return any(isinstance(e, PersonEntry) for e in self._ready)

    def world_ready(self, now: float) -> bool:
        """Whether some event can be delivered now (forced classes count as ripe)."""
        if any(isinstance(e, WorldEntry) for e in self._ready):
            return True
        return any(
            t.pending() > 0 if _FORCED[u] else t.ready(now) for u, t in self._treatments.items()
        )

    def urgent_waiting(self) -> bool:
        return self._treatments[Urgency.URGENT].pending() > 0 or any(
            e.urgency is Urgency.URGENT and isinstance(e, WorldEntry) for e in self._ready
        )

    def world_waiting(self) -> bool:
        """Whether any event waits at all, ripe or not."""
        return any(isinstance(e, WorldEntry) for e in self._ready) or any(
            t.pending() > 0 for t in self._treatments.values()
        )

    def next_ripening(self) -> float | None:
        """When the normal class next has something ripe (None: nothing in treatment)."""
        return self._treatments[Urgency.NORMAL].next_deadline()

    def counts(self) -> QueueCounts:
        ready = {u: 0 for u in Urgency}
        person = 0
        for entry in self._ready:
            if isinstance(entry, PersonEntry):
                person += 1
            else:
                ready[entry.urgency] += 1
        return QueueCounts(person, ready, {u: t.pending() for u, t in self._treatments.items()})

    # -- out ------------------------------------------------------------------

    def _epoch(self, item: Item) -> int:
        """Messages of the person that arrived before the newest event of `item`
        (the events it only counts went in before those it shows)."""
        epochs = [self._epoch_of.pop(e.id, 0) for e in _shown(item)]
        return max(epochs, default=self._persons)

    def _ripen(self, now: float, force_all: bool) -> None:
        for urgency, treatments in self._treatments.items():
            holdings = self._holdings[urgency]
            for item in treatments.drain(now, force=force_all or _FORCED[urgency]):
                self._ready.append(WorldEntry(item, urgency, next(self._seq),
                                              holdings.take(item), self._epoch(item)))
        if not any(t.pending() for t in self._treatments.values()):
            self._epoch_of.clear()  # what an aggregate counted and never showed

    def take(self, now: float) -> Package | None:
        """Everything deliverable now, as one ordered package (None if nothing)."""
        self._ripen(now, force_all=False)
        if not self._ready:
            return None
        entries, self._ready = self._ready, []
        return Package(tuple(sorted(entries, key=lambda e: e.sort_key)))

    def take_world(self, now: float) -> tuple[WorldEntry, ...]:
        """Every event waiting, ripe or not, for the model's own pool_event() call,
        but those that arrived after a message of the person that still waits:
        they come after it. The person's messages stay (they are admitted as
        the person's turns)."""
        self._ripen(now, force_all=True)
        waiting = [e.epoch for e in self._ready if isinstance(e, PersonEntry)]
        before = min(waiting, default=None)
        world = [e for e in self._ready if isinstance(e, WorldEntry)
                 and (before is None or e.epoch <= before)]
        taken = {id(e) for e in world}
        self._ready = [e for e in self._ready if id(e) not in taken]
        return tuple(sorted(world, key=lambda e: e.sort_key))


def _shown(item: Item) -> tuple[Event, ...]:
    """The events an item carries whole."""
    if isinstance(item, Discrete):
        return item.events
    if isinstance(item, Utterance):
        return item.messages
    if isinstance(item, Aggregate):
        return (item.first, item.latest)
    if isinstance(item, StateValue):
        return (item.value,)
    raise TypeError(f"not a perception item: {type(item).__name__}")
