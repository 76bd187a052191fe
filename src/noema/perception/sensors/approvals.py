"""The approvals sensor: what became of a call asked about while the person
was away (it ran, with its result; refused; expired), as an event.

The question itself left the cycle at once (`security/away.py`); its
outcome comes back through the same door as an alarm: an event of a
declared channel, through the hub, the urgency rules, the archive and the
queue. Discrete (each outcome is a fact of its own), normal urgency, and it
cannot be silenced: the model must learn what its own call did.

**Exactly once.** Outcomes carry increasing numbers. The sensor's place
(the last number reported) is saved in its bookmark *before* the event is
emitted, so the sensory archive commits both in one transaction: after a
`kill -9` an outcome whose event was lost is reported again and one whose
event was kept is not. With the senses off (no archive bookmark) the place
is kept by the source itself, after the event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..events import Nature, SensorInfo, Urgency
from ..hub import Bookmark, Emitter
from ..whose import SOURCES_KEY

CHANNEL = "approvals"
DESCRIPTION = ("What became of a call you made while the person was away and that waited "
               "for their approval: it ran (with its result), or was refused, or expired.")


class Outcome(Protocol):
    """One settled question, as the source records it."""

    number: int
    tool: str
    state: str  # ran, failed, refused, expired
    by: str | None
    outcome: str | None  # the sentence for the model
    outside: bool  # the result holds words from outside the person
    outcome_seq: int | None
    request: Mapping[str, Any]  # the question's fields: its `sources` among them


class OutcomeSource(Protocol):
    def outcomes_after(self, seq: int) -> Sequence[Outcome]: ...

    async def wait_new(self) -> None: ...

    def reported(self) -> int:
        """The place kept by the source, for when there is no bookmark."""
        ...

    def set_reported(self, seq: int) -> None: ...


class ApprovalSensor:
    """Reports the outcomes of questions asked away, each once, in order."""

    def __init__(self, source: OutcomeSource, *, bookmark: Bookmark | None = None) -> None:
        self._source = source
        self._bookmark = bookmark
        self.info = SensorInfo(CHANNEL, DESCRIPTION, Nature.DISCRETE, can_silence=False,
                               default_urgency=Urgency.NORMAL)

    async def run(self, emit: Emitter) -> None:
        place = self._load()
        while True:
            for outcome in self._source.outcomes_after(place):
                seq = outcome.outcome_seq or place + 1
                place = seq
                if self._bookmark is not None:
                    self._bookmark.save({"through": place})  # committed with the event
                # An outcome repeats the call's arguments: a call outside words
                # led to, or that carried them, comes back as theirs, whatever
                # became of it (ran, refused, expired).
                sources = _sources(outcome)
                emit(outcome.outcome or f"approval {outcome.number}: {outcome.state}",
                     sender="approvals", key=f"approval:{outcome.number}",
                     authorised=not sources, payload=_payload(outcome, sources))
                if self._bookmark is None:
                    self._source.set_reported(place)
            await self._source.wait_new()

    def _load(self) -> int:
        if self._bookmark is None:
            return self._source.reported()
        state: Mapping[str, Any] = self._bookmark.load() or {}
        return int(state.get("through", 0))


def _sources(outcome: Outcome) -> list[list[str]]:
    """Whose outside words the outcome holds, as [kind, who] pairs."""
    found: list[list[str]] = []
    for source in (outcome.request or {}).get("sources") or ():
        try:
            found.append([str(source["kind"]), str(source.get("who", ""))])
        except (TypeError, KeyError):
            found.append(["tool", outcome.tool])  # unreadable: still someone's
    if outcome.outside:  # the result itself read outside words
        found.append(["tool", outcome.tool])
    return found


def _payload(outcome: Outcome, sources: list[list[str]]) -> dict[str, Any]:
    payload: dict[str, Any] = {"approval": outcome.number, "tool": outcome.tool,
                               "outcome": outcome.state, "by": outcome.by or ""}
    if sources:
        payload[SOURCES_KEY] = sources
    return payload
