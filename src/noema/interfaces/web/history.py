"""The chat's history read a page at a time: the newest turns when it opens,
older ones as the person scrolls up or follows a link to one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...memory.store import TurnStore
from .turns import turn_json


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """Stored turns for the chat, oldest first, and whether the range asked
    for holds more than were given (on the far side from where it was read)."""

    turns: list[dict[str, Any]]
    more: bool

    def json(self) -> dict[str, Any]:
        return {"turns": self.turns, "more": self.more}


def history_page(store: TurnStore, limit: int, *, after: int = 0, before: int | None = None,
                 oldest: bool = False) -> HistoryPage:
    """Up to `limit` turns with `after` < id < `before` (no upper bound when
    `before` is None): the newest of them, or the oldest when `oldest`.

    Turn IDs are dense (rows are never deleted), so a page is one ID range
    and nothing is counted."""
    last = store.last_id()
    high = last if before is None else min(last, before - 1)
    low = after + 1
    if high < low:
        return HistoryPage([], False)
    if oldest:
        first, final = low, min(high, low + limit - 1)
        more = final < high
    else:
        first, final = max(low, high - limit + 1), high
        more = first > low
    return HistoryPage([turn_json(t) for t in store.range(first, final)], more)


__all__ = ["HistoryPage", "history_page"]
