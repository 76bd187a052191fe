"""What a version is: who made it (the person or the agent), in which turn,
with which tool, and how it reads in a history listing. The facts travel
in the commit message as `Noema-*` trailers, so the ordinary git command
shows them too."""

from __future__ import annotations

import getpass
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from ..tools.registry import ToolError

if TYPE_CHECKING:  # loaded with the first store opened (see versions.py)
    import pygit2

Author = Literal["person", "agent"]
_TRAILER = re.compile(r"^Noema-(Author|Turn|Tool|Undoes): (.*)$", re.M)


class VersionNotFound(ToolError):
    """A version name that the workspace's history does not know."""


@dataclass(frozen=True, slots=True)
class ChangeNote:
    """What a version says about itself; stored as the commit message."""

    author: Author
    summary: str
    turn_id: int | None = None
    tool: str | None = None
    undoes: str | None = None  # the full ID of the version this one reverts

    def message(self) -> str:
        lines = [
            " ".join(self.summary.split())[:200] or "(no summary)",
            "",
            f"Noema-Author: {self.author}",
        ]
        if self.turn_id is not None:
            lines.append(f"Noema-Turn: {self.turn_id}")
        if self.tool:
            lines.append(f"Noema-Tool: {self.tool}")
        if self.undoes:
            lines.append(f"Noema-Undoes: {self.undoes}")
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, message: str) -> ChangeNote:
        fields = dict(_TRAILER.findall(message))
        turn = fields.get("Turn", "")
        author: Author = "agent" if fields.get("Author") == "agent" else "person"
        return cls(
            author=author,
            summary=message.split("\n", 1)[0],
            turn_id=int(turn) if turn.isdigit() else None,
            tool=fields.get("Tool") or None,
            undoes=fields.get("Undoes") or None,
        )


@dataclass(frozen=True, slots=True)
class Skipped:
    """A path a recording had to leave out of the history, and why."""

    path: str
    reason: str  # a phrase that follows the path: "is a name git refuses (...)"

    def line(self) -> str:
        return f"{self.path} {self.reason}"


def left_out_text(skipped: Sequence[Skipped], limit: int = 5) -> str:
    """One sentence naming what the history could not hold ('' for nothing),
    for the model's tool results and the person's commands."""
    if not skipped:
        return ""
    shown = "; ".join(s.line() for s in skipped[:limit])
    more = f"; and {len(skipped) - limit} more" if len(skipped) > limit else ""
    return f"Not recorded in the history, so not restorable: {shown}{more}."


@dataclass(frozen=True, slots=True)
class Version:
    """One recorded state of a workspace."""

    id: str
    when: datetime
    note: ChangeNote
    paths: tuple[str, ...] = field(default=())
    skipped: tuple[Skipped, ...] = field(default=())  # left out of this version

    @property
    def short(self) -> str:
        return self.id[:8]

    def line(self) -> str:
        """One readable line: ID, local time, who, turn, what."""
        who = "agent " if self.note.author == "agent" else "person"
        turn = f"turn {self.note.turn_id}" if self.note.turn_id is not None else ""
        return (
            f"{self.short}  {self.when:%Y-%m-%d %H:%M:%S}  {who}  {turn:<10}  {self.note.summary}"
        )


@dataclass(slots=True)
class Recorded:
    """Filled in when a change block ends: the version it made, if any, and
    the paths that the recordings around the change had to leave out."""

    version: Version | None = None
    skipped: tuple[Skipped, ...] = ()


@dataclass(frozen=True, slots=True)
class Authors:
    """The two identities that versions are attributed to."""

    person_name: str
    person_email: str
    agent_name: str
    agent_email: str

    @classmethod
    def for_agent(cls, agent: str) -> Authors:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "person"
        return cls(user, f"{user}@localhost", f"Noema ({agent})", f"noema-{agent}@localhost")

    def signature(self, author: Author) -> pygit2.Signature:
        import pygit2

        now = time.time()
        offset = int(datetime.fromtimestamp(now).astimezone().utcoffset().total_seconds() // 60)  # type: ignore[union-attr]
        if author == "agent":
            return pygit2.Signature(self.agent_name, self.agent_email, int(now), offset)
        return pygit2.Signature(self.person_name, self.person_email, int(now), offset)


@dataclass(frozen=True, slots=True)
class Entry:
    """A file (or link) as a version recorded it."""

    data: bytes
    mode: int


def when_of(signature: pygit2.Signature) -> datetime:
    """The local time of a signature."""
    return datetime.fromtimestamp(signature.time, UTC).astimezone()
