"""The model's context: system prompt + current save point + session turns.

Turns become provider-neutral messages here. Consecutive assistant turns
(text and tool calls) form one assistant message; each tool result or
event becomes one tool message. Turns pruned from working memory are shown
as a marker that says how to fetch them again.

A request never grows past the model's window. A turn larger than a share
of the window (`GIANT_TURN_SHARE`) is shown cut, its head and tail around a
marker that says how much was left out and how to page through it with
`lookup_turn`; the store keeps it whole. When the turns still do not fit,
the oldest are left out of this one request, whole groups at a time (a call
is never parted from its result), behind a note saying so; the compactor
catches up after the cycle. Sizes come from the store's estimate of each
turn, so a turn of megabytes is never re-read to be measured.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..memory.recall_tools import MAX_PAGE_CHARS, MIN_PAGE_CHARS
from ..memory.store import own_text
from ..memory.tokens import MESSAGE_OVERHEAD, estimate_tokens, fitting_chars
from ..memory.turns import Flag, Turn, TurnKind
from ..providers.base import Message, MessageRole, ToolCall, ToolSpec

log = logging.getLogger(__name__)

NOTE_PREFIX = "[note from the runtime, not from the person] "

# A turn above this share of the window is cut in the context. A quarter
# leaves room for the system prompt, a few more turns and the answer even
# when one turn is huge; several huge turns are then handled by leaving the
# oldest out.
GIANT_TURN_SHARE = 0.25
# Room kept for the model's answer: an eighth of the window, at most this.
MAX_ANSWER_ROOM = 4_096
# The tool descriptions may take this share of the window before only the
# core tools are offered and the rest wait to be enabled (1,474 tokens of
# 8,192), and at most this share once groups are enabled.
TOOL_SHARE = 0.18
TOOL_SHARE_MAX = 0.35
# What the note at the head of the conversation (left-out turns, or the
# chronicle's continuation) may cost, and what a cut marker may cost.
OPENING_NOTE_TOKENS = 96
CUT_MARKER_TOKENS = 96
# Below this a cut turn would say nothing but its marker.
MIN_TURN_CAP = 2 * CUT_MARKER_TOKENS


@dataclass(frozen=True, slots=True)
class ContextLimits:
    """How large one request to the model may grow."""

    window: int  # tokens the model attends to, prompt and answer together
    giant_share: float = GIANT_TURN_SHARE
    answer_tokens: int | None = None  # None: an eighth of the window, at most max_answer
    max_answer: int = MAX_ANSWER_ROOM  # the most the model is ever asked to write

    def __post_init__(self) -> None:
        if self.window <= 0:
            raise ValueError("the context window must be a positive number of tokens")
        if not 0 < self.giant_share <= 1:
            raise ValueError("giant_share must be a share of the window, above 0 and at most 1")
        if self.answer_tokens is not None and not 0 <= self.answer_tokens < self.window:
            raise ValueError("answer_tokens must be smaller than the window")
        if self.max_answer <= 0:
            raise ValueError("max_answer must be a positive number of tokens")

    @property
    def answer_room(self) -> int:
        """Tokens always left free for the model's answer (the answer reserve)."""
        if self.answer_tokens is not None:
            return self.answer_tokens
        return min(self.window // 8, self.max_answer)

    @property
    def turn_cap(self) -> int:
        """Tokens above which one turn is cut."""
        return max(1, int(self.window * self.giant_share))

    def max_tokens(self, prompt_tokens: int) -> int:
        """What a request whose prompt is estimated at `prompt_tokens` may ask the
        model to write: the answer reserve, never more.

        The reserve is what the compaction trigger counts for the answer, so
        an answer can never grow the conversation by more than the trigger
        set aside; asking for whatever the window leaves let one answer
        push the next request past the window before any save point existed.
        The prompt was fitted to leave the reserve, so it is always granted.
        """
        del prompt_tokens  # the reserve does not depend on it
        return max(min(self.answer_room, self.max_answer), 1)


class ContextTooSmall(ValueError):
    """The window cannot hold even the tools, the prompt and the newest turn cut short."""


@dataclass(frozen=True, slots=True)
class BuiltContext:
    """A request's messages and what was done to make them fit."""

    messages: tuple[Message, ...]
    tokens: int  # estimated: messages and tool descriptions
    cut: tuple[int, ...] = ()  # IDs of turns shown cut
    left_out: tuple[int, ...] = ()  # IDs of the oldest turns left out of this request
    system_tokens: int = 0  # the system prompt as sent (identity, notes, chronicle)
    tools_tokens: int = 0  # the tool descriptions
    turn_tokens: int = 0  # the session's turns as sent, with the opening note
    answer_room: int = 0  # the reserve kept free for the answer

    @property
    def turns_sent(self) -> int:
        """Messages after the system prompt."""
        return len(self.messages) - 1


@dataclass(frozen=True, slots=True)
class RequestShape:
    """What the next request to the model carries, part by part (estimated
    tokens), for the status; `problem` says why no request fits at all."""

    window: int
    system: int = 0  # the system prompt as sent, the save point included
    save_point: int = 0  # the chronicle's share of it
    tools: int = 0  # tool descriptions offered
    tools_offered: int = 0
    tools_total: int = 0  # every tool the agent has (the rest is enabled by need)
    turns: int = 0  # messages after the system prompt
    turn_tokens: int = 0
    answer: int = 0  # the answer reserve
    left_out: int = 0  # oldest turns left out of this request
    cut: int = 0  # turns shown cut
    problem: str = ""

    @property
    def total(self) -> int:
        """The prompt and the answer reserve: what the request takes of the window."""
        return self.system + self.tools + self.turn_tokens + self.answer


@dataclass(frozen=True, slots=True)
class Overhead:
    """What a request carries besides the session's turns, in estimated tokens."""

    system: int  # the system prompt: identity, notes, the chronicle
    tools: int  # tool descriptions
    answer: int  # the answer reserve
    note: int = OPENING_NOTE_TOKENS  # the note that may open the conversation

    @property
    def total(self) -> int:
        return self.system + self.tools + self.answer + self.note


def request_overhead(system_prompt: str, limits: ContextLimits,
                     tools: Sequence[ToolSpec] = ()) -> Overhead:
    """The fixed part of a request: what the compaction trigger adds to the turns."""
    return Overhead(
        system=estimate_tokens(system_prompt) + MESSAGE_OVERHEAD,
        tools=tools_tokens(tools),
        answer=limits.answer_room,
    )


def tool_budget(window: int) -> tuple[int, int]:
    """Tokens the tool descriptions may take in a window: before tools are
    offered by need, and at most once groups are enabled."""
    return int(window * TOOL_SHARE), int(window * TOOL_SHARE_MAX)


def minimum_window(system_tokens: int, tools: int, *, answer_share: int = 8,
                   max_answer: int = MAX_ANSWER_ROOM) -> int:
    """The smallest window that holds a prompt of `system_tokens`, tool
    descriptions of `tools` and a short conversation: the newest turns at
    least cut to a minimum, the opening note, and the answer reserve."""
    conversation = 2 * (MIN_TURN_CAP + OPENING_NOTE_TOKENS) + 4 * MIN_TURN_CAP
    body = system_tokens + tools + conversation
    # the reserve is a share of the window itself (at most max_answer)
    window = body * answer_share // (answer_share - 1) + 1
    if window // answer_share > max_answer:
        window = body + max_answer
    return window


def pruned_marker(turn: Turn) -> str:
    """What stands in the context for a turn pruned from working memory."""
    what = f"the result of {turn.tool_name}" if turn.tool_name else f"a {turn.kind} turn"
    return (
        f"[{what} (turn {turn.id}, about {turn.tokens} tokens) was pruned from working "
        f"memory; call lookup_turn(id={turn.id}) to read it again]"
    )


def _prefix(turn: Turn) -> str:
    if turn.kind is TurnKind.NOTE:
        return NOTE_PREFIX
    if turn.kind is TurnKind.USER and turn.channel and turn.channel != "terminal":
        return f"[{turn.channel} message from {turn.sender or 'unknown'}]\n"
    return ""


def turn_text(turn: Turn) -> str:
    """The text a turn contributes to the context."""
    if turn.has(Flag.PRUNED):
        return pruned_marker(turn)
    return _prefix(turn) + turn.content


def cut_marker(turn: Turn, head: int, left_out: int, page: int) -> str:
    """What stands between the head and the tail of a turn too long for the context."""
    return (
        f"\n[… {left_out:,} of the {len(turn.content):,} characters of turn {turn.id} are left "
        f"out here: the turn is too long for the context and is kept whole in memory; "
        f"lookup_turn(id={turn.id}, offset={head}, limit={page}) reads on from here …]\n"
    )


def _cost(turn: Turn) -> int:
    """Estimated tokens of a turn as shown whole, without re-reading a long text."""
    if turn.has(Flag.PRUNED):
        return estimate_tokens(pruned_marker(turn)) + MESSAGE_OVERHEAD
    own = turn.tokens or estimate_tokens(own_text(turn)) + MESSAGE_OVERHEAD
    return own + estimate_tokens(_prefix(turn))


@functools.lru_cache(maxsize=32)
def _cut_text(turn: Turn, cap: int) -> tuple[str, int]:
    """A turn's text cut to at most `cap` tokens, head and tail around a marker.

    Turns never change, so a cut is made once and reused by every request
    of the cycle instead of being measured again.
    """
    prefix, content = _prefix(turn), turn.content
    # The marker's numbers are at most these, so this is what it may cost.
    marker_tokens = estimate_tokens(cut_marker(turn, len(content), len(content), MAX_PAGE_CHARS))
    room = max(cap - MESSAGE_OVERHEAD - estimate_tokens(prefix) - marker_tokens, 0)
    head_room = room * 3 // 4  # the head says more; the tail often holds the verdict
    head = fitting_chars(content, head_room)
    tail = fitting_chars(content[head.chars :], room - head.tokens, from_end=True)
    # A page of lookup_turn should itself fit under the cap at this text's density.
    density = head.tokens / head.chars if head.chars else 1.0
    page = int(min(MAX_PAGE_CHARS, max(MIN_PAGE_CHARS, cap / 2 / max(density, 1e-3))))
    marker = cut_marker(turn, head.chars, len(content) - head.chars - tail.chars, page)
    text = prefix + content[: head.chars] + marker + content[len(content) - tail.chars :]
    # Pieces joined at a line break never cost more than apart.
    tokens = estimate_tokens(prefix) + head.tokens + marker_tokens + tail.tokens
    return text, tokens + MESSAGE_OVERHEAD


def _cut_arguments(turn: Turn) -> str:
    """Arguments too long for the context, replaced by valid JSON that says so."""
    note = (
        f"the {len(turn.arguments or ''):,} characters of these arguments are too long for the "
        f"context; lookup_turn(id={turn.id}) shows them"
    )
    return json.dumps({"left_out": note})


@dataclass(frozen=True, slots=True)
class _Part:
    """One message of the context, the turns it shows and what it costs."""

    message: Message
    turn_ids: tuple[int, ...]
    tokens: int
    cut: tuple[int, ...] = ()


def _parts(turns: Iterable[Turn], cap: int | None, *, sizing: bool = False) -> list[_Part]:
    """Session turns as chat messages, assistant pieces merged; turns above
    `cap` tokens are cut (None: nothing is). When only `sizing`, a turn to cut
    is counted at the cap and left uncut: what it will cost at most."""
    parts: list[_Part] = []
    text: list[str] = []
    calls: list[ToolCall] = []
    ids: list[int] = []
    cut: list[int] = []
    tokens = 0

    def close_assistant() -> None:
        nonlocal tokens
        if text or calls:
            if not text:  # the message's own overhead, which text turns already count
                tokens += MESSAGE_OVERHEAD
            message = Message(MessageRole.ASSISTANT, "".join(text), tuple(calls))
            parts.append(_Part(message, tuple(ids), tokens, tuple(cut)))
            text.clear()
            calls.clear()
            ids.clear()
            cut.clear()
            tokens = 0

    for turn in turns:
        cost = _cost(turn)
        giant = cap is not None and cost > cap and not turn.has(Flag.PRUNED)
        if turn.kind is TurnKind.TOOL_CALL:
            arguments = turn.arguments or "{}"
            if giant:
                arguments = _cut_arguments(turn)
                cost = estimate_tokens(f"{turn.tool_name} {arguments}") + MESSAGE_OVERHEAD
            cost += 1  # the name and the arguments are two texts on the wire
            calls.append(ToolCall(turn.call_id or "", turn.tool_name or "", arguments))
        else:
            shown = turn_text(turn)
            if giant and sizing:
                shown, cost = "", cap  # type: ignore[assignment]
            elif giant:
                shown, cost = _cut_text(turn, cap)  # type: ignore[arg-type]
            if turn.kind is TurnKind.ASSISTANT:
                if calls:  # text after calls starts a new message: calls must be answered first
                    close_assistant()
                text.append(shown)
            else:
                close_assistant()
                if turn.is_result:
                    message = Message(
                        MessageRole.TOOL,
                        shown,
                        tool_call_id=turn.call_id,
                        tool_name=turn.tool_name,
                        is_error=turn.has(Flag.ERROR),
                    )
                else:
                    message = Message(MessageRole.USER, shown)
                parts.append(_Part(message, (turn.id,), cost, (turn.id,) if giant else ()))
                continue
        ids.append(turn.id)
        tokens += cost
        if giant:
            cut.append(turn.id)
    close_assistant()
    return parts


CONTINUATION = NOTE_PREFIX + "The conversation continues from the chronicle above."


def left_out_note(turn_ids: Sequence[int], window: int) -> str:
    """The note that opens a request whose oldest turns were left out."""
    return NOTE_PREFIX + (
        f"The {len(turn_ids):,} oldest turns of this session (turns {min(turn_ids)} to "
        f"{max(turn_ids)}) are left out of this request: with them it would not fit the "
        f"model's window of {window:,} tokens. They are kept in memory; lookup_turn and "
        "search_full_history read them, and the chronicle will take them in."
    )


def build_messages(
    system_prompt: str,
    turns: Sequence[Turn],
    limits: ContextLimits | None = None,
    tools: Sequence[ToolSpec] = (),
) -> tuple[Message, ...]:
    """The full message list for a model request; within `limits` when given."""
    if limits is not None:
        return build_context(system_prompt, turns, limits, tools).messages
    return _opened(system_prompt, [part.message for part in _parts(turns, None)], None)


def _opened(system_prompt: str, body: list[Message], note: str | None) -> tuple[Message, ...]:
    # Some protocols require the first turn to be the user's; after a
    # compaction the session may start with an event delivery instead.
    if note is not None:
        body.insert(0, Message(MessageRole.USER, note))
    elif body and body[0].role is not MessageRole.USER:
        body.insert(0, Message(MessageRole.USER, CONTINUATION))
    return (Message(MessageRole.SYSTEM, system_prompt), *body)


_tools_seen: list[tuple[Sequence[ToolSpec], int]] = []  # the last tools measured


def tools_tokens(tools: Sequence[ToolSpec]) -> int:
    """Estimated tokens of the tool descriptions sent with a request."""
    # Measuring the schemas costs milliseconds, on the path of every request;
    # the cycle hands over the same tuple for as long as the tools stay the same.
    if _tools_seen and _tools_seen[0][0] is tools:
        return _tools_seen[0][1]
    tokens = sum(
        estimate_tokens(json.dumps(
            {"name": t.name, "description": t.description, "parameters": t.parameters}
        )) + MESSAGE_OVERHEAD
        for t in tools
    )
    _tools_seen[:] = [(tools, tokens)]
    return tokens


def build_context(
    system_prompt: str,
    turns: Sequence[Turn],
    limits: ContextLimits,
    tools: Sequence[ToolSpec] = (),
) -> BuiltContext:
    """The messages of a request that fits `limits`, and what had to give way.

    Raises ContextTooSmall when the window cannot hold the tools, a part of
    the prompt and the newest turns even cut to a minimum.
    """
    fixed = tools_tokens(tools)
    room = limits.window - limits.answer_room - fixed
    if room < 2 * (MIN_TURN_CAP + OPENING_NOTE_TOKENS):
        raise ContextTooSmall(
            f"a window of {limits.window:,} tokens cannot hold the tool descriptions "
            f"(about {fixed:,} tokens), the answer ({limits.answer_room:,}) and a conversation"
        )
    # The prompt (identity, chronicle, notes) matters more than old turns: it
    # may take up to three quarters of the room, never the newest turns' share.
    floor = max(room // 4, MIN_TURN_CAP + OPENING_NOTE_TOKENS)
    system, system_tokens = _fitted_prompt(system_prompt, room - floor)
    budget = room - system_tokens - OPENING_NOTE_TOKENS
    cap = max(MIN_TURN_CAP, min(limits.turn_cap, budget))  # the room check keeps budget above it
    while True:
        units = _units(_parts(turns, cap, sizing=True))
        first = _first_kept(units, budget)
        if first is not None:
            break
        if cap <= MIN_TURN_CAP:
            raise ContextTooSmall(
                f"the newest turns do not fit a window of {limits.window:,} tokens even cut "
                f"to {cap} tokens each"
            )
        cap = max(MIN_TURN_CAP, cap // 2)
    left_out = tuple(i for unit in units[:first] for part in unit for i in part.turn_ids)
    # Only what is sent is cut; each cut costs no more than it was counted at.
    kept = _parts(turns[len(left_out) :], cap)
    note = left_out_note(left_out, limits.window) if left_out else None
    if left_out:
        log.info("left %d oldest turns (%d-%d) out of a request to fit a %d-token window",
                 len(left_out), left_out[0], left_out[-1], limits.window)
    messages = _opened(system, [part.message for part in kept], note)
    opened = len(messages) - 1 > len(kept)  # a note was put at the head
    opening = estimate_tokens(messages[1].content) + MESSAGE_OVERHEAD if opened else 0
    turn_tokens = opening + sum(part.tokens for part in kept)
    return BuiltContext(
        messages,
        tokens=fixed + system_tokens + turn_tokens,
        cut=tuple(i for part in kept for i in part.cut),
        left_out=left_out,
        system_tokens=system_tokens,
        tools_tokens=fixed,
        turn_tokens=turn_tokens,
        answer_room=limits.answer_room,
    )


@functools.lru_cache(maxsize=8)
def _fitted_prompt(prompt: str, budget: int) -> tuple[str, int]:
    """The system prompt, cut at its end if it alone would take more than `budget`.

    The prompt changes only when the chronicle or a pinned note does, so the
    measure is kept for the requests in between.
    """
    tokens = estimate_tokens(prompt) + MESSAGE_OVERHEAD
    if tokens <= budget:
        return prompt, tokens
    head = fitting_chars(prompt, budget - CUT_MARKER_TOKENS).chars
    cut = prompt[:head] + (
        f"\n[… the last {len(prompt) - head:,} characters of the system prompt are left out "
        "to fit the model's window …]"
    )
    return cut, estimate_tokens(cut) + MESSAGE_OVERHEAD


def _units(parts: list[_Part]) -> list[list[_Part]]:
    """Parts grouped so that none can be left out alone: an assistant message
    with tool calls and the results that answer them stay together."""
    units: list[list[_Part]] = []
    for part in parts:
        answers_open_call = (
            part.message.role is MessageRole.TOOL
            and units
            and units[-1][0].message.tool_calls
        )
        if answers_open_call:
            units[-1].append(part)
        else:
            units.append([part])
    return units


def _first_kept(units: list[list[_Part]], budget: int) -> int | None:
    """Index of the oldest unit kept so that the rest fits `budget`; None when
    even the newest alone does not."""
    total = sum(part.tokens for unit in units for part in unit)
    first = 0
    while total > budget and first < len(units) - 1:
        total -= sum(part.tokens for part in units[first])
        first += 1
    return first if total <= budget else None


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
