"""The turn: one immutable record of the conversation (memory level 3).

A turn is written once and never edited. The only thing that may change
afterwards is its set of status flags, and flags can only be gained.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class TurnKind(enum.StrEnum):
    """What a turn records."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    EVENT = "event"  # the result of a pool_event call: packed perceptions
    NOTE = "note"  # a runtime note for the model (restart, cancellation, observation)


class Role(enum.StrEnum):
    """Who speaks in the turn, in provider terms."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


class Flag(enum.IntFlag):
    """Status flags a turn may gain. Flags are never removed."""

    NONE = 0
    DISCARDED = 1  # left the session through a safe cancellation
    PRUNED = 2  # replaced by a marker in working memory (level 3 keeps it whole)
    INTERRUPTED = 4  # partial output of a cycle cut short (crash, stop)
    SYNTHETIC = 8  # written by the orchestrator, not by the model or the person
    ERROR = 16  # a tool result that reports a failure
    COMPACTED = 32  # folded into a save point
    OUTSIDE = 64  # holds words from outside the person: a stranger's event, a page, a mail
    WAITING = 128  # a tool result whose call has not run: it waits for the person's answer away
    # What the person later answered to a WAITING result's question (its
    # outcome is an event of its own): allowed (so it ran), refused, or expired.
    ALLOWED = 256
    REFUSED = 512
    EXPIRED = 1024


# The kind decides the role; keeping it in one table avoids a turn whose
# kind and role disagree.
ROLE_OF_KIND: dict[TurnKind, Role] = {
    TurnKind.USER: Role.USER,
    TurnKind.ASSISTANT: Role.ASSISTANT,
    TurnKind.TOOL_CALL: Role.ASSISTANT,
    TurnKind.TOOL_RESULT: Role.TOOL,
    TurnKind.EVENT: Role.TOOL,
    TurnKind.NOTE: Role.USER,
}

CALL_KINDS = frozenset({TurnKind.TOOL_CALL})
RESULT_KINDS = frozenset({TurnKind.TOOL_RESULT, TurnKind.EVENT})


@dataclass(frozen=True, slots=True)
class NewTurn:
    """A turn about to be appended; the store gives it an ID and a timestamp."""

    kind: TurnKind
    content: str = ""
    tool_name: str | None = None
    call_id: str | None = None
    arguments: str | None = None  # JSON text exactly as the model sent it
    channel: str | None = None
    sender: str | None = None
    cycle_id: int | None = None
    flags: Flag = Flag.NONE
    tokens: int | None = None  # estimated by the store when left out

    def __post_init__(self) -> None:
        if not isinstance(self.kind, TurnKind):
            object.__setattr__(self, "kind", TurnKind(self.kind))
        needs_call = self.kind in CALL_KINDS or self.kind in RESULT_KINDS
        if needs_call and not (self.call_id and self.tool_name):
            raise ValueError(f"a {self.kind} turn needs a call_id and a tool_name")
        if self.kind in CALL_KINDS and self.arguments is None:
            object.__setattr__(self, "arguments", "{}")

    @property
    def role(self) -> Role:
        return ROLE_OF_KIND[self.kind]


@dataclass(frozen=True, slots=True)
class Turn:
    """A stored turn with its immutable ID."""

    id: int
    ts: float  # seconds since the epoch, UTC
    kind: TurnKind
    role: Role
    content: str
    tool_name: str | None = None
    call_id: str | None = None
    arguments: str | None = None
    channel: str | None = None
    sender: str | None = None
    tokens: int = 0
    cycle_id: int | None = None
    flags: Flag = field(default=Flag.NONE)

    def has(self, flag: Flag) -> bool:
        return bool(self.flags & flag)

    @property
    def is_call(self) -> bool:
        return self.kind in CALL_KINDS

    @property
    def is_result(self) -> bool:
        return self.kind in RESULT_KINDS
