"""Gate → archive → treatments, composed.

The pipeline is the whole of perception's bookkeeping for one agent: the
catalogue of declared sensors, the gate, the recent counts, the archive and
one `Treatments`. The orchestrator shell may use it whole (`ingest`, then
`drain` when it wants to deliver), or call `admit` and keep its own
treatments per urgency class, handing drained items back to `delivered`.
It has no clock of its own: `now` comes with every call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .archive import SILENCED_BUCKET, SensoryArchive
from .events import Event, SensorInfo
from .gate import DEFAULT_MAX_SILENCE, Gate, GateState
from .items import Aggregate, Discrete, Item, StateValue
from .stats import ChannelCounts, ChannelStats
from .treatments import Treatments, UnknownChannel, bucket_of


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
        self._silenced: set[str] = set()  # channels with an open batch of dropped events
        for info in sensors:
            self.register(info)

    def register(self, info: SensorInfo) -> None:
        """Declare a sensor; re-declaring a channel replaces its declaration."""
        self.catalogue[info.channel] = info

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
        return True

    def ready(self, now: float) -> bool:
        return self.treatments.ready(now)

    def next_deadline(self) -> float | None:
        return self.treatments.next_deadline()

    def drain(self, now: float, force: bool = False) -> list[Item]:
        """The deliverable packages of the pipeline's own treatments (see `delivered`)."""
        items = self.treatments.drain(now, force)
        self.delivered(items, now)
        return items

    def delivered(self, items: Iterable[Item], now: float) -> None:
        """Items are being delivered: seal their batches and make the archive durable."""
        batch_ids: set[str | None] = set()
        for item in items:
            batch_ids.update(_batches_of(item))
        self.archive.seal(batch_ids, now)
        self.archive.flush()

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
