"""The turn: one immutable record of the conversation (memory level 3).

A turn is written once and never edited. The only thing that may change
afterwards is its set of status flags, and flags can only be gained.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
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


class SourceKind(enum.StrEnum):
    """Where outside words came from."""

    MAIL = "mail"  # a mail from someone who is not the person
    TELEGRAM = "telegram"  # a Telegram message from someone else (a forward, another chat)
    WEB = "web"  # a web page or a search backend's results
    WEBHOOK = "webhook"  # a webhook call without the person's token
    LOG = "log"  # a line of a log file (anyone who can write to it wrote it)
    FOLDER = "folder"  # a watched folder's change
    EVENT = "event"  # another sensor's event from a sender who is not the person
    SERVER = "server"  # a tool server's (MCP) answer
    TOOL = "tool"  # what a tool returned that does not vouch for its words
    FILE = "file"  # a file whose content came from outside words


@dataclass(frozen=True, slots=True, order=True)
class Source:
    """Whose outside words a thing holds: the kind of source and who it is
    (an address, a URL, a server's or a tool's name, a path)."""

    kind: SourceKind
    who: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, SourceKind):
            object.__setattr__(self, "kind", SourceKind(self.kind))


def sources_union(*groups: Iterable[Source]) -> tuple[Source, ...]:
    """The sources of several things together: each once, in a stable order."""
    return tuple(sorted({s for group in groups for s in group}))


def sources_to_text(sources: Iterable[Source]) -> str | None:
    """The column form of sources (None for none): a JSON list of [kind, who]."""
    listed = [[s.kind.value, s.who] for s in sources_union(sources)]
    return json.dumps(listed, ensure_ascii=False) if listed else None


def sources_from_text(text: str | None) -> tuple[Source, ...]:
    """Sources read back from their column; a value that is not readable is an
    unknown outside source, never none (what held outside words still does)."""
    if not text:
        return ()
    try:
        return sources_union(Source(SourceKind(k), str(w)) for k, w in json.loads(text))
    except (ValueError, TypeError):
        return (Source(SourceKind.TOOL, "unknown"),)


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
    # Whose outside words the turn holds or rests on (empty: the person's or
    # the agent's own). A result or an event with sources is also `OUTSIDE`.
    sources: tuple[Source, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.kind, TurnKind):
            object.__setattr__(self, "kind", TurnKind(self.kind))
        object.__setattr__(self, "sources", sources_union(self.sources))
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
    sources: tuple[Source, ...] = ()

    def has(self, flag: Flag) -> bool:
        return bool(self.flags & flag)

    @property
    def is_call(self) -> bool:
        return self.kind in CALL_KINDS

    @property
    def is_result(self) -> bool:
        return self.kind in RESULT_KINDS


def sources_of(turn: Turn) -> tuple[Source, ...]:
    """Whose outside words a turn holds or rests on; a turn marked outside
    before sources were recorded names what it was (never nobody)."""
    if turn.sources:
        return turn.sources
    if not turn.has(Flag.OUTSIDE):
        return ()
    if turn.kind is TurnKind.EVENT:
        return (Source(SourceKind.EVENT, turn.sender or ""),)
    return (Source(SourceKind.TOOL, turn.tool_name or ""),)
