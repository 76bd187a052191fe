"""`noema history`, `noema diff`, `noema restore` and `noema undo`: the
person's view of the workspaces' histories.

Each function takes the agent's file settings and paths and returns the text
to print, or raises VersionsCommandError with a message meant for the
person. Paths may be absolute, start with '~', or be relative to the
current folder when it lies in a workspace (to the first workspace
otherwise). These are the person's own actions: restores and undos made
here are attributed to them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pygit2

from ...paths import AgentPaths
from ...security.history import ChangeNote, left_out_text
from ...security.policy import AccessPolicy, Root, real
from ...security.settings import FilesSettings
from ...security.undo import restore as restore_file
from ...security.undo import undo_last
from ...security.versioning import VersionStore
from ...security.versions import Versions
from ...tools.registry import ToolError


class VersionsCommandError(Exception):
    """A history command that cannot be done; the message says why."""


@contextmanager
def _opened(files: FilesSettings, paths: AgentPaths) -> Iterator[tuple[AccessPolicy, Versions]]:
    """The policy and the histories for one command; whatever goes wrong comes
    out as a VersionsCommandError, never as a traceback."""
    policy = AccessPolicy.from_settings(files, paths)
    versions = Versions.of_agent(
        policy, files.deny, paths, watch_changes=False, allow_hard_links=files.allow_hard_links
    )
    try:
        yield policy, versions
    except ToolError as exc:
        raise VersionsCommandError(str(exc)) from None
    except (pygit2.GitError, OSError) as exc:
        raise VersionsCommandError(
            f"the history could not be read or written ({exc}); nothing else was changed"
        ) from None
    finally:
        versions.close()


def _with_left_out(text: str, stores: list[VersionStore]) -> str:
    """`text`, followed by what the histories cannot hold, if anything."""
    notes = [left_out_text(s.left_out(), limit=20) for s in stores]
    return "\n".join([text, *(n for n in notes if n)])


def _locate(policy: AccessPolicy, path: str, cwd: Path | None) -> tuple[Root, str]:
    text = os.path.expanduser(path.strip())
    if not text:
        raise VersionsCommandError("the path is empty")
    if "\0" in text:
        raise VersionsCommandError("the path contains a NUL character; no file has such a name")
    candidate = Path(text)
    if not candidate.is_absolute():
        here = real(cwd or Path.cwd())
        inside = policy.root_of(here)
        base = here if inside is not None and inside.writable else policy.workspace.path
        candidate = base / candidate
    resolved = real(candidate)
    root = policy.root_of(resolved)
    if root is None or not root.writable:
        where = ", ".join(str(r.path) for r in policy.writable_roots) or "none configured"
        raise VersionsCommandError(
            f"{resolved} is not in a versioned folder (the read-write roots: {where})"
        )
    rel = resolved.relative_to(root.path).as_posix()
    if ".git" in rel.split("/"):
        raise VersionsCommandError(f"{resolved} is inside a .git folder, which is never versioned")
    return root, rel


def _never_existed(store: VersionStore, rel: str) -> bool:
    """Whether nothing stands at `rel` now and no version ever held it."""
    if os.path.lexists(store.workdir / rel):
        return False
    return not store.log(rel, 1)


def _existing(versions: Versions, root: Root) -> VersionStore:
    stores = {s.workdir: s for s in versions.existing()}
    if root.path not in stores:
        raise VersionsCommandError(
            f"{root.path} has no history yet: the agent has not written there"
        )
    return stores[root.path]


def history(
    files: FilesSettings,
    paths: AgentPaths,
    path: str | None = None,
    *,
    limit: int = 30,
    cwd: Path | None = None,
) -> str:
    """Versions, newest first: short ID, local time, person or agent, turn, what."""
    with _opened(files, paths) as (policy, versions):
        if path is not None:
            root, rel = _locate(policy, path, cwd)
            found = _existing(versions, root).log(None if rel == "." else rel, limit)
            if not found:
                return f"No versions of {rel} in {root.path}."
            return f"{rel} in {root.path}, newest first:\n" + "\n".join(v.line() for v in found)
        blocks = []
        for store in versions.existing():
            listed = store.log(None, limit)
            lines = "\n".join(v.line() for v in listed) or "(no versions yet)"
            blocks.append(f"{store.workdir}, newest first:\n{lines}")
        return "\n\n".join(blocks) or "No history yet: the agent has not written anything."


def diff(
    files: FilesSettings,
    paths: AgentPaths,
    path: str | None = None,
    version: str | None = None,
    *,
    cwd: Path | None = None,
) -> str:
    """With a version: what that version changed. Without: the changes on disk
    that no version holds yet, and the files no version can hold. `path`
    limits either to a file or folder."""
    with _opened(files, paths) as (policy, versions):
        if path is not None:
            root, rel = _locate(policy, path, cwd)
            stores = [(_existing(versions, root), None if rel == "." else rel)]
        else:
            stores = [(s, None) for s in versions.existing()]
        if not stores:
            return "No history yet: the agent has not written anything."
        texts = []
        for store, rel in stores:
            if version is not None:
                try:
                    store.resolve(version)
                except ToolError:
                    continue
            texts.append(store.patch(rel, version))
        if version is not None and not texts:
            raise VersionsCommandError(
                f"no workspace has a version {version!r}; see `noema history`"
            )
        joined = "".join(texts)
        if not joined and path is not None:
            (store, rel), = stores
            if rel is not None and _never_existed(store, rel):
                raise VersionsCommandError(
                    f"{rel} has never existed in {store.workdir}: it is not there now and no "
                    "version ever held it (`noema history` lists the versions)"
                )
        if version is not None:
            return joined or "No changes."
        return _with_left_out(
            joined.rstrip("\n") or "No changes since the last version.", [s for s, _ in stores]
        )


def restore(
    files: FilesSettings, paths: AgentPaths, path: str, version: str, *, cwd: Path | None = None
) -> str:
    """Bring a file back to its content in `version`; the current content is
    recorded first, so nothing is lost."""
    with _opened(files, paths) as (policy, versions):
        root, rel = _locate(policy, path, cwd)
        store = _existing(versions, root)
        commit = store.resolve(version)
        note = ChangeNote("person", f"Restore of {rel} to {str(commit.id)[:8]} (noema restore)")
        made = restore_file(store, rel, version, note)
        if made is None:
            return (
                f"{rel} already has the content of version {str(commit.id)[:8]}; nothing changed."
            )
        return (
            f"Restored {rel} to version {str(commit.id)[:8]}; recorded as version {made.short}. "
            "The content it had before is kept in the history."
        )


def undo(files: FilesSettings, paths: AgentPaths) -> str:
    """Revert the agent's last write, unless the person edited those files since."""
    with _opened(files, paths) as (_, versions):
        done = undo_last(versions.existing(), by="person")
        reverted = done.reverted
        turn = f", turn {reverted.note.turn_id}" if reverted.note.turn_id is not None else ""
        made = f"; recorded as version {done.version.short}" if done.version else ""
        return (
            f"Undid {reverted.short} ({reverted.note.summary}{turn}) in {done.workspace}: "
            f"{', '.join(reverted.paths)} back as before that write{made}."
        )
