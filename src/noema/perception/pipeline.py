"""Gate → archive → treatments, composed.

The pipeline is the whole of perception's bookkeeping for one agent: the
catalogue of declared sensors, the gate, the recent counts, the archive and
one `Treatments`. The orchestrator shell may use it whole (`ingest`, then
`drain` when it wants to deliver), or call `admit` and keep its own
treatments per urgency class, recording what it delivers with
`open_deliveries` and `settle`. It has no clock of its own: `now` comes
with every call.

`Holdings` keeps, beside a `Treatments`, exactly which archived events each
pending package stands for, so a delivery records the offsets it carried
even when a package's gap is not one run (a stream split between urgency
classes, events replayed after a restart).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .archive import SILENCED_BUCKET, SensoryArchive
from .deliveries import Run
from .events import Event, Nature, SensorInfo
from .gate import DEFAULT_MAX_SILENCE, Gate, GateState
from .items import Aggregate, Discrete, Item, StateValue
from .stats import ChannelCounts, ChannelStats
from .treatments import Treatments, UnknownChannel, bucket_of


class HoldingsMismatch(RuntimeError):
    """A package accounts for other events than its group received: our bug."""


def item_bucket(item: Item) -> str:
    """The bucket (see `bucket_of`) of the events an item was made from."""
    if isinstance(item, (Aggregate, StateValue)):
        return "key:" + item.key
    return "from:" + item.sender


class _Held:
    __slots__ = ("count", "runs")

    def __init__(self) -> None:
        self.count = 0
        self.runs = array("q")  # flat (batch, first, last) triples, in arrival order


class Holdings:
    """Which archived events each pending package holds, by offset runs.

    A treatment packs every pending event of one group (a channel and its
    bucket) into one item when it drains it, so the group's runs are exactly
    what the item carries. Consecutive offsets of a batch share one run, so
    a burst costs a few numbers however long it is.
    """

    __slots__ = ("_groups",)

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], _Held] = {}

    def add(self, event: Event, nature: Nature) -> None:
        """Count an event handed to the treatments."""
        group = (event.channel, bucket_of(event, nature))
        held = self._groups.get(group)
        if held is None:
            held = self._groups[group] = _Held()
        held.count += 1
        if event.batch_id is None or event.batch_seq is None:
            return  # never archived: nothing to record
        # Batch IDs come from the archive ("b42"): the number is read without a regex.
        batch, seq, runs = int(event.batch_id[1:]), event.batch_seq, held.runs
        if runs and runs[-3] == batch and runs[-1] + 1 == seq:
            runs[-1] = seq
        else:
            runs.extend((batch, seq, seq))

    def take(self, item: Item) -> tuple[Run, ...]:
        """The runs of a drained item; HoldingsMismatch if the counts disagree."""
        held = self._groups.pop((item.channel, item_bucket(item)), None)
        count = 0 if held is None else held.count
        if count != item.count:
            raise HoldingsMismatch(
                f"a package of {item.channel} stands for {item.count} events, its group "
                f"received {count}"
            )
        runs = held.runs if held is not None else array("q")
        return tuple(
            (runs[i], runs[i + 1], runs[i + 2]) for i in range(0, len(runs), 3))

    def __len__(self) -> int:
        return len(self._groups)


@dataclass(frozen=True, slots=True)
class Parcel:
    """Items about to reach the model in one pool_event result, and the archived
    events they stand for; `token` is the call ID of that pool_event call."""

    token: str
    items: tuple[Item, ...]
    runs: tuple[Run, ...]


@dataclass(frozen=True, slots=True)
class ChannelStatus:
    """A channel as `sensor_status` reports it."""

    info: SensorInfo
    gate: GateState
    counts: ChannelCounts
    silenced_batch: str | None  # where the events dropped in this silence are archived


class Pipeline:
    """Perception's state for one agent; every method takes `now`."""

    def __init__(
        self,
        archive: SensoryArchive,
        sensors: Iterable[SensorInfo] = (),
        *,
        max_silence: float = DEFAULT_MAX_SILENCE,
    ) -> None:
        self.archive = archive
        self.catalogue: dict[str, SensorInfo] = {}
        self.gate = Gate(self.catalogue, max_silence=max_silence)
        self.stats = ChannelStats()
        self.treatments = Treatments(self.catalogue)
        self.holdings = Holdings()
        self._silenced: set[str] = set()  # channels with an open batch of dropped events
        for info in sensors:
            self.register(info)

    def register(self, info: SensorInfo) -> None:
        """Declare a sensor; re-declaring a channel replaces its declaration.

        The archive keeps the declaration, so the channel's events can still
        be delivered after a restart without it (see `restore_channel`).
        """
        self.catalogue[info.channel] = info
        self.archive.remember_channel(info)

    def restore_channel(self, info: SensorInfo) -> None:
        """Declare a channel known only from the archive: its events from before a
        restart are still to deliver, but no sensor reports on it any more."""
        self.catalogue.setdefault(info.channel, info)

    # -- the flow of events ------------------------------------------------

    def admit(self, event: Event, now: float, *, bypass_gate: bool = False) -> Event | None:
        """Count and archive a raw event; the archived event if it passed the gate.

        An event the gate drops is archived in the channel's silenced batch
        and goes no further. `bypass_gate` lets a priority or urgent rule
        through a channel the model stopped.
        """
        channel = event.channel
        info = self.catalogue.get(channel)
        if info is None:
            raise UnknownChannel(f"no sensor declares the channel {channel!r}")
        passed = self.gate.admit(channel, now, bypass_gate)
        self.stats.record(channel, now, dropped=not passed)
        if not passed:
            self._silenced.add(channel)
            self.archive.append(event, SILENCED_BUCKET, now, dropped=True)
            return None
        if channel in self._silenced and self.gate.is_open(channel, now):
            self._end_silence(channel, now)
        return self.archive.append(event, bucket_of(event, info.nature), now)

    def ingest(self, event: Event, now: float, *, bypass_gate: bool = False) -> bool:
        """`admit`, then hand the event to the treatments; whether it passed the gate."""
        archived = self.admit(event, now, bypass_gate=bypass_gate)
        if archived is None:
            return False
        self.treatments.add(archived, now)
        self.holdings.add(archived, self.catalogue[archived.channel].nature)
        return True

    def ready(self, now: float) -> bool:
        return self.treatments.ready(now)

    def next_deadline(self) -> float | None:
        return self.treatments.next_deadline()

    def drain(self, now: float, force: bool = False) -> list[Item]:
        """The deliverable packages of the pipeline's own treatments, recorded in the
        archive as delivered (the caller hands them over at once)."""
        items = self.treatments.drain(now, force)
        if items:
            runs = tuple(run for item in items for run in self.holdings.take(item))
            opened = self.open_deliveries([Parcel("drain", tuple(items), runs)], now)
            self.settle(opened, True, now)
            self.archive.flush()
        return items

    def open_deliveries(
        self, parcels: Sequence[Parcel], now: float, *, after_turn: int = 0
    ) -> list[int]:
        """Parcels are about to be written as pool_event results: seal their
        batches and commit them as pending deliveries (with every event staged
        so far). Returns one delivery ID per parcel that carries archived events
        (in order), for `settle` once the turn store has committed or failed."""
        self._seal([item for parcel in parcels for item in parcel.items], now)
        opened = [
            self.archive.open_delivery(p.token, p.runs, now, after_turn=after_turn)
            for p in parcels if p.runs
        ]
        self.archive.flush()
        return opened

    def settle(self, deliveries: Iterable[int], delivered: bool, now: float) -> None:
        """Staged: the deliveries reached the model (or not, and their events are
        still to deliver). Committed with the archive's next flush."""
        for delivery in deliveries:
            self.archive.settle(delivery, delivered, now)

    def _seal(self, items: Iterable[Item], now: float) -> None:
        batch_ids: set[str | None] = set()
        for item in items:
            batch_ids.update(_batches_of(item))
        self.archive.seal(batch_ids, now)

    # -- voluntary control ---------------------------------------------------

    def stop(self, channels: Iterable[str], duration: float, now: float) -> float:
        """Silence channels for a while; when they reopen."""
        return self.gate.stop(channels, duration, now)

    def start(self, channels: Iterable[str], now: float) -> list[str]:
        """Reopen channels now; the ones that were silenced."""
        reopened = self.gate.start(channels, now)
        for channel in reopened:
            self._end_silence(channel, now)
        return reopened

    def status(self, channel: str, now: float) -> ChannelStatus:
        """Gate, counts and silenced batch of a declared channel."""
        info = self.catalogue.get(channel)
        if info is None:
            raise UnknownChannel(f"no sensor declares the channel {channel!r}")
        gate = self.gate.state(channel, now)
        if gate.open and channel in self._silenced:
            self._end_silence(channel, now)
        batch = None if gate.open else self.archive.open_batch(channel, SILENCED_BUCKET)
        return ChannelStatus(info, gate, self.stats.counts(channel, now), batch)

    def _end_silence(self, channel: str, now: float) -> None:
        self._silenced.discard(channel)
        self.archive.seal_stream(channel, SILENCED_BUCKET, now)


def _batches_of(item: Item) -> set[str | None]:
    if isinstance(item, Aggregate):
        spans = item.between
        shown = (item.first, item.latest)
    elif isinstance(item, StateValue):
        spans = item.superseded
        shown = (item.value,)
    elif isinstance(item, Discrete):
        spans = item.omitted
        shown = item.events
    else:
        spans = item.omitted
        shown = item.messages
    return {g.batch_id for g in spans} | {e.batch_id for e in shown}
