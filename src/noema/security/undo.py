"""Bringing back earlier versions: restore one file, or undo the agent's
last write.

An undo never overwrites the person's later work: if any file the agent's
write touched has changed since (by the person, or by anything else), the
undo is refused with the reason and nothing is changed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import pygit2

from ..tools.registry import ToolError
from . import fsafe
from .history import Author, ChangeNote, Entry, Version, VersionNotFound
from .versioning import VersionStore
from .worktree import EXEC_MODE, LINK_MODE


class UndoRefused(ToolError):
    """An undo that would lose later edits, or that has nothing to undo."""


@dataclass(frozen=True, slots=True)
class Undone:
    """An undo that happened: what it reverted and the version it made."""

    workspace: str
    reverted: Version
    version: Version | None


def put(store: VersionStore, path: str, entry: Entry | None) -> None:
    """Make `path` in the workspace hold `entry` (None: remove it)."""
    rel = PurePosixPath(path)
    links = store.allow_hard_links
    if entry is None:
        fsafe.remove_file(store.workdir, rel)
    elif entry.mode == LINK_MODE:
        fsafe.write_link(store.workdir, rel, os.fsdecode(entry.data), allow_hard_links=links)
    else:
        fsafe.atomic_write(
            store.workdir,
            rel,
            entry.data,
            mode=0o755 if entry.mode == EXEC_MODE else None,
            allow_hard_links=links,
        )


def restore(store: VersionStore, path: str, version: str, note: ChangeNote) -> Version | None:
    """Put the content `path` had in `version` back in the workspace.

    The current content is recorded first, so a restore is itself undoable.
    """
    commit = store.resolve(version)
    entry = store.entry(commit, path)
    if entry is None:
        if store.is_folder(commit, path):
            raise ToolError(
                f"{path} is a folder in version {version}; restore its files one by one"
            )
        raise VersionNotFound(
            f"{path} did not exist in version {str(commit.id)[:8]}; file_history lists the "
            "versions that hold it"
        )
    with store.change(note, [path]) as recorded:
        put(store, path, entry)
    return recorded.version


def last_agent_change(store: VersionStore) -> pygit2.Commit | None:
    """The newest agent version that no undo has reverted yet."""
    undone: set[str] = set()
    for commit in store.commits():
        note = ChangeNote.parse(commit.message)
        if note.undoes:
            undone.add(note.undoes)
        elif note.author == "agent" and str(commit.id) not in undone:
            return commit
    return None


def undo_last(stores: Sequence[VersionStore], *, by: Author = "person") -> Undone:
    """Revert the agent's most recent write across the workspaces."""
    candidates = [(c.commit_time, s, c) for s in stores if (c := last_agent_change(s)) is not None]
    if not candidates:
        raise UndoRefused("there is nothing to undo: no agent write is left that was not undone")
    _, store, target = max(candidates, key=lambda item: item[0])
    reverted = store.version_of(target)
    parent = target.parents[0] if target.parents else None
    what = reverted.note.summary + (
        f", turn {reverted.note.turn_id}" if reverted.note.turn_id else ""
    )
    note = ChangeNote(
        by,
        f"Undo of {reverted.short} ({what})",
        tool="undo" if by == "agent" else None,
        undoes=reverted.id,
    )
    with store.locked():
        store.record_person(reverted.paths)
        _refuse_if_left_out(store, reverted)
        _refuse_if_changed_since(store, target, reverted)
        with store.change(note, list(reverted.paths)) as recorded:
            for path in reverted.paths:
                put(store, path, store.entry(parent, path) if parent is not None else None)
    return Undone(str(store.workdir), reverted, recorded.version)


def _refuse_if_left_out(store: VersionStore, reverted: Version) -> None:
    """A file the history cannot hold now (a hard link, say) cannot be put back
    without breaking what the person made of it."""
    left_out = {s.path: s.reason for s in store.left_out()}
    for path in reverted.paths:
        if path in left_out:
            raise UndoRefused(
                f"cannot undo {reverted.short} ({reverted.note.summary}): {path} "
                f"{left_out[path]}. Nothing was changed."
            )


def _refuse_if_changed_since(store: VersionStore, target: pygit2.Commit, reverted: Version) -> None:
    head = store.head()
    for path in reverted.paths:
        if store.entry_id(head, path) == store.entry_id(target, path):
            continue
        culprit = _first_change_after(store, target, path)
        who = "the person" if culprit is None or culprit.note.author == "person" else "the agent"
        where = f" in version {culprit.short} ({culprit.when:%Y-%m-%d %H:%M})" if culprit else ""
        raise UndoRefused(
            f"cannot undo {reverted.short} ({reverted.note.summary}): {path} was changed "
            f"after it by {who}{where}, and undoing would lose that edit. Nothing was "
            f"changed. See `noema diff {path}` and bring back a version by hand with "
            f"`noema restore {path} VERSION` if you want."
        )


def _first_change_after(store: VersionStore, target: pygit2.Commit, path: str) -> Version | None:
    """The oldest version after `target` that changed `path`."""
    found: Version | None = None
    for commit in store.commits():
        if commit.id == target.id:
            break
        before = commit.parents[0] if commit.parents else None
        if store.entry_id(commit, path) != store.entry_id(before, path):
            found = store.version_of(commit, with_paths=False)
    return found
