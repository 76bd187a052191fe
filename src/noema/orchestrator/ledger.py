"""The shell's side of the sensory archive: acknowledging events, recording
deliveries, and delivering after a restart what a crashed process still owed.

An event is acknowledged when the archive commits it (see
`perception.archive`). The ledger commits at most `commit_delay` after an
event arrives (a group commit), and commits every package's events, as a
pending delivery, before the package's turns are written; once the turns
are committed the delivery is settled. Events handed to the model's own
pool_event call are settled when the cycle ends, since a safe cancellation
may still discard the result. The turn store judges what was delivered
(`delivered_by`), so a crash at any point leaves each acknowledged event
either delivered exactly once or still owed, and `owed` gives it back on
the next start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from ..memory.store import TurnStore
from ..memory.turns import Flag, Turn
from ..perception.events import Event, Nature, SensorInfo
from ..perception.pipeline import Parcel, Pipeline
from .decisions import HandOver
from .delivery import EventCall, Step

RETIRED_NOTE = " (no longer configured: it only delivers events from before a restart)"

# A result with one of these flags did not put its events before the model:
# discarded by a safe cancellation, or written in place of the events by a repair.
_NOT_DELIVERED = Flag.DISCARDED | Flag.ERROR | Flag.INTERRUPTED


def delivered_by(store: TurnStore, call_id: str, after_turn: int = 0) -> bool:
    """Whether the pool_event call `call_id` (stored as turn `after_turn`, or 0 for
    the orchestrator's own calls, whose IDs are unique) has a result that carries
    its events into the history: the turn store is the judge of what was delivered.
    """
    result = store.first_result(call_id, after_turn)
    return result is not None and not result.flags & _NOT_DELIVERED


def retired(channel: str, declared: SensorInfo | None) -> SensorInfo:
    """The declaration of a channel no sensor reports on any more, from what the
    archive remembers of it (or a plain discrete one if it remembers nothing)."""
    if declared is None:
        return SensorInfo(channel, "A sensor" + RETIRED_NOTE, Nature.DISCRETE)
    if declared.description.endswith(RETIRED_NOTE):
        return declared
    return replace(declared, description=declared.description + RETIRED_NOTE)


@dataclass(frozen=True, slots=True)
class _Handed:
    """A delivery made by the model's own pool_event call, settled at the cycle's
    end: a safe cancellation may still discard its result."""

    delivery: int
    call_id: str
    call_turn: int


class DeliveryLedger:
    """Group commits of the archive, and every delivery recorded pending before
    its turns are written, then settled by what the turn store holds."""

    def __init__(self, pipeline: Pipeline, store: TurnStore, commit_delay: float) -> None:
        self.pipeline = pipeline
        self.archive = pipeline.archive
        self._delay = commit_delay
        self._store = store
        self._timer: asyncio.TimerHandle | None = None
        self._handed: list[_Handed] = []

    def commit_soon(self) -> None:
        """Commit what the archive staged within the commit delay (a group commit)."""
        if self._timer is not None or not self.archive.staged:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop to run a timer: commit now
            self.archive.flush()
            return
        self._timer = loop.call_later(self._delay, self._commit)

    def _commit(self) -> None:
        self._timer = None
        self.archive.flush()

    @contextmanager
    def recording(self, steps: Sequence[Step], now: float) -> Iterator[None]:
        """Around writing a package's turns: its event calls are committed as
        pending deliveries before, and settled after (void if the writing failed)."""
        calls = [step for step in steps if isinstance(step, EventCall)]
        opened = self.pipeline.open_deliveries([c.parcel() for c in calls], now) if calls else []
        try:
            yield
        except BaseException:
            self._settle(opened, False, now)
            raise
        self._settle(opened, True, now)

    def _settle(self, deliveries: Sequence[int], delivered: bool, now: float) -> None:
        if deliveries:
            self.pipeline.settle(deliveries, delivered, now)
            self.commit_soon()

    def hand_over(self, call: Turn, d: HandOver, now: float) -> None:
        """Events given to the model's own pool_event call `call`: pending until
        the cycle ends (see `settle_handed`)."""
        if call.call_id is None:
            raise ValueError("a pool_event call without a call ID")
        opened = self.pipeline.open_deliveries(
            [Parcel(call.call_id, d.items, d.held)], now, after_turn=call.id)
        self._handed.extend(_Handed(delivery, call.call_id, call.id) for delivery in opened)

    def settle_handed(self, now: float) -> None:
        """At a cycle's end, its history repaired: what its pool_event calls
        handed over stands if their results stayed in the history."""
        for handed in self._handed:
            carried = delivered_by(self._store, handed.call_id, handed.call_turn)
            self.pipeline.settle([handed.delivery], carried, now)
        if self._handed:
            self._handed.clear()
            self.commit_soon()

    def refuse(self, event: Event, now: float) -> None:
        """An archived event the core refused as a repeat: recorded as refused
        (committed with the next group)."""
        self.archive.refuse(event, now)

    def owed(self, now: float) -> Iterator[tuple[Event, SensorInfo]]:
        """On start: settle the deliveries a crash left between the two commits,
        then yield every event still owed with its channel's declaration (a
        channel no sensor declares any more is declared again from what the
        archive remembers). What the caller staged meanwhile is committed once
        the last event has been taken."""
        for pending in self.archive.pending_deliveries():
            carried = delivered_by(self._store, pending.token, pending.after_turn)
            self.archive.settle(pending.delivery_id, carried, now)
        self.archive.flush()
        declared: dict[str, SensorInfo] | None = None
        for event in self.archive.undelivered():
            info = self.pipeline.catalogue.get(event.channel)
            if info is None:
                declared = self.archive.channels() if declared is None else declared
                info = retired(event.channel, declared.get(event.channel))
                self.pipeline.restore_channel(info)
            yield event, info
        self.archive.flush()

    def close(self) -> None:
        """Commit what is staged now, before the process exits."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.archive.flush()
