"""Turns rendered compactly, each with its ID, for the chronicler to read.

Every turn starts with `[ID]` so the chronicler can cite it. Bulky tool
results and very long messages are cut, saying how much was left out (the
chronicle can cite the turn; the whole text stays in the store). Results of
the recall tools are marked as flashbacks, naming the older turns they
brought back, because the chronicle must narrate them as remembering.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from zoneinfo import ZoneInfo

from .recall import surfaced_ids, when
from .turns import Flag, Turn, TurnKind

# A message the person or the agent wrote is cut far later than a tool
# result: its wording is what the chronicle retells.
MESSAGE_CHARS_FACTOR = 4
ARGUMENT_CHARS = 300
# Show the time again when this much has passed since the last time shown.
TIME_GAP_S = 30 * 60


def cut(text: str, limit: int, turn_id: int) -> str:
    """`text` cut to about `limit` characters, saying what was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()} … [{len(text) - limit:,} more characters in turn {turn_id}]"


def compact_ranges(ids: Iterable[int]) -> str:
    """'3, 5, 12-40': sorted IDs with runs folded."""
    ordered = sorted(set(ids))
    parts: list[str] = []
    start = previous = None
    for n in ordered:
        if previous is not None and n == previous + 1:
            previous = n
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = n
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ", ".join(parts)


def render_turn(turn: Turn, *, result_chars: int = 1500, stamp: str | None = None) -> str:
    """One turn as the chronicler reads it."""
    stamp_part = f" · {stamp}" if stamp else ""
    cut_short = " (cut short)" if turn.has(Flag.INTERRUPTED) else ""
    kind = turn.kind
    if kind is TurnKind.USER:
        who = "person"
        if turn.channel and turn.channel != "terminal":
            who += f" ({turn.sender or 'unknown sender'} via {turn.channel})"
        elif turn.sender:
            who += f" ({turn.sender})"
        body = cut(turn.content, result_chars * MESSAGE_CHARS_FACTOR, turn.id)
    elif kind is TurnKind.ASSISTANT:
        who = "agent" + cut_short
        body = cut(turn.content, result_chars * MESSAGE_CHARS_FACTOR, turn.id)
    elif kind is TurnKind.TOOL_CALL:
        who = f"agent calls {turn.tool_name}"
        body = cut(turn.arguments or "{}", ARGUMENT_CHARS, turn.id)
    elif kind is TurnKind.TOOL_RESULT:
        recalled = surfaced_ids(turn)
        if recalled:
            who = (
                f"FLASHBACK: {turn.tool_name} brought back turns {compact_ranges(recalled)}"
                " (memories the agent re-read, not new events)"
            )
        else:
            failed = " failed" if turn.has(Flag.ERROR) else " returned"
            who = f"{turn.tool_name}{failed}"
        body = cut(turn.content, result_chars, turn.id)
    elif kind is TurnKind.EVENT:
        who = "events from the world"
        body = cut(turn.content, result_chars, turn.id)
    else:
        who = "runtime note"
        body = cut(turn.content, result_chars, turn.id)
    return f"[{turn.id}] {who}{stamp_part}: {body}"


def render_block(
    turns: Sequence[Turn], *, result_chars: int = 1500, zone: ZoneInfo | None = None
) -> str:
    """A block of turns, oldest first, one per paragraph."""
    lines = []
    last_shown: float | None = None
    for turn in turns:
        stamp = None
        if last_shown is None or turn.ts - last_shown >= TIME_GAP_S:
            stamp = when(turn.ts, zone)
            last_shown = turn.ts
        lines.append(render_turn(turn, result_chars=result_chars, stamp=stamp))
    return "\n\n".join(lines)
