"""Pinned observations: short notes the model keeps in view on purpose.

`annotate_observation` pins a distilled note about something bulky (a long
tool result, a document) so that the note survives when the bulky turn is
pruned from working memory and when the turns around it are compacted. The
newest notes are shown in the system prompt with the chronicle. A note
whose call was discarded by a safe cancellation is not shown: for the model
that call never happened.

A note pinned while outside words led the conversation (its call's result
is marked `Flag.OUTSIDE`) may carry a stranger's words into every later
prompt; it is shown as such, so the model reads it as data.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .store import TurnStore
from .turns import Flag, Source, sources_from_text

MAX_SOURCE_CHARS = 200
MAX_NOTE_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Observation:
    id: int
    created: float
    turn_id: int  # the annotate_observation call
    source: str
    note: str
    outside: bool = False  # pinned while words from outside led the conversation
    sources: tuple[Source, ...] = ()  # whose, when known


def pin(store: TurnStore, turn_id: int, source: str, note: str) -> Observation:
    """Pin a note; `turn_id` is the stored call that asked for it."""
    source = " ".join(source.split())[:MAX_SOURCE_CHARS]
    note = note.strip()
    if not note:
        raise ValueError("an observation needs a note")
    if len(note) > MAX_NOTE_CHARS:
        raise ValueError(
            f"a pinned note holds at most {MAX_NOTE_CHARS} characters (this one has {len(note)}); "
            "distil it further"
        )
    created = time.time()
    with store.transaction() as db:
        cursor = db.execute(
            "INSERT INTO observations (created, turn_id, source, note) VALUES (?, ?, ?, ?)",
            (created, turn_id, source, note),
        )
    assert cursor.lastrowid is not None
    return Observation(cursor.lastrowid, created, turn_id, source, note)


def pinned(store: TurnStore, limit: int) -> list[Observation]:
    """The newest `limit` notes still standing, oldest first."""
    if limit <= 0:
        return []
    # The note's outside mark is its call's result's: the tool writes it with
    # the sources of the outside words that led when the note was pinned.
    rows = store.conn.execute(
        "SELECT o.id, o.created, o.turn_id, o.source, o.note,"
        " (SELECT r.flags & ? FROM turns r WHERE r.call_id = t.call_id AND r.id > t.id"
        "  AND r.kind = 'tool_result' ORDER BY r.id LIMIT 1),"
        " (SELECT r.sources FROM turns r WHERE r.call_id = t.call_id AND r.id > t.id"
        "  AND r.kind = 'tool_result' ORDER BY r.id LIMIT 1)"
        " FROM observations o JOIN turns t ON t.id = o.turn_id WHERE (t.flags & ?) = 0"
        " ORDER BY o.id DESC LIMIT ?",
        (int(Flag.OUTSIDE), int(Flag.DISCARDED), limit),
    ).fetchall()
    return [Observation(*r[:5], outside=bool(r[5]), sources=sources_from_text(r[6]))
            for r in reversed(rows)]
