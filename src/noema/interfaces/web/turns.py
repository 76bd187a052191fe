"""Stored turns as the page shows them: JSON with their flags, assistant text
also as sanitised Markdown."""

from __future__ import annotations

from typing import Any

from ...memory.store import TurnStore
from ...memory.turns import Flag, Turn, TurnKind
from ..host.deliveries import delivery_json
from ..host.host import answered
from .render import markdown_html
from .words import kind_words, tool_name

_SHOWN_FLAGS = {"discarded": Flag.DISCARDED, "interrupted": Flag.INTERRUPTED,
                "synthetic": Flag.SYNTHETIC, "error": Flag.ERROR, "compacted": Flag.COMPACTED,
                "pruned": Flag.PRUNED}


def turn_json(turn: Turn) -> dict[str, Any]:
    """One turn for the page (text stays text; only `html` is markup, sanitised)."""
    data: dict[str, Any] = {
        "id": turn.id, "ts": turn.ts, "kind": turn.kind.value, "content": turn.content,
        "tool_name": turn.tool_name, "arguments": turn.arguments, "call_id": turn.call_id,
        "channel": turn.channel,
        "sender": turn.sender, "cycle_id": turn.cycle_id,
        "flags": [name for name, flag in _SHOWN_FLAGS.items() if turn.has(flag)],
        "error": turn.has(Flag.ERROR),
        "waiting": turn.has(Flag.WAITING),
        "answered": answered(turn),
    }
    if turn.tool_name:
        data["tool_words"] = tool_name(turn.tool_name)  # "Run a command", for the page
    if turn.kind is TurnKind.ASSISTANT:
        data["html"] = markdown_html(turn.content)
    elif turn.kind is TurnKind.EVENT:
        data["delivery"] = delivery_json(turn.content)
    return data


def turn_with_neighbours(store: TurnStore, turn_id: int, around: int = 3,
                         agent: str = "Noema") -> list[dict[str, Any]]:
    """A turn and up to `around` turns on each side, oldest first, each saying
    who or what it is in words (`who`)."""
    return [turn_json(t) | {"who": kind_words(t.kind.value, t.tool_name, agent)}
            for t in store.range(max(1, turn_id - around), turn_id + around)]
