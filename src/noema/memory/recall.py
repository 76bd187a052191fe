"""How recalled turns are written, and how to read back which turns a recall surfaced.

`lookup_turn` and `search_full_history` start every turn they show with a
header line made by `turn_header`. The validator must know which old turns
such a result brought back (the chronicler may cite them as flashbacks), so
`surfaced_ids` parses those headers. Both sides live here so they cannot
drift apart.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from .turns import Flag, Turn, TurnKind

LOOKUP_TURN = "lookup_turn"
SEARCH_FULL_HISTORY = "search_full_history"
RECALL_TOOLS = frozenset({LOOKUP_TURN, SEARCH_FULL_HISTORY})

_HEADER = re.compile(r"^\[turn (\d{1,18}) · ", re.MULTILINE)
EXCERPT_CHARS = 160


def when(ts: float, zone: ZoneInfo | None = None) -> str:
    """A turn's time as the person reads it, minutes precision."""
    return datetime.fromtimestamp(ts, zone or timezone.utc).strftime("%Y-%m-%d %H:%M")


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start of a text on one line, with an ellipsis when it goes on."""
    flat = " ".join(text.split())
    return flat[:limit] + ("…" if len(flat) > limit else "")


def kind_label(turn: Turn) -> str:
    """Who or what a turn is, in a few words."""
    if turn.kind is TurnKind.TOOL_CALL:
        return f"call to {turn.tool_name}"
    if turn.kind is TurnKind.TOOL_RESULT:
        return f"result of {turn.tool_name}"
    if turn.kind is TurnKind.EVENT:
        return "events"
    if turn.kind is TurnKind.NOTE:
        return "runtime note"
    return turn.kind.value


def turn_header(turn: Turn, zone: ZoneInfo | None = None) -> str:
    """`[turn 42 · user · Ana · 2025-03-02 10:14]`: the first line of a recalled turn."""
    parts = [f"turn {turn.id}", kind_label(turn)]
    if turn.sender:
        parts.append(turn.sender)
    parts.append(when(turn.ts, zone))
    if turn.has(Flag.DISCARDED):
        parts.append("discarded by a cancellation")
    return "[" + " · ".join(parts) + "]"


def turn_body(turn: Turn) -> str:
    """The full text of a turn; a call shows its arguments."""
    if turn.kind is TurnKind.TOOL_CALL:
        return f"{turn.tool_name}({turn.arguments or '{}'})"
    return turn.content


def is_recall_result(turn: Turn) -> bool:
    """A successful result of a tool that shows old turns."""
    return (
        turn.kind is TurnKind.TOOL_RESULT
        and turn.tool_name in RECALL_TOOLS
        and not turn.has(Flag.ERROR)
    )


def surfaced_ids(turn: Turn) -> frozenset[int]:
    """IDs of the older turns a recall result showed; empty for any other turn.

    Only IDs below the result's own can be genuine: a recall shows the past.
    Quoted text inside a recalled turn can look like a header, so whoever
    trusts these IDs should also check that the turns exist.
    """
    if not is_recall_result(turn):
        return frozenset()
    return frozenset(
        n for n in (int(m.group(1)) for m in _HEADER.finditer(turn.content)) if 0 < n < turn.id
    )
