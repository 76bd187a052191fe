"""The body's reflexes: how each nature of event is digested before delivery.

Pure code: no clock and no I/O. The caller passes `now` to every method, so
the orchestrator can keep one `Treatments` per urgency class and decide
itself when to drain. A buffer never loses an event: what it does not keep
in memory it references by archive spans, and every drained item accounts
for every event that went in (see `items`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from .events import Event, Nature, SensorInfo
from .items import Aggregate, Discrete, Item, Spans, StateValue, Utterance

_MAX_SENDERS_NAMED = 5


class UnknownChannel(LookupError):
    """An event or a request named a channel no sensor declared."""


def bucket_of(event: Event, nature: Nature) -> str:
    """The stream inside a channel that one package is made from.

    The archive keeps one batch per bucket, so a package's gap is one run of
    offsets in one batch.
    """
    if nature is Nature.AGGREGATABLE or nature is Nature.STATE:
        return "key:" + event.key
    return "from:" + event.sender


class _Run:
    """Events in order, holding the first and last `hold` in memory and spans for the middle."""

    __slots__ = ("first_at", "head", "hold", "last_at", "middle", "order", "tail")

    def __init__(self, hold: int, now: float, order: int) -> None:
        self.hold = hold
        self.head: list[Event] = []
        self.tail: deque[Event] = deque(maxlen=hold)
        self.middle = Spans()
        self.first_at = now
        self.last_at = now
        self.order = order

    def add(self, event: Event, now: float) -> None:
        self.last_at = now
        if len(self.head) < self.hold:
            self.head.append(event)
            return
        if len(self.tail) == self.hold:
            self.middle.add(self.tail[0])
        self.tail.append(event)

    def events(self) -> tuple[Event, ...]:
        return (*self.head, *self.tail)


class _Buffer:
    """What every buffer shares: `take` gives (arrival order, item) pairs."""

    __slots__ = ()

    def take(self, now: float, force: bool = False) -> list[tuple[int, Item]]:
        raise NotImplementedError

    def drain(self, now: float, force: bool = False) -> list[Item]:
        """Remove and return the deliverable packages, in order of first arrival."""
        return [item for _, item in sorted(self.take(now, force), key=lambda pair: pair[0])]


@dataclass(slots=True)
class DiscreteBuffer(_Buffer):
    """Pass-through: every event is ready at once, grouped per source."""

    hold: int = 20
    _runs: dict[tuple[str, str], _Run] = field(default_factory=dict)

    def add(self, event: Event, now: float, order: int = 0) -> None:
        source = (event.channel, event.sender)
        run = self._runs.get(source)
        if run is None:
            run = self._runs[source] = _Run(self.hold, now, order)
        run.add(event, now)

    def ready(self, now: float) -> bool:
        return bool(self._runs)

    def next_deadline(self) -> float | None:
        return min((r.first_at for r in self._runs.values()), default=None)

    def take(self, now: float, force: bool = False) -> list[tuple[int, Item]]:
        out: list[tuple[int, Item]] = []
        for (channel, sender), run in self._runs.items():
            events = run.events()
            out.append((run.order, Discrete(
                channel, sender, all(e.authorised for e in events), events, run.middle.freeze()
            )))
        self._runs.clear()
        return out

    def __len__(self) -> int:
        return len(self._runs)


@dataclass(slots=True)
class MergeBuffer(_Buffer):
    """Per source, messages concatenated in order until a quiet gap or the maximum hold."""

    quiet_gap: float = 5.0
    max_hold: float = 60.0
    hold: int = 20
    _runs: dict[tuple[str, str], _Run] = field(default_factory=dict)

    def add(self, event: Event, now: float, order: int = 0) -> None:
        source = (event.channel, event.sender)
        run = self._runs.get(source)
        if run is None:
            run = self._runs[source] = _Run(self.hold, now, order)
        run.add(event, now)

    def _deadline(self, run: _Run) -> float:
        return min(run.last_at + self.quiet_gap, run.first_at + self.max_hold)

    def ready(self, now: float) -> bool:
        return any(self._deadline(r) <= now for r in self._runs.values())

    def next_deadline(self) -> float | None:
        return min((self._deadline(r) for r in self._runs.values()), default=None)

    def take(self, now: float, force: bool = False) -> list[tuple[int, Item]]:
        out: list[tuple[int, Item]] = []
        for source, run in list(self._runs.items()):
            if force or self._deadline(run) <= now:
                events = run.events()
                out.append((run.order, Utterance(
                    source[0], source[1], all(e.authorised for e in events), events,
                    run.middle.freeze(),
                )))
                del self._runs[source]
        return out

    def __len__(self) -> int:
        return len(self._runs)


class _Tally:
    __slots__ = (
        "authorised",
        "between",
        "count",
        "first",
        "latest",
        "opened_at",
        "order",
        "senders",
    )

    def __init__(self, event: Event, now: float, order: int) -> None:
        self.first = event
        self.latest = event
        self.count = 1
        self.opened_at = now
        self.between = Spans()
        self.senders = [event.sender]
        self.authorised = event.authorised
        self.order = order

    def add(self, event: Event) -> None:
        if self.latest is not self.first:
            self.between.add(self.latest)
        self.latest = event
        self.count += 1
        self.authorised = self.authorised and event.authorised
        if len(self.senders) < _MAX_SENDERS_NAMED and event.sender not in self.senders:
            self.senders.append(event.sender)


@dataclass(slots=True)
class AggregateBuffer(_Buffer):
    """Per key, a count over a window opened by the key's first event."""

    window: float = 300.0
    _tallies: dict[tuple[str, str], _Tally] = field(default_factory=dict)

    def add(self, event: Event, now: float, order: int = 0) -> None:
        source = (event.channel, event.key)
        tally = self._tallies.get(source)
        if tally is None:
            self._tallies[source] = _Tally(event, now, order)
        else:
            tally.add(event)

    def ready(self, now: float) -> bool:
        return any(t.opened_at + self.window <= now for t in self._tallies.values())

    def next_deadline(self) -> float | None:
        return min((t.opened_at + self.window for t in self._tallies.values()), default=None)

    def take(self, now: float, force: bool = False) -> list[tuple[int, Item]]:
        out: list[tuple[int, Item]] = []
        for source, t in list(self._tallies.items()):
            if force or t.opened_at + self.window <= now:
                out.append((t.order, Aggregate(
                    source[0], source[1], t.count, t.opened_at, max(now, t.opened_at),
                    t.first, t.latest, t.between.freeze(), tuple(t.senders), t.authorised,
                )))
                del self._tallies[source]
        return out

    def __len__(self) -> int:
        return len(self._tallies)


