"""Can a model's window hold a request at all? The check behind `noema config check`.

A window too small for the request fails every message (`ContextTooSmall`)
while the configuration looks valid; this says so before the agent starts,
and says what window would do. Two requests must fit: the reasoning model's
(system prompt, the tool descriptions it is offered, a short conversation
and the answer reserve) and the chronicler's (its instructions, a previous
save point, a block of turns, and its answer).
"""

from __future__ import annotations

from dataclasses import dataclass

from .context import MAX_ANSWER_ROOM, minimum_window, tool_budget

# What a save point carried forward and the smallest useful block may take in
# the chronicler's request (a few exchanges of a hundred words).
CHRONICLER_MATERIAL = 800


@dataclass(frozen=True, slots=True)
class RequestNeeds:
    """The sizes (estimated tokens) the check weighs."""

    window: int  # the reasoning model's
    system: int  # the system prompt as it is now
    all_tools: int  # every tool description
    core_tools: int  # the core set with the tool that enables the others
    chronicler_window: int
    chronicler_protocol: int  # the chronicler's instructions and framing
    chronicler_input_fraction: float = 0.5
    max_answer: int = MAX_ANSWER_ROOM


def window_problems(needs: RequestNeeds, *, key: str = "models.reasoning.context_window",
                    chronicler_key: str = "models.reasoning.context_window") -> list[str]:
    """What keeps the requests from fitting, each naming the key and the fix."""
    problems = []
    budget, _ = tool_budget(needs.window)
    tools = needs.all_tools if needs.all_tools <= budget else needs.core_tools
    least = minimum_window(needs.system, tools, max_answer=needs.max_answer)
    if needs.window < least:
        problems.append(
            f"{key}: a window of {needs.window:,} tokens cannot hold a request: the system prompt "
            f"(about {needs.system:,} tokens), the core tool descriptions (about {tools:,}), a "
            f"short conversation and the answer reserve need at least {least:,}. Set it to the "
            f"model's real window if it is larger, or choose a model with a window of {least:,} "
            "tokens or more."
        )
    share = needs.chronicler_input_fraction
    chronicler_least = int((needs.chronicler_protocol + CHRONICLER_MATERIAL) / share) + 1
    if needs.chronicler_window < chronicler_least:
        problems.append(
            f"{chronicler_key}: the chronicler's window of {needs.chronicler_window:,} tokens "
            f"cannot hold its request: its instructions (about {needs.chronicler_protocol:,} "
            f"tokens), a save point and a block of turns, within the {share:.0%} of the window "
            f"memory.chronicler_input_fraction leaves them, need at least {chronicler_least:,}. "
            "Use a chronicler model with a larger window ([models.chronicler]) or raise "
            "memory.chronicler_input_fraction."
        )
    return problems
