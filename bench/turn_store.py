"""Turn store figures at 100k and 1M synthetic turns.

    .venv/bin/python bench/turn_store.py [SIZE ...]      (default: 100000 1000000)

For each size: appending a turn as the agent does it (store + session, each
append its own committed transaction, in bursts of 30 turns with a pause
between bursts, with the store's upkeep thread merging the index in the
pauses, from a merged index; messages and large tool results reported
apart), the same back to back without upkeep (FTS5 merging inside the
appends, as without upkeep), lookup by ID,
a full-text query (FTS5 BM25 over an OR of the query's content words), and
restoring a 10k-turn session. Targets: append p99 <= 2 ms, lookup <= 0.5 ms,
FTS p95 <= 50 ms at 1M, restore <= 300 ms.

The databases are built once into bench/out/ (see synthetic.py); appends run
on a copy so the cached database keeps its size. Prints figures only.

    .venv/bin/python bench/turn_store.py --smoke       (1,000 turns, small counts, a scratch folder)
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from synthetic import OUT, ensure_store, sample_queries, synthetic_turns

from noema.memory.queries import STOP_WORDS
from noema.memory.session import Session
from noema.memory.store import TurnStore

BURST = 30
LARGE = 4_000  # characters: a big tool result, compressed and indexed at length


@dataclass(frozen=True)
class Scale:
    """How much of each measurement to take, and where the databases live."""

    appends: int = 3_000
    pause_s: float = 0.3
    lookups: int = 5_000
    queries: int = 300
    session_turns: int = 10_000
    folder: Path = OUT


SMOKE_SIZE = 1_000


def smoke_scale(folder: Path) -> Scale:
    """Seconds, not minutes: every figure once, on counts too small to trust."""
    return Scale(appends=90, pause_s=0.01, lookups=200, queries=20, session_turns=500,
                 folder=folder)


def percentile(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def figures(samples: Sequence[float]) -> str:
    if not samples:
        return "(none in this run)"
    ms = [s * 1000 for s in samples]
    return (f"p50 {percentile(ms, 0.50):7.3f} ms  p95 {percentile(ms, 0.95):7.3f} ms  "
            f"p99 {percentile(ms, 0.99):7.3f} ms  max {max(ms):7.2f} ms  (n={len(ms)})")


def timed(action: Callable[[], object], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


def content_expression(query: str) -> str:
    words = [w for w in query.split() if w.lower() not in STOP_WORDS]
    return " OR ".join(f'"{w}"' for w in words) or f'"{query.split()[0]}"'


def bench_size(size: int, scale: Scale) -> None:
    source = ensure_store(size, folder=scale.folder)
    print(f"\n== {size:,} turns ({source.stat().st_size / 2**20:,.0f} MiB) ==")

    scratch = scale.folder / f"scratch_{size}.db"
    for suffix in ("", "-wal", "-shm"):
        scratch.with_name(scratch.name + suffix).unlink(missing_ok=True)
    shutil.copyfile(source, scratch)
    store = TurnStore(scratch)
    fresh = iter(synthetic_turns(scale.appends * 2 + 10, seed=size + 1))
    session = Session(store, [], None)
    print("append, back to back, FTS5 merging inside appends:")
    print("  all turns            ", figures(timed(lambda: session.append(next(fresh)), scale.appends)))
    # A long-running agent's upkeep has long caught up with the backlog the
    # bulk build left; start from that steady state.
    started = time.perf_counter()
    store.conn.execute("INSERT INTO turns_fts(turns_fts) VALUES('optimize')")
    print(f"  (index merged once to a steady state in {time.perf_counter() - started:.1f} s)")
    store.start_upkeep()
    messages, large = [], []
    for n in range(scale.appends):
        new = next(fresh)
        started = time.perf_counter()
        session.append(new)
        (large if len(new.content) > LARGE else messages).append(time.perf_counter() - started)
        if n % BURST == BURST - 1:
            time.sleep(scale.pause_s)
    print(f"append, bursts of {BURST} with {scale.pause_s} s pauses, upkeep merging in the pauses:")
    print("  turns under 4 KB     ", figures(messages))
    print("  large tool results   ", figures(large))

    # A 10k-turn session over the large store, restored as at start-up.
    last = store.last_id()
    session_turns = scale.session_turns
    with store.transaction() as db:
        db.execute("DELETE FROM session_entries")
        db.executemany(
            "INSERT INTO session_entries (pos, turn_id) VALUES (?, ?)",
            [(n, last - session_turns + n) for n in range(1, session_turns + 1)],
        )
    restores = timed(lambda: Session.load(store), 7)
    print(f"restore {session_turns:,}-turn session", figures(restores))
    store.close()
    for suffix in ("", "-wal", "-shm"):
        scratch.with_name(scratch.name + suffix).unlink(missing_ok=True)

    store = TurnStore(source)
    rng = random.Random(5)
    top = store.last_id()
    print("lookup by ID          ", figures(timed(lambda: store.get(rng.randint(1, top)), scale.lookups)))
    queries = [content_expression(q) for q in sample_queries(scale.queries)]
    store.search(queries[0])  # warm the page cache as a running agent would have it
    cycle = iter(queries)
    fts = timed(lambda: store.search(next(cycle), limit=10), len(queries))
    print("FTS query (store)     ", figures(fts))
    print(f"  mean {statistics.mean(fts) * 1000:.2f} ms over {len(queries)} queries of 1-4 content words")
    store.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, help="default: 100000 1000000")
    parser.add_argument("--smoke", action="store_true",
                        help=f"{SMOKE_SIZE:,} turns and small counts in a scratch folder")
    args = parser.parse_args(argv)
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="noema-turn-store-") as scratch:
            bench_size(args.sizes[0] if args.sizes else SMOKE_SIZE, smoke_scale(Path(scratch)))
        return 0
    for size in args.sizes or [100_000, 1_000_000]:
        bench_size(size, Scale())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
