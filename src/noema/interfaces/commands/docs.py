"""The function behind `noema docs index`: bring the document library in line
with its folders, with a progress bar while it works and a summary at the end."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ...docs.indexer import IndexReport, Status
from ...docs.library import DocsLibrary
from ...docs.settings import DocsSettings
from ...docs.indexer import Progress as ProgressCallback
from ...docs.store import index_file
from ...paths import AgentPaths
from ...security.policy import AccessPolicy
from ...security.settings import FilesSettings

NOT_CONFIGURED = (
    "No document folder is configured. Add the folders to config.toml, inside a [files] "
    "root (read-only is enough), e.g.\n"
    "  [docs]\n"
    '  folders = ["~/Documents/thesis"]\n'
    "then run `noema docs index` again."
)
_LISTED = 20  # files named under each heading of the summary; the rest are counted


@contextmanager
def _progress_bar(console: Console) -> Iterator[ProgressCallback]:
    """A rich progress bar fed by the indexer's (done, total, file) calls."""
    columns = (TextColumn("indexing"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("indexing", total=None)

        def advance(done: int, total: int, _file: str) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


def index_command(
    docs: DocsSettings,
    files: FilesSettings,
    paths: AgentPaths,
    *,
    console: Console | None = None,
) -> tuple[IndexReport, str]:
    """Run one indexing pass for an agent: the report and the summary to print.
    The progress bar goes to `console` (standard error by default)."""
    if not docs.enabled:
        raise click.ClickException(NOT_CONFIGURED)
    policy = AccessPolicy.from_settings(files, paths)
    library = DocsLibrary.open(docs, policy, paths, allow_hard_links=files.allow_hard_links)
    try:
        started = time.perf_counter()
        with _progress_bar(console or Console(stderr=True)) as progress:
            report = library.index(progress)
        elapsed = time.perf_counter() - started
        documents, sections = library.store.counts()
    finally:
        library.close()
    return report, summary(report, elapsed, documents, sections, paths)


def summary(
    report: IndexReport, elapsed: float, documents: int, sections: int, paths: AgentPaths
) -> str:
    """What a pass did, then the folders it could not use and the files that
    failed, were refused or skipped, with why."""
    lines = [f"Indexed in {elapsed:.1f} s: {report.summary()}.",
             f"The library holds {documents} documents in {sections} sections "
             f"({index_file(paths)})."]
    for status, heading in ((Status.UNUSABLE, "folders that cannot be indexed (see [docs] "
                                              "folders and [files] roots)"),
                            (Status.FAILED, "failed"),
                            (Status.REFUSED, "refused by the access policy (never indexed)"),
                            (Status.SKIPPED, "skipped (not documents)")):
        found = report.of(status)
        if not found:
            continue
        lines.append(f"{heading}:")
        lines += [f"  {o.path}: {o.reason}" for o in found[:_LISTED]]
        if len(found) > _LISTED:
            lines.append(f"  … and {len(found) - _LISTED} more")
    return "\n".join(lines)
