"""The files page's data: each workspace's versions, a version's diff, and
restore and undo through the same functions, guards and messages as
`noema restore` and `noema undo`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pygit2

from ...paths import AgentPaths
from ...security.policy import AccessPolicy
from ...security.settings import FilesSettings
from ...security.versions import Versions
from ...tools.registry import ToolError
from ..commands import versions as versions_cli
from ..commands.versions import VersionsCommandError

LISTED = 100  # versions shown per workspace


@dataclass(frozen=True, slots=True)
class VersionView:
    id: str
    short: str
    when: float  # a Unix time (the page writes it in the person's zone)
    author: str  # "agent" or "person"
    turn: int | None
    summary: str
    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class WorkspaceView:
    folder: str
    versions: list[VersionView]


def workspaces(files: FilesSettings, paths: AgentPaths) -> list[WorkspaceView]:
    """Every workspace with a history, its versions newest first."""
    policy = AccessPolicy.from_settings(files, paths)
    versions = Versions.of_agent(policy, files.deny, paths, watch_changes=False,
                                 allow_hard_links=files.allow_hard_links)
    try:
        return [WorkspaceView(str(store.workdir), [
            VersionView(v.id, v.short, v.when.timestamp(), v.note.author,
                        v.note.turn_id, v.note.summary, v.paths)
            for v in store.log(None, LISTED)]) for store in versions.existing()]
    except (ToolError, pygit2.GitError, OSError) as exc:
        raise VersionsCommandError(f"the history could not be read ({exc})") from None
    finally:
        versions.close()


def diff(files: FilesSettings, paths: AgentPaths, version: str) -> str:
    """What `version` changed, as `noema diff` prints it."""
    return versions_cli.diff(files, paths, None, version)


def restore(files: FilesSettings, paths: AgentPaths, folder: str, path: str, version: str) -> str:
    """`noema restore` of `path` (relative to the workspace `folder`)."""
    if folder not in {str(r.path) for r in AccessPolicy.from_settings(files, paths).writable_roots}:
        raise VersionsCommandError(f"{folder} is not one of the agent's read-write folders")
    return versions_cli.restore(files, paths, path, version, cwd=Path(folder))


def undo(files: FilesSettings, paths: AgentPaths) -> str:
    """`noema undo`: the agent's last write, unless the person edited those files since."""
    return versions_cli.undo(files, paths)


