"""Working-memory pruning: bulky old tool results give way to a short marker.

A large tool result is usually read once, acted on, and then only weighs on
the context. Once it is a few turns old it is flagged *pruned*: the context
shows a marker saying what it was and how to fetch it again (the context
builder writes it), while the store keeps it whole. Pruning delays
compaction; the marker's cost is what the context counts for the turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from .recall import RECALL_TOOLS
from .session import Session
from .turns import Flag, Turn, TurnKind

# What the context builder's marker costs, rounded up: one sentence naming
# the tool, the turn ID, its size and the lookup_turn call to read it again.
PRUNED_MARKER_TOKENS = 48

PRUNABLE_KINDS = frozenset({TurnKind.TOOL_RESULT, TurnKind.EVENT})


def context_cost(turn: Turn) -> int:
    """Tokens a session turn costs in the context, given its flags."""
    if turn.has(Flag.PRUNED):
        return min(turn.tokens, PRUNED_MARKER_TOKENS)
    return turn.tokens


def prunable(turns: Sequence[Turn], *, older_than: int, min_tokens: int) -> list[int]:
    """IDs of bulky results that are more than `older_than` turns from the end."""
    horizon = len(turns) - older_than
    return [
        t.id
        for t in turns[: max(horizon, 0)]
        if t.kind in PRUNABLE_KINDS
        and not t.has(Flag.PRUNED)
        and t.tokens >= max(min_tokens, PRUNED_MARKER_TOKENS * 2)
        # a recall result is itself the rehydration of a citation; pruning it
        # would send the model straight back to fetch it again
        and t.tool_name not in RECALL_TOOLS
    ]


def prune(session: Session, *, older_than: int, min_tokens: int) -> list[int]:
    """Flag the bulky old results of the session as pruned; returns their IDs."""
    ids = prunable(session.turns, older_than=older_than, min_tokens=min_tokens)
    if ids:
        session.mark(ids, Flag.PRUNED)
    return ids
