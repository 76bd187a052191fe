"""Which turns to compact: the oldest block of the session, cut where it is safe.

A block always starts at the beginning of the session and ends at a *safe
cut*: no tool call is separated from its result (a pool_event call and the
events it delivers are such a pair), and nothing of a cycle that is still
running is taken. The most recent turns always stay raw. Among the safe cuts
the block takes about the share of the session asked for, within what the
chronicler can read, and prefers to end just before the person speaks, so
the raw part of the session opens with their words.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from .turns import Turn, TurnKind


@dataclass(frozen=True, slots=True)
class Block:
    """The turns one save point will narrate, oldest first."""

    turns: tuple[Turn, ...]

    def __post_init__(self) -> None:
        if not self.turns:
            raise ValueError("a block holds at least one turn")

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(t.id for t in self.turns)

    @property
    def first(self) -> int:
        return self.turns[0].id

    @property
    def last(self) -> int:
        return self.turns[-1].id


def safe_cuts(turns: Sequence[Turn]) -> list[bool]:
    """`cuts[i]` is True when turns[:i] can leave the session without splitting a pair.

    A call whose result is not in the session yet is open until the end.
    """
    span: dict[str, list[int]] = {}
    for index, turn in enumerate(turns):
        if turn.call_id and (turn.is_call or turn.is_result):
            bounds = span.setdefault(turn.call_id, [index, index, 0])
            bounds[1] = index
            bounds[2] |= 1 if turn.is_call else 2
    blocked = [0] * (len(turns) + 2)
    for first, last, seen in span.values():
        end = len(turns) if seen == 1 else last  # a call still waiting for its result
        # cutting at i in (first, end] would separate the pair
        blocked[first + 1] += 1
        blocked[end + 1] -= 1
    cuts, running = [], 0
    for i in range(len(turns) + 1):
        running += blocked[i]
        cuts.append(running == 0)
    return cuts


def select_block(
    turns: Sequence[Turn],
    *,
    keep_recent: int,
    target_tokens: int,
    max_tokens: int,
    min_turns: int,
    max_turns: int,
    open_cycles: Collection[int] = (),
    cost: Callable[[Turn], int] | None = None,
) -> Block | None:
    """The oldest block worth compacting, or None.

    `target_tokens` is how much the block should take; `max_tokens` how much
    the chronicler can read; `cost` what a turn weighs (its tokens by default).
    """
    weigh = cost or (lambda t: t.tokens)
    limit = min(len(turns) - keep_recent, max_turns)
    for index, turn in enumerate(turns[: max(limit, 0)]):
        if turn.cycle_id is not None and turn.cycle_id in open_cycles:
            limit = index
            break
    if limit < min_turns:
        return None
    cuts = safe_cuts(turns)
    sums = [0]
    for turn in turns[:limit]:
        sums.append(sums[-1] + weigh(turn))
    fitting = [i for i in range(min_turns, limit + 1) if cuts[i] and sums[i] <= max_tokens]
    if not fitting:
        return None
    reaching = [i for i in fitting if sums[i] >= target_tokens]
    chosen = reaching[0] if reaching else fitting[-1]
    chosen = _before_the_person(turns, fitting, chosen)
    return Block(tuple(turns[:chosen]))


def _before_the_person(turns: Sequence[Turn], fitting: list[int], chosen: int) -> int:
    """A nearby safe cut where the next turn is the person's, if there is one."""
    if chosen >= len(turns) or turns[chosen].kind is TurnKind.USER:
        return chosen
    slack = max(4, chosen // 4)
    starts_with_person = [
        i for i in fitting
        if i < len(turns) and turns[i].kind is TurnKind.USER and abs(i - chosen) <= slack
    ]
    if not starts_with_person:
        return chosen
    return min(starts_with_person, key=lambda i: (abs(i - chosen), -i))
