"""The condensed packages the treatments hand over for delivery.

Each item accounts for every raw event it stands for: some are carried
whole, the rest are referenced by archive spans (batch, offsets, count), so
`item.count` always equals the number of raw events that went in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .events import Event, Nature


@dataclass(frozen=True, slots=True)
class GapSpan:
    """Events left out of a package, findable in one archive batch.

    `first`..`last` are inclusive offsets inside the batch; they hold at
    least `count` events (more only if the batch interleaves events that
    went elsewhere). Events never archived have no batch and no offsets.
    """

    batch_id: str | None
    first: int | None
    last: int | None
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.count, int) or self.count < 1:
            raise ValueError("a gap holds at least one event")
        if self.batch_id is None:
            if self.first is not None or self.last is not None:
                raise ValueError("offsets exist only inside an archive batch")
        elif self.first is None or self.last is None or not 0 <= self.first <= self.last:
            raise ValueError("an archived gap needs offsets first <= last")
        elif self.last - self.first + 1 < self.count:
            raise ValueError("a gap cannot hold more events than its offsets span")


class Spans:
    """A growing set of gap spans, one per batch, in order of first appearance."""

    __slots__ = ("_by_batch",)

    def __init__(self) -> None:
        self._by_batch: dict[str | None, list] = {}

    def add(self, event: Event) -> None:
        span = self._by_batch.get(event.batch_id)
        if span is None:
            self._by_batch[event.batch_id] = [event.batch_seq, event.batch_seq, 1]
        else:
            seq = event.batch_seq
            if seq is not None:
                if seq < span[0]:
                    span[0] = seq
                if seq > span[1]:
                    span[1] = seq
            span[2] += 1

    def add_spans(self, spans: Iterable[GapSpan]) -> None:
        for gap in spans:
            span = self._by_batch.get(gap.batch_id)
            if span is None:
                self._by_batch[gap.batch_id] = [gap.first, gap.last, gap.count]
            else:
                if gap.first is not None:
                    span[0] = min(span[0], gap.first)
                    span[1] = max(span[1], gap.last)
                span[2] += gap.count

    @property
    def count(self) -> int:
        return sum(span[2] for span in self._by_batch.values())

    def freeze(self) -> tuple[GapSpan, ...]:
        return tuple(GapSpan(b, s[0], s[1], s[2]) for b, s in self._by_batch.items())


def spans_of(events: Iterable[Event], *extra: Iterable[GapSpan]) -> tuple[GapSpan, ...]:
    """The gap spans covering some events and some existing spans."""
    spans = Spans()
    for part in extra:
        spans.add_spans(part)
    for event in events:
        spans.add(event)
    return spans.freeze()


def _gap_total(spans: tuple[GapSpan, ...]) -> int:
    return sum(g.count for g in spans)


def _same_source(events: tuple[Event, ...], channel: str, sender: str) -> None:
    if not events:
        raise ValueError("a package carries at least one event")
    for event in events:
        if event.channel != channel or event.sender != sender:
            raise ValueError("every event of a package comes from its channel and sender")


@dataclass(frozen=True, slots=True)
class Discrete:
    """Unique facts from one source, in arrival order; a long run keeps its ends."""

    channel: str
    sender: str
    authorised: bool
    events: tuple[Event, ...]
    omitted: tuple[GapSpan, ...] = ()  # the middle of a run longer than the held ends

    nature = Nature.DISCRETE

    def __post_init__(self) -> None:
        _same_source(self.events, self.channel, self.sender)

    @property
    def count(self) -> int:
        return len(self.events) + _gap_total(self.omitted)


@dataclass(frozen=True, slots=True)
class Utterance:
    """Consecutive messages of one source merged into one block, each with its time."""

    channel: str
    sender: str
    authorised: bool
    messages: tuple[Event, ...]
    omitted: tuple[GapSpan, ...] = ()

    nature = Nature.MERGEABLE

    def __post_init__(self) -> None:
        _same_source(self.messages, self.channel, self.sender)

    @property
    def count(self) -> int:
        return len(self.messages) + _gap_total(self.omitted)


@dataclass(frozen=True, slots=True)
class Aggregate:
    """How many events of one key arrived in a window, with the first and latest."""

    channel: str
    key: str
    count: int
    opened_at: float  # when the first event of the window arrived
    closed_at: float  # when the window was drained
    first: Event
    latest: Event
    between: tuple[GapSpan, ...]  # everything but the first and the latest
    senders: tuple[str, ...]  # distinct senders, the first few
    authorised: bool  # every sender was authorised

    nature = Nature.AGGREGATABLE

    def __post_init__(self) -> None:
        if self.closed_at < self.opened_at:
            raise ValueError("a window cannot close before it opens")
        shown = 1 if self.first.id == self.latest.id else 2
        if self.count != shown + _gap_total(self.between):
            raise ValueError("an aggregate's count must equal its examples plus its gap")
        if not self.senders:
            raise ValueError("an aggregate names at least one sender")

    @property
    def window(self) -> float:
        """Seconds from the first arrival to the drain."""
        return self.closed_at - self.opened_at

    @property
    def rate_per_minute(self) -> float:
        """Events a minute over the window (a window under a second counts as one)."""
        return self.count * 60.0 / max(self.window, 1.0)


@dataclass(frozen=True, slots=True)
class StateValue:
    """The newest undelivered value of one key; older ones are only archived."""

    channel: str
    key: str
    value: Event
    superseded: tuple[GapSpan, ...] = ()

    nature = Nature.STATE

    def __post_init__(self) -> None:
        if self.value.channel != self.channel or self.value.key != self.key:
            raise ValueError("a state value belongs to its channel and key")

    @property
    def count(self) -> int:
        return 1 + _gap_total(self.superseded)


Item = Discrete | Utterance | Aggregate | StateValue
