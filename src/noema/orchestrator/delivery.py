"""Packages into the history: the person's messages and the pool_event pattern.

Events reach the model as a synthetic assistant call to `pool_event()` and
its result (kind EVENT), so the strict role order of every provider holds
and only the orchestrator can write such turns. The person's messages were
stored when typed (staged) and are admitted here. After an unsafe
cancellation the `haveCurrentOperationsBeenCancelled()` notice comes first.
Everything one `Deliver` writes is one transaction.

A package is planned before it is written (`plan_package`), so the call ID
of each pool_event delivery is known in advance: the sensory archive records
the delivery under that ID before the turns are committed (see
`orchestrator.ledger`), and after a crash the turn store says whether the
result exists.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..memory.session import Session
from ..memory.turns import Flag, NewTurn, Source, Turn, TurnKind, sources_union
from ..perception.items import Item
from ..perception.whose import WordsOf, item_sources
from ..perception.pipeline import Parcel
from .decisions import Package, PersonEntry, WorldEntry
from .repair import cancellation_notice

POOL_EVENT = "pool_event"

Render = Callable[[Sequence[Item], float], str]
"""Packs items as the text of a pool_event result, at a given time."""


def synthetic_call_id(prefix: str) -> str:
    """A call ID no model will ever reuse (IDs must be unique over the history)."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def pool_event_turns(text: str, call_id: str, *,
                     sources: tuple[Source, ...] = ()) -> list[NewTurn]:
    """The synthetic pool_event() call and its result carrying packed events;
    `sources` names the senders who are not the person, whose words it holds."""
    flags = Flag.SYNTHETIC | (Flag.OUTSIDE if sources else Flag.NONE)
    return [
        NewTurn(
            TurnKind.TOOL_CALL, tool_name=POOL_EVENT, call_id=call_id, arguments="{}",
            flags=Flag.SYNTHETIC,
        ),
        NewTurn(TurnKind.EVENT, text, tool_name=POOL_EVENT, call_id=call_id, flags=flags,
                sources=sources),
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
    words_of: WordsOf | None = None,
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
            session.append_all(pool_event_turns(
                render(items, now), step.call_id,
                sources=sources_union(*(item_sources(i, words_of) for i in items))))
    return list(session.turns[before:])


def _staged_turn(session: Session, staged: Mapping[int, Turn], turn_id: int) -> Turn:
    turn = staged.get(turn_id) or session.store.get(turn_id)
    if turn is None:
        raise LookupError(f"the person's message {turn_id} is not in the store")
    return turn
