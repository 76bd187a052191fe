"""The agent's status in a few lines of plain text, where no interface is attached to word it.

A channel's `/status` (mail, Telegram) reaches the agent through the composition root,
not through the attach protocol, so it reads `Agent.status()` directly; the interfaces
word the host's richer `StatusView` themselves."""

from __future__ import annotations

from .agent import AgentStatus


def status_text(status: AgentStatus) -> str:
    """Context use, whether a cycle runs, what waits, and the reflexes' brakes if any is on."""
    lines = [
        f"context: about {status.context_tokens:,} of {status.context_window:,} tokens "
        f"({status.context_share:.0%}) in {status.session_turns} turns",
        f"state: {'working' if status.busy else 'idle'}"
        + (f", {status.waiting_messages} message(s) waiting" if status.waiting_messages else ""),
    ]
    reflexes = status.reflexes
    if reflexes is not None:
        if status.waiting_events:
            lines.append(f"events waiting: {status.waiting_events}"
                         + (" (they wait for you to write)" if reflexes.held else ""))
        if reflexes.world_budget_exhausted:
            budget = f"budget for cycles the world starts is spent ({reflexes.world_tokens_spent:,}"
            budget += f" of {reflexes.world_tokens_per_hour:,} tokens this hour)"
            lines.append(budget + "; events wait for you")
        if reflexes.guard_engaged:
            lines.append("interruptions paused: the current cycle was cancelled too often")
    if status.last_input_tokens is not None:
        lines.append(f"last request, as counted by the model: {status.last_input_tokens:,} tokens")
    if status.save_point_id is not None:
        lines.append(f"current save point: #{status.save_point_id}")
    return "\n".join(lines)
