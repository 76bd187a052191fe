"""Packages into the history: the person's messages and the pool_event pattern.

Events reach the model as a synthetic assistant call to `pool_event()` and
its result (kind EVENT), so the strict role order of every provider holds
and only the orchestrator can write such turns. The person's messages were
stored when typed (staged) and are admitted here. After an unsafe
cancellation the `haveCurrentOperationsBeenCancelled()` notice comes first.
Everything one `Deliver` writes is one transaction.

A package is planned before it is written (`plan_package`), so the call ID
of each pool_event delivery is known in advance: the sensory archive records
the delivery under that ID before the turns are committed, and after a
crash `delivered_by` asks the turn store whether the result exists.
`DeliveryLedger` is the shell's side of that bookkeeping, with the group
commits that acknowledge events.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..memory.session import Session
from ..memory.store import TurnStore
from ..memory.turns import Flag, NewTurn, Turn, TurnKind
from ..perception.items import Item
from ..perception.pipeline import Parcel, Pipeline
from .decisions import HandOver, Package, PersonEntry, WorldEntry
from .repair import cancellation_notice

POOL_EVENT = "pool_event"

Render = Callable[[Sequence[Item], float], str]
"""Packs items as the text of a pool_event result, at a given time."""


def synthetic_call_id(prefix: str) -> str:
    """A call ID no model will ever reuse (IDs must be unique over the history)."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def pool_event_turns(text: str, call_id: str) -> list[NewTurn]:
    """The synthetic pool_event() call and its result carrying packed events."""
    return [
        NewTurn(
            TurnKind.TOOL_CALL, tool_name=POOL_EVENT, call_id=call_id, arguments="{}",
            flags=Flag.SYNTHETIC,
        ),
        NewTurn(TurnKind.EVENT, text, tool_name=POOL_EVENT, call_id=call_id, flags=Flag.SYNTHETIC),
    ]


def groups(package: Package) -> Iterator[tuple[PersonEntry, ...] | tuple[WorldEntry, ...]]:
    """Runs of consecutive entries of one kind, in package order: each run of
    events becomes one pool_event delivery, each run of messages is admitted."""
    run: list = []
    for entry in package.entries:
        if run and type(run[-1]) is not type(entry):
            yield tuple(run)
            run = []
        run.append(entry)
    if run:
        yield tuple(run)


@dataclass(frozen=True, slots=True)
class EventCall:
    """One run of a package's events, to go in one pool_event call with this ID."""

    call_id: str
    entries: tuple[WorldEntry, ...]

    def parcel(self) -> Parcel:
        """What the sensory archive records for this call."""
        return Parcel(self.call_id, tuple(e.item for e in self.entries),
                      tuple(run for e in self.entries for run in e.held))


Step = tuple[PersonEntry, ...] | EventCall


def plan_package(package: Package) -> tuple[Step, ...]:
    """The package as written: runs of the person's messages, and event runs
    with the call ID each pool_event delivery will carry."""
    return tuple(
        run if isinstance(run[0], PersonEntry)
        else EventCall(synthetic_call_id("pool"), run)  # type: ignore[arg-type]
        for run in groups(package)
    )


def write_package(
    session: Session,
    package: Package | Sequence[Step],
    *,
    notice: bool,
    staged: Mapping[int, Turn],
    render: Render | None,
    now: float,
) -> list[Turn]:
    """Append a package, or its plan, (after the cancellation notice, if asked)
    in one transaction; returns the turns now at the end of the session."""
    steps = plan_package(package) if isinstance(package, Package) else package
    before = len(session)
    with session.transaction():
        if notice:
            session.append_all(cancellation_notice(None, synthetic_call_id("cancelled")))
        for step in steps:
            if not isinstance(step, EventCall):
                session.admit([_staged_turn(session, staged, e.turn_id) for e in step])
                continue
            if render is None:
                raise ValueError("events cannot be delivered without a renderer")
            items = [e.item for e in step.entries]
            session.append_all(pool_event_turns(render(items, now), step.call_id))
    return list(session.turns[before:])


# A result with one of these flags did not put its events before the model:
# discarded by a safe cancellation, or written in place of the events by a repair.
_NOT_DELIVERED = Flag.DISCARDED | Flag.ERROR | Flag.INTERRUPTED


def delivered_by(store: TurnStore, call_id: str, after_turn: int = 0) -> bool:
    """Whether the pool_event call `call_id` (stored as turn `after_turn`, or 0 for
    the orchestrator's own calls, whose IDs are unique) has a result that carries
    its events into the history: the turn store is the judge of what was delivered.
    """
    # Model call IDs may repeat across restarts, so the first result after
    # the call itself is the one that answers it.
    row = store.conn.execute(
        "SELECT flags FROM turns WHERE call_id = ? AND id > ? AND kind IN (?, ?)"
        " ORDER BY id LIMIT 1",
        (call_id, after_turn, TurnKind.EVENT.value, TurnKind.TOOL_RESULT.value),
    ).fetchone()
    return row is not None and not Flag(row[0]) & _NOT_DELIVERED


def _staged_turn(session: Session, staged: Mapping[int, Turn], turn_id: int) -> Turn:
    turn = staged.get(turn_id) or session.store.get(turn_id)
    if turn is None:
        raise LookupError(f"the person's message {turn_id} is not in the store")
    return turn


@dataclass(frozen=True, slots=True)
class _Handed:
    """A delivery made by the model's own pool_event call, settled at the cycle's
    end: a safe cancellation may still discard its result."""

    delivery: int
    call_id: str
    call_turn: int


class DeliveryLedger:
    """The shell's side of the sensory archive: group commits, and every delivery
    recorded pending before its turns are written, then settled.

    The turn store judges what was delivered: a delivery stands if its
    pool_event result is in the history (see `delivered_by`).
    """

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

    def open(self, calls: Sequence[EventCall], now: float) -> list[int]:
        """The package's event calls, committed as pending deliveries."""
        return self.pipeline.open_deliveries([c.parcel() for c in calls], now) if calls else []

    def settle(self, deliveries: Sequence[int], delivered: bool, now: float) -> None:
        """The turns were committed (or failed): committed with the next group."""
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

    def settle_pending(self, now: float) -> None:
        """On start: the deliveries a crash left between the two commits."""
        for pending in self.archive.pending_deliveries():
            carried = delivered_by(self._store, pending.token, pending.after_turn)
            self.archive.settle(pending.delivery_id, carried, now)
        self.archive.flush()

    def close(self) -> None:
        """Commit what is staged now, before the process exits."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.archive.flush()
