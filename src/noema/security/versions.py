"""The histories of an agent's workspaces, each opened at its first use.

`Versions` knows every read-write root and where its repository lives, and
opens a root's `VersionStore` (`versioning.py`) when something first needs
it: the agent's first write there, or a history the person asks for. Until
then pygit2 is not even imported. It weighs 10 to 12 MB of resident memory
(its own OpenSSL and libgit2), which an agent that runs for weeks reading mail
and chat, and writes rarely, would otherwise carry from the start. The
state of the workspaces at start is recorded by a short child process
instead (`snapshot.py`).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..paths import AgentPaths
from .history import Authors
from .policy import AccessPolicy, Root

if TYPE_CHECKING:
    from .versioning import VersionStore


def gitdir_for(versions_dir: Path, workdir: Path) -> Path:
    """Where the repository of a workspace lives: one per resolved folder."""
    slug = re.sub(r"[^A-Za-z0-9_.-]", "_", workdir.name or "root")[:40]
    digest = hashlib.sha256(str(workdir).encode()).hexdigest()[:12]
    return versions_dir / f"{slug}-{digest}.git"


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """Everything opening one workspace's store needs, as plain data: the
    agent opens stores from it, and so does the start snapshot's child."""

    workdir: Path
    gitdir: Path
    authors: Authors
    exclude: tuple[str, ...] = ()
    private: tuple[Path, ...] = ()
    watch_changes: bool = True
    allow_hard_links: bool = False

    def open(self) -> VersionStore:
        """The store, opened (pygit2 is imported here)."""
        from .versioning import VersionStore

        return VersionStore(
            self.workdir,
            self.gitdir,
            authors=self.authors,
            exclude=self.exclude,
            private=self.private,
            watch_changes=self.watch_changes,
            allow_hard_links=self.allow_hard_links,
        )


class Versions:
    """The repositories of all read-write roots, opened when first needed."""

    def __init__(
        self,
        roots: Iterable[Root],
        versions_dir: Path,
        *,
        authors: Authors,
        exclude: Iterable[str] = (),
        private: Iterable[Path] = (),
        watch_changes: bool = True,
        allow_hard_links: bool = False,
    ) -> None:
        self._roots = tuple(r for r in roots if r.writable)
        self._allow_hard_links = allow_hard_links
        self._dir = versions_dir
        self._authors = authors
        self._exclude = tuple(exclude)
        self._private = tuple(private)
        self._watch = watch_changes
        self._stores: dict[Path, VersionStore] = {}
        self._mutex = threading.Lock()
        self._on_agent_version: Callable[[Path, Sequence[str]], None] | None = None

    def on_agent_version(self, listener: Callable[[Path, Sequence[str]], None] | None) -> None:
        """Tell `listener` the workspace and paths of every version of the
        agent's, in every store, open now or later."""
        with self._mutex:
            self._on_agent_version = listener
            for store in self._stores.values():
                store.on_agent_version = listener

    @classmethod
    def of_agent(
        cls, policy: AccessPolicy, deny: Iterable[str], paths: AgentPaths, *,
        watch_changes: bool = True,
        allow_hard_links: bool = False,
    ) -> Versions:
        """The versions of an agent's workspaces: the policy's read-write roots,
        without the files the person denied or the agent's own data."""
        return cls(
            policy.roots,
            paths.versions_dir,
            authors=Authors.for_agent(paths.name),
            exclude=deny,
            private=policy.protected,
            watch_changes=watch_changes,
            allow_hard_links=allow_hard_links,
        )

    @property
    def roots(self) -> tuple[Root, ...]:
        return self._roots

    def spec_for(self, root: Root) -> StoreSpec:
        """How the store of a read-write root is opened."""
        if not root.writable:
            raise ValueError(f"{root.path} is read-only and has no versions")
        return StoreSpec(
            root.path,
            gitdir_for(self._dir, root.path),
            self._authors,
            self._exclude,
            self._private,
            self._watch,
            self._allow_hard_links,
        )

    def store_for(self, root: Root) -> VersionStore:
        """The repository of a read-write root (created on first use)."""
        spec = self.spec_for(root)
        with self._mutex:
            store = self._stores.get(root.path)
            if store is None:
                store = self._stores[root.path] = spec.open()
                store.on_agent_version = self._on_agent_version
            return store

    def opened(self, root: Root) -> bool:
        """Whether this process has opened the store of `root` (and so pygit2)."""
        with self._mutex:
            return root.path in self._stores

    def existing(self) -> list[VersionStore]:
        """Stores of the roots that already have a history."""
        return [
            self.store_for(r)
            for r in self._roots
            if (gitdir_for(self._dir, r.path) / "HEAD").exists()
        ]

    def close(self) -> None:
        """Close every repository opened (never raises)."""
        with self._mutex:
            for store in self._stores.values():
                store.close()
            self._stores.clear()
