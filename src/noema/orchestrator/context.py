"""The model's context: system prompt + current save point + session turns.

Turns become provider-neutral messages here. Consecutive assistant turns
(text and tool calls) form one assistant message; each tool result or
event becomes one tool message. Turns pruned from working memory are shown
as a marker that says how to fetch them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..memory.turns import Flag, Turn, TurnKind
from ..providers.base import Message, MessageRole, ToolCall

NOTE_PREFIX = "[note from the runtime, not from the person] "


def pruned_marker(turn: Turn) -> str:
    """What stands in the context for a turn pruned from working memory."""
    what = f"the result of {turn.tool_name}" if turn.tool_name else f"a {turn.kind} turn"
    return (
        f"[{what} (turn {turn.id}, about {turn.tokens} tokens) was pruned from working "
        f"memory; call lookup_turn(id={turn.id}) to read it again]"
    )


def turn_text(turn: Turn) -> str:
    """The text a turn contributes to the context."""
    if turn.has(Flag.PRUNED):
        return pruned_marker(turn)
    if turn.kind is TurnKind.NOTE:
        return NOTE_PREFIX + turn.content
    if turn.kind is TurnKind.USER and turn.channel and turn.channel != "terminal":
        return f"[{turn.channel} message from {turn.sender or 'unknown'}]\n{turn.content}"
    return turn.content


def turns_to_messages(turns: Iterable[Turn]) -> list[Message]:
    """Session turns as chat messages, assistant pieces merged."""
    messages: list[Message] = []
    text: list[str] = []
    calls: list[ToolCall] = []

    def close_assistant() -> None:
        if text or calls:
            messages.append(Message(MessageRole.ASSISTANT, "".join(text), tuple(calls)))
            text.clear()
            calls.clear()

    for turn in turns:
        if turn.kind is TurnKind.ASSISTANT:
            if calls:  # text after calls starts a new message: calls must be answered first
                close_assistant()
            text.append(turn.content)
        elif turn.kind is TurnKind.TOOL_CALL:
            calls.append(ToolCall(turn.call_id or "", turn.tool_name or "", turn.arguments or "{}"))
        else:
            close_assistant()
            if turn.is_result:
                messages.append(
                    Message(
                        MessageRole.TOOL,
                        turn_text(turn),
                        tool_call_id=turn.call_id,
                        tool_name=turn.tool_name,
                        is_error=turn.has(Flag.ERROR),
                    )
                )
            else:
                messages.append(Message(MessageRole.USER, turn_text(turn)))
    close_assistant()
    return messages


CONTINUATION = NOTE_PREFIX + "The conversation continues from the chronicle above."


def build_messages(system_prompt: str, turns: Sequence[Turn]) -> tuple[Message, ...]:
    """The full message list for a model request."""
    body = turns_to_messages(turns)
    # Some protocols require the first turn to be the user's; after a
    # compaction the session may start with an event delivery instead.
    if body and body[0].role is not MessageRole.USER:
        body.insert(0, Message(MessageRole.USER, CONTINUATION))
    return (Message(MessageRole.SYSTEM, system_prompt), *body)


class HistoryProblem(ValueError):
    """A message list that a provider would reject."""


def check_history(messages: Sequence[Message]) -> None:
    """Raise HistoryProblem unless both protocols would accept the messages.

    Rules: one system message, first; every tool call answered by exactly one
    tool message, and those answers come right after the call's message; no
    tool message without its call; the conversation starts with a user turn
    after the system prompt when it has any turn at all.
    """
    if not messages or messages[0].role is not MessageRole.SYSTEM:
        raise HistoryProblem("the first message must be the system prompt")
    if any(m.role is MessageRole.SYSTEM for m in messages[1:]):
        raise HistoryProblem("only the first message may be a system message")
    if len(messages) > 1 and messages[1].role is not MessageRole.USER:
        raise HistoryProblem("the first message after the system prompt must be the user's")
    open_calls: dict[str, str] = {}
    seen_ids: set[str] = set()
    for index, message in enumerate(messages[1:], 1):
        if message.role is MessageRole.TOOL:
            if message.tool_call_id not in open_calls:
                raise HistoryProblem(
                    f"message {index}: tool result for {message.tool_call_id!r} has no open call"
                )
            del open_calls[message.tool_call_id]
            continue
        if open_calls:
            raise HistoryProblem(
                f"message {index}: calls {sorted(open_calls)} have no result before a "
                f"{message.role} message"
            )
        if message.role is MessageRole.ASSISTANT:
            for call in message.tool_calls:
                if call.id in seen_ids:
                    raise HistoryProblem(f"message {index}: call id {call.id!r} used twice")
                seen_ids.add(call.id)
                open_calls[call.id] = call.name
            if not message.content and not message.tool_calls:
                raise HistoryProblem(f"message {index}: empty assistant message")
    if open_calls:
        raise HistoryProblem(f"calls {sorted(open_calls)} have no result at the end")