@dataclass(slots=True)
class StateBuffer(_Buffer):
    """Per key, only the newest undelivered value; older ones become archive spans."""

    _values: dict[tuple[str, str], tuple[int, float, Event, Spans]] = field(default_factory=dict)

    def add(self, event: Event, now: float, order: int = 0) -> None:
        source = (event.channel, event.key)
        held = self._values.get(source)
        if held is None:
            self._values[source] = (order, now, event, Spans())
        else:
            held[3].add(held[2])
            self._values[source] = (held[0], held[1], event, held[3])

    def ready(self, now: float) -> bool:
        return bool(self._values)

    def next_deadline(self) -> float | None:
        return min((v[1] for v in self._values.values()), default=None)

    def take(self, now: float, force: bool = False) -> list[tuple[int, Item]]:
        out: list[tuple[int, Item]] = [
            (order, StateValue(channel, key, value, older.freeze()))
            for (channel, key), (order, _, value, older) in self._values.items()
        ]
        self._values.clear()
        return out

    def __len__(self) -> int:
        return len(self._values)


Buffer = DiscreteBuffer | MergeBuffer | AggregateBuffer | StateBuffer


class Treatments:
    """Routes each event to the buffer of its sensor's nature and drains them together.

    One buffer per (nature, treatment parameters), so sensors with different
    windows or gaps keep their own timing.
    """

    def __init__(self, catalogue: Mapping[str, SensorInfo]) -> None:
        self._catalogue = catalogue
        self._buffers: dict[tuple, Buffer] = {}
        self._routes: dict[str, tuple[SensorInfo, Buffer]] = {}
        self._arrivals = 0

    def _buffer_for(self, info: SensorInfo) -> Buffer:
        p = info.treatment
        nature = info.nature
        if nature is Nature.AGGREGATABLE:
            slot: tuple = (nature, p.window)
        elif nature is Nature.MERGEABLE:
            slot = (nature, p.quiet_gap, p.max_hold, p.hold)
        elif nature is Nature.DISCRETE:
            slot = (nature, p.hold)
        else:
            slot = (nature,)
        buffer = self._buffers.get(slot)
        if buffer is None:
            buffer = self._buffers[slot] = _BUILD[nature](p)
        return buffer

    def add(self, event: Event, now: float) -> None:
        """Take in one event (already archived or not) that passed the gate."""
        info = self._catalogue.get(event.channel)
        if info is None:
            raise UnknownChannel(f"no sensor declares the channel {event.channel!r}")
        route = self._routes.get(event.channel)
        if route is None or route[0] is not info:
            route = self._routes[event.channel] = (info, self._buffer_for(info))
        self._arrivals += 1
        route[1].add(event, now, self._arrivals)

    def ready(self, now: float) -> bool:
        """Whether some package can be delivered now without forcing."""
        return any(b.ready(now) for b in self._buffers.values())

    def next_deadline(self) -> float | None:
        """The earliest time something pending becomes deliverable (may be past)."""
        return min(
            (d for b in self._buffers.values() if (d := b.next_deadline()) is not None),
            default=None,
        )

    def drain(self, now: float, force: bool = False) -> list[Item]:
        """Remove and return the deliverable packages in order of first arrival.

        With `force`, everything pending is packaged, ready or not.
        """
        drained: list[tuple[int, Item]] = []
        for buffer in self._buffers.values():
            drained.extend(buffer.take(now, force))
        drained.sort(key=lambda pair: pair[0])
        return [item for _, item in drained]

    def pending(self) -> int:
        """How many packages are waiting (sources, keys or utterances)."""
        return sum(len(b) for b in self._buffers.values())


_BUILD = {
    Nature.DISCRETE: lambda p: DiscreteBuffer(hold=p.hold),
    Nature.MERGEABLE: lambda p: MergeBuffer(p.quiet_gap, p.max_hold, p.hold),
    Nature.AGGREGATABLE: lambda p: AggregateBuffer(p.window),
    Nature.STATE: lambda p: StateBuffer(),
}
