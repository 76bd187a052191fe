"""Whose words an event holds: nobody's but the person's, or a stranger's.

An event from a sender the person did not authorise carries outside words,
named for the person by the kind its sensor declares (`SensorInfo.words_of`:
"mail", "log", "webhook" …) and the sender. An event may also name the
sources it carries itself, in `payload["sources"]`: an alarm set on a
stranger's words, the outcome of a call a stranger's words led to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..memory.turns import Source, SourceKind, sources_union
from .events import Event, SensorInfo
from .items import Aggregate, Discrete, Item, StateValue, Utterance

WordsOf = Callable[[str], SourceKind | None]
"""What a channel's unauthorised senders' words are (None: a channel whose
sensor speaks only its own words, such as a count)."""

# An event may name the sources it carries itself (an alarm set on a
# stranger's words, the outcome of a call a stranger's words led to):
# payload["sources"] as [[kind, who], ...].
SOURCES_KEY = "sources"


def event_sources(event: Event, kind: SourceKind) -> tuple[Source, ...]:
    """Whose outside words an event holds (none when its sender is the person)."""
    if event.authorised:
        return ()
    named = event.payload.get(SOURCES_KEY) if hasattr(event.payload, "get") else None
    if named:
        try:
            return sources_union(Source(SourceKind(k), str(w)) for k, w in named)
        except (ValueError, TypeError):
            pass  # unreadable: the sender below still names someone
    return (Source(kind, event.sender),)


def item_sources(item: Item, words_of: WordsOf | None = None) -> tuple[Source, ...]:
    """Whose outside words an item holds: every unauthorised sender it shows
    (and, for a condensed burst, the senders it counts)."""
    kind = words_of(item.channel) if words_of is not None else SourceKind.EVENT
    if kind is None:
        return ()
    if isinstance(item, Discrete):
        return sources_union(*(event_sources(e, kind) for e in item.events))
    if isinstance(item, Utterance):
        return sources_union(*(event_sources(e, kind) for e in item.messages))
    if isinstance(item, StateValue):
        return event_sources(item.value, kind)
    if isinstance(item, Aggregate):
        if item.authorised:
            return ()
        shown = sources_union(event_sources(item.first, kind), event_sources(item.latest, kind))
        return sources_union(shown, (Source(kind, s) for s in item.senders))
    raise TypeError(f"not a perception item: {type(item).__name__}")




def words_of_catalogue(catalogue: Mapping[str, SensorInfo]) -> WordsOf:
    """`WordsOf` as the sensors declare it; a channel no sensor declares (any
    more) is an unknown sender's event, never nobody's."""

    def words_of(channel: str) -> SourceKind | None:
        info = catalogue.get(channel)
        if info is None:
            return SourceKind.EVENT
        return SourceKind(info.words_of) if info.outside_words else None

    return words_of
