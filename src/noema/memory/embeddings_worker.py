"""Embeddings written in the background, after the turns they belong to.

Appending a turn never waits for a model: a daemon thread looks every
`poll_s` seconds for turns that lack a vector (one indexed lookup), and
once the store has been quiet for `quiet_s` embeds them in batches and
stores them, oldest first; the same loop back-fills a
store that had none. With nothing to do it only ends an idle child model
(`ChildEmbedder.reap`), so an idle agent holds no model. A failing model
is tried again after `retry_s`, and the failure is logged once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from .embeddings import Embedder, EmbeddingError, EmbeddingTable, Meaning, embed_text
from .store import TurnStore

log = logging.getLogger(__name__)

BATCH = 64  # turns embedded and stored per transaction


def backfill(
    store: TurnStore, embedder: Embedder, *, after: int = 0, batch: int = BATCH,
    progress: Callable[[int, int], None] | None = None, stop: threading.Event | None = None,
) -> tuple[int, int]:
    """Embed every turn after ID `after` that lacks a vector, oldest first;
    how many were embedded, and the turn ID reached. Vectors are stored batch
    by batch in order, so every turn below the newest vector has one and a
    stopped back-fill resumes from there. `progress(reached, total)` hears of
    each batch."""
    table = EmbeddingTable(store, embedder.name)
    done = 0
    cursor = after
    total = store.last_id()
    while cursor < total and not (stop and stop.is_set()):
        span = batch * 4
        turns = table.missing(cursor, span)
        for start in range(0, len(turns), batch):
            chunk = turns[start : start + batch]
            table.put([t.id for t in chunk], embedder.embed([embed_text(t) for t in chunk]))
            done += len(chunk)
        cursor = min(cursor + span, total)
        total = store.last_id()
        if progress is not None:
            progress(cursor, total)
    return done, cursor


class EmbeddingWorker:
    """The background writer of one store's embeddings."""

    def __init__(self, store: TurnStore, embedder: Embedder, *, poll_s: float = 2.0,
                 retry_s: float = 300.0, quiet_s: float = 2.0) -> None:
        self.store = store
        self.quiet_s = quiet_s  # a burst of appends is embedded once it is over
        self.embedder = embedder
        self.poll_s = poll_s
        self.retry_s = retry_s
        self.table = EmbeddingTable(store, embedder.name)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._cursor = self.table.newest()  # every turn up to here has been looked at
        self.failure: str | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="embeddings", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """Look for new turns now rather than at the next poll."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.embedder.close()

    def pending(self) -> int:
        """Turns not looked at yet."""
        return max(self.store.last_id() - self._cursor, 0)

    def _run(self) -> None:
        while not self._stop.is_set():
            wait = self.poll_s
            try:
                quiet = time.monotonic() - self.store.last_write() >= self.quiet_s
                if quiet and self.store.last_id() > self._cursor:
                    _, self._cursor = backfill(self.store, self.embedder, after=self._cursor,
                                               stop=self._stop, progress=self._reached)
                    self.failure = None
                reap = getattr(self.embedder, "reap", None)
                if reap is not None:
                    reap()
            except EmbeddingError as exc:
                if self.failure is None:
                    log.warning("turn embeddings paused: %s", exc)
                self.failure = str(exc)
                wait = self.retry_s
            except Exception:  # the store closed under it, or worse: logged, never raised
                if self._stop.is_set():
                    return
                log.exception("turn embeddings failed")
                wait = self.retry_s
            self._wake.wait(wait)
            self._wake.clear()

    def _reached(self, reached: int, total: int) -> None:
        self._cursor = reached


def open_meaning(
    store: TurnStore, source: str, *, base_url: str | None = None, api_key: str = "",
    model: str | None = None, poll_s: float = 2.0, quiet_s: float = 2.0,
) -> Meaning | None:
    """The meaning signal for a store, with its background writer running:
    `source` is "local" (the embedded model, in a child process), "provider"
    (`base_url`'s /v1/embeddings with `model`) or "off" (None)."""
    if source == "off":
        return None
    if source == "provider":
        from .embeddings_remote import RemoteEmbedder

        if not base_url:
            raise ValueError("embeddings from the provider need its address (models.reasoning.base_url)")
        embedder: Embedder = RemoteEmbedder(base_url, model or "", api_key)
    elif source == "local":
        from .embeddings_local import ChildEmbedder

        embedder = ChildEmbedder()
    else:
        raise ValueError(f'unknown embeddings source {source!r}; use "local", "provider" or "off"')
    worker = EmbeddingWorker(store, embedder, poll_s=poll_s, quiet_s=quiet_s)
    meaning = Meaning(store, embedder, worker=worker)
    worker.start()
    return meaning


def main(argv: list[str] | None = None) -> int:
    """`python -m noema.memory.embeddings_worker TURNS_DB`: embed every turn of
    an existing store now, with a progress bar (the agent would do it in the
    background, more slowly)."""
    import argparse

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0] if main.__doc__ else None)
    parser.add_argument("turns_db", help="the agent's turns.db")
    args = parser.parse_args(argv)
    from .embeddings_local import ChildEmbedder

    store = TurnStore(args.turns_db)
    embedder = ChildEmbedder()
    table = EmbeddingTable(store, embedder.name)
    try:
        with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn()) as bar:
            task = bar.add_task("embedding turns", total=store.last_id(), completed=table.newest())
            done, _ = backfill(store, embedder, after=table.newest(),
                               progress=lambda reached, total: bar.update(task, completed=reached,
                                                                          total=total))
        print(f"{done:,} turns embedded; {table.count():,} have a vector")
    except EmbeddingError as exc:
        print(f"cannot embed: {exc}")
        return 1
    finally:
        embedder.close()
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
