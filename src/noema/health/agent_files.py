"""What an agent's folder says about its own files: a turn store that should be
there, and the versions repositories to check.

An empty or missing `turns.db` is a new agent, unless the agent has run
before. It has when its sensory archive holds anything or a versions
repository exists: both are only ever made by a running agent, after its
turn store was created. Then the empty turn store is a lost history, not a
new one, and starting on it would silently begin a new conversation.
"""

from __future__ import annotations

from pathlib import Path

from ..paths import AgentPaths
from .sqlite_files import has_wal


def lost_history(paths: AgentPaths) -> str | None:
    """Why the turn store looks lost (missing or empty while the agent has run
    before), as a reason to follow "turns.db is damaged: ", or None."""
    turns = paths.turns_db
    if turns.is_file() and (turns.stat().st_size > 0 or has_wal(turns)):
        return None  # a store killed before its first checkpoint is all in its WAL
    if turns.exists() and not turns.is_file():
        return None  # not a file at all: the damage check says so
    markers = []
    archive = paths.archive_db
    if archive.is_file() and archive.stat().st_size > 0:
        markers.append(archive.name)
    if repositories(paths):
        markers.append("versions/")
    if not markers:
        return None
    state = "it is empty (0 bytes)" if turns.exists() else "it is missing"
    return (f"{state}, but this agent has run before ({' and '.join(markers)} "
            "hold its traces): its conversation was lost or cut")


def repositories(paths: AgentPaths) -> list[Path]:
    """The versions repositories of the agent's workspaces."""
    folder = paths.versions_dir
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.git") if p.is_dir())
