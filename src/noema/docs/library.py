"""The document library of one agent: its index file, the indexer bound to
the access policy, and the loop that keeps the index fresh while the agent runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import watchfiles

from ..paths import AgentPaths
from ..security.policy import Access, AccessDenied, AccessPolicy
from .indexer import Indexer, IndexReport, Progress
from .settings import DocsSettings
from .store import DocsStore, index_file

log = logging.getLogger(__name__)

Watch = Callable[..., AsyncIterator[set[tuple[watchfiles.Change, str]]]]


@dataclass
class DocsLibrary:
    """The index and the indexer; one per agent process."""

    settings: DocsSettings
    store: DocsStore
    indexer: Indexer
    # Set by close(): a pass running in a worker thread stops after its file.
    _closing: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def open(
        cls,
        settings: DocsSettings,
        policy: AccessPolicy,
        paths: AgentPaths,
        *,
        allow_hard_links: bool = False,
    ) -> DocsLibrary:
        """The library of an agent, its index opened (created when missing)."""
        store = DocsStore.open_or_rebuild(index_file(paths))
        indexer = Indexer(settings, policy, store, allow_hard_links=allow_hard_links)
        return cls(settings, store, indexer)

    def index(self, progress: Progress | None = None) -> IndexReport:
        """Bring the index in line with the folders (changed files only)."""
        return self.indexer.run(progress, self._closing)

    def watched_folders(self) -> list[str]:
        """The configured folders the policy lets the agent read, resolved."""
        found = []
        for folder in self.settings.folders:
            try:
                target = self.indexer.policy.check(str(folder.path), Access.READ)
            except AccessDenied:
                continue  # `noema docs index` says why
            if target.path.is_dir():
                found.append(str(target.path))
        return found

    async def keep_fresh(
        self,
        *,
        watch: Watch = watchfiles.awatch,
        debounce_ms: int = 1000,
        on_report: Callable[[IndexReport], None] | None = None,
        watch_options: dict[str, Any] | None = None,
    ) -> None:
        """Run until cancelled: a pass now, then one after every batch of changes
        in the folders. A pass reads only what changed, so a batch costs a walk
        of the folders and the parsing of the files that did change."""
        def reported(report: IndexReport) -> None:
            log.info("document library: %s", report.summary())
            if on_report is not None:
                on_report(report)

        folders = self.watched_folders()
        if not folders:
            reported(await asyncio.to_thread(self.index))
            return
        changes = watch(*folders, debounce=debounce_ms, **(watch_options or {}))
        # The watcher starts before the first pass, so that a file written
        # while that pass runs is caught by the next one.
        waiting = asyncio.ensure_future(anext(changes))
        try:
            await asyncio.sleep(0)
            reported(await asyncio.to_thread(self.index))
            while True:
                await waiting
                waiting = asyncio.ensure_future(anext(changes))
                try:
                    reported(await asyncio.to_thread(self.index))
                except Exception:  # a bug or a disk error must not stop the watching
                    log.exception("reindexing the document folders failed")
        finally:
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await waiting
            await changes.aclose()

    def close(self) -> None:
        self._closing.set()
        self.store.close()
