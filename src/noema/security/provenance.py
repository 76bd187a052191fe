"""Whose words a context holds: the person's, or also an outsider's.

A stranger's mail, a web page, an MCP server's answer or an event from an
unauthorised sender can carry instructions, and a model may follow them
whatever its prompt says. What must hold is about actions, not beliefs:
while outside words lead the conversation, every tool with side effects
waits for the person's yes (see `approvals.ApprovalGate`).

"Lead" means: outside words that came after the person last spoke (a typed
message, or the person's own mail or chat message, which arrive as the
person's turns). The person's newest message is what the agent works on;
outside words before it were there when the person spoke, and asking about
every write for as long as a stranger's mail sits in the context would ask
about the person's own requests all day. The residual risk, a model that
turns a person's request into a stranger's older one, is what the send guards
(unknown addresses ask) and the sandbox are for.

Turns carry the mark themselves (`Flag.OUTSIDE`, set when they are written:
an event delivery with any unauthorised sender, a tool result a tool marked
as outside text), so the verdict survives a restart and is the same for every
interface. It is a pure function of the turns in the context: the person's
next message ends it. What such a cycle leaves keeps the mark when it comes
back: a file the agent wrote (`mark_outside`, an extended attribute read by
`file_read`), a schedule, a pinned note, a save point's citations.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..memory.turns import Flag, Turn, TurnKind

_NAMED = 3  # sources named in the reason; the rest are counted


def outside_words(turns: Sequence[Turn]) -> str:
    """A short account of the outside words that came after the person's
    newest message among `turns`, or "" when none.

    The account names where the words came from (the turn and the tool or
    the event delivery), for the question put to the person.
    """
    since = _after_the_person(turns)
    sources = [_source(t) for t in turns[since:]
               if t.has(Flag.OUTSIDE) and not t.has(Flag.DISCARDED)]
    if not sources:
        return ""
    shown = ", ".join(sources[-_NAMED:])
    more = len(sources) - _NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def _after_the_person(turns: Sequence[Turn]) -> int:
    """The index just past the person's newest message (0 when none)."""
    for index in range(len(turns) - 1, -1, -1):
        turn = turns[index]
        if (turn.kind is TurnKind.USER and not turn.has(Flag.SYNTHETIC)
                and not turn.has(Flag.DISCARDED)):
            return index + 1
    return 0


def _source(turn: Turn) -> str:
    if turn.kind is TurnKind.EVENT:
        return f"events from senders who are not the person (turn {turn.id})"
    return f"what {turn.tool_name or 'a tool'} read (turn {turn.id})"


# A file the agent wrote while outside words led (with the person's yes, since
# such a write asks) holds words that may be a stranger's: the mark travels
# with the file as an extended attribute, so reading it later is reading
# outside words again, after a restart too. A person's own save (editors
# write a new file and rename it over) drops the mark with the old inode.
_MARK = "user.noema.outside"


def mark_outside(path: Path) -> bool:
    """Mark a file the agent just wrote as holding outside words; False where
    the file system keeps no extended attributes (the mark is then lost)."""
    try:
        os.setxattr(path, _MARK, b"1", follow_symlinks=False)
    except OSError:
        return False
    return True


def marked_outside(path: Path) -> bool:
    """Whether a file carries the mark of `mark_outside`."""
    try:
        return os.getxattr(path, _MARK, follow_symlinks=False) == b"1"
    except OSError:
        return False
