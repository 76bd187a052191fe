"""The web addresses the conversation showed the model, kept as a set.

An address counts as shown when it came from outside the model: written in
a message of the person, in a delivered event, or brought in by a tool that
reads the world (a search result, a page, a mail). What the model wrote
itself (its answers, its tool calls) never counts, and neither does what
other tools return: files and command output can hold anything the model
put there a moment before, and a tool error may quote the model's own
arguments. For the same reason the first line of a search result (which
repeats the query) and events of the scheduler (alarms carry the model's
own words) are left out, and so is a page fetched from an address that was
not shown itself: a trusted site's search page or "not found" page can
repeat, as a link, whatever the model put in the address it composed.
Whether a fetch's address was shown is decided from the turns before its
call, so the answer is the same after a restart.

The turn store is read incrementally: each check reads only the turns
stored since the previous one, so a long history is read once per process
and a check after that costs the few turns of the last step. That first
read of a long history (a third of a second for 10 MB of turns) is done a
batch at a time with the event loop let run between batches (`catch_up`),
so streams and other clients do not stall while it runs. The sets hold
only addresses, hosts and words of the person, never whole texts.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Protocol

from ..memory.turns import Flag, Turn, TurnKind
from ..perception.untrusted import CLOSE, OPEN
from .urls import addresses_in, hosts_named_in, read_address

# Tools whose results are what the world says, not an echo of the model.
READING_TOOLS = frozenset({"web_search", "web_get_content", "email_read", "email_list",
                           "pool_event"})
# Channels whose events repeat what the model itself set up (an alarm's note).
OWN_CHANNELS = ("scheduler",)
FETCH = "web_get_content"
_BATCH = 2000  # turns read from the store at a time
_WORD = re.compile(r"\w+")
# One delivered event: its opening mark (with its channel) up to its closing mark.
_EVENT = re.compile(f"{OPEN}event [0-9a-f]+ channel=(\\S+)[^{CLOSE}]*{CLOSE}.*?{OPEN}/event "
                    f"[0-9a-f]+{CLOSE}", re.S)


class TurnSource(Protocol):
    """What the set reads from: the turn store."""

    def last_id(self) -> int: ...

    def range(self, first: int, last: int) -> list[Turn]: ...


@dataclass(slots=True)
class Seen:
    """What the conversation showed up to a turn: addresses, and the person's hosts and words."""

    addresses: set[str] = field(default_factory=set)  # keys, as urls.Address.key
    person_hosts: set[str] = field(default_factory=set)
    person_words: set[str] = field(default_factory=set)  # lowercase
    read_up_to: int = 0  # the last turn ID read
    # web_get_content calls read but not yet answered: call ID -> its address was shown
    fetching: dict[str, bool] = field(default_factory=dict)


def shown_text(turn: Turn) -> str:
    """The part of a turn that came from outside the model; empty if none did."""
    if turn.kind is TurnKind.USER:
        return turn.content
    if turn.kind not in (TurnKind.TOOL_RESULT, TurnKind.EVENT) or turn.has(Flag.ERROR):
        return ""
    if turn.kind is TurnKind.EVENT or turn.tool_name == "pool_event":
        return _without_own_events(turn.content)
    if turn.tool_name not in READING_TOOLS:
        return ""
    if turn.tool_name == "web_search":
        return turn.content.split("\n", 1)[1] if "\n" in turn.content else ""
    return turn.content


def _without_own_events(text: str) -> str:
    """The delivered events of a pool_event result, without those of the agent's own
    channels. Only whole event envelopes are kept, so a result in another shape
    shows nothing rather than everything."""
    kept = []
    for match in _EVENT.finditer(text):
        channel = match.group(1)
        if not any(channel == c or channel.startswith(c + ".") for c in OWN_CHANNELS):
            kept.append(match.group(0))
    return "\n".join(kept)


def take(seen: Seen, turn: Turn) -> None:
    """Add what `turn` showed to `seen`."""
    if turn.tool_name == FETCH and turn.call_id:
        if turn.kind is TurnKind.TOOL_CALL:
            seen.fetching[turn.call_id] = _fetches_shown(turn.arguments, seen)
            return
        if not seen.fetching.pop(turn.call_id, False):
            return
    text = shown_text(turn)
    if not text or "://" not in text and turn.kind is not TurnKind.USER:
        return
    seen.addresses |= addresses_in(text)
    if turn.kind is TurnKind.USER:
        seen.person_hosts |= hosts_named_in(text)
        seen.person_words.update(w.lower() for w in _WORD.findall(text))


def _fetches_shown(arguments: str | None, seen: Seen) -> bool:
    try:
        url = json.loads(arguments or "{}").get("url")
    except (ValueError, AttributeError):
        return False
    address = read_address(url) if isinstance(url, str) else None
    return address is not None and address.key in seen.addresses


class SeenAddresses:
    """The `Seen` of one turn store, brought up to date on each look."""

    def __init__(self, store: TurnSource) -> None:
        self._store = store
        self._seen = Seen()

    def now(self) -> Seen:
        """What the conversation showed up to its latest stored turn."""
        last = self._store.last_id()
        while self._seen.read_up_to < last:
            self._read_batch(last)
        return self._seen

    async def catch_up(self) -> None:
        """Read what is new, letting the event loop run between batches."""
        last = self._store.last_id()
        while self._seen.read_up_to < last:
            self._read_batch(last)
            await asyncio.sleep(0)

    def _read_batch(self, last: int) -> None:
        seen = self._seen
        upto = min(last, seen.read_up_to + _BATCH)
        for turn in self._store.range(seen.read_up_to + 1, upto):
            take(seen, turn)
        seen.read_up_to = upto
