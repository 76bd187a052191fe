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
"""

from __future__ import annotations

import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from synthetic import OUT, ensure_store, sample_queries, synthetic_turns

from noema.memory.queries import STOP_WORDS
from noema.memory.session import Session
from noema.memory.store import TurnStore

APPENDS = 3_000
BURST = 30
PAUSE_S = 0.3
LARGE = 4_000  # characters: a big tool result, compressed and indexed at length
LOOKUPS = 5_000
QUERIES = 300
SESSION_TURNS = 10_000


def percentile(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def figures(samples: Sequence[float]) -> str:
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


def bench_size(size: int) -> None:
    source = ensure_store(size)
    print(f"\n== {size:,} turns ({source.stat().st_size / 2**20:,.0f} MiB) ==")

    scratch = OUT / f"scratch_{size}.db"
    for suffix in ("", "-wal", "-shm"):
        scratch.with_name(scratch.name + suffix).unlink(missing_ok=True)
    shutil.copyfile(source, scratch)
    store = TurnStore(scratch)
    fresh = iter(synthetic_turns(APPENDS * 2 + 10, seed=size + 1))
    session = Session(store, [], None)
    print("append, back to back, FTS5 merging inside appends:")
    print("  all turns            ", figures(timed(lambda: session.append(next(fresh)), APPENDS)))
    # A long-running agent's upkeep has long caught up with the backlog the
    # bulk build left; start from that steady state.
    started = time.perf_counter()
    store.conn.execute("INSERT INTO turns_fts(turns_fts) VALUES('optimize')")
    print(f"  (index merged once to a steady state in {time.perf_counter() - started:.1f} s)")
    store.start_upkeep()
    messages, large = [], []
    for n in range(APPENDS):
        new = next(fresh)
        started = time.perf_counter()
        session.append(new)
        (large if len(new.content) > LARGE else messages).append(time.perf_counter() - started)
        if n % BURST == BURST - 1:
            time.sleep(PAUSE_S)
    print(f"append, bursts of {BURST} with {PAUSE_S} s pauses, upkeep merging in the pauses:")
    print("  turns under 4 KB     ", figures(messages))
    print("  large tool results   ", figures(large))

    # A 10k-turn session over the large store, restored as at start-up.
    last = store.last_id()
    with store.transaction() as db:
        db.execute("DELETE FROM session_entries")
        db.executemany(
            "INSERT INTO session_entries (pos, turn_id) VALUES (?, ?)",
            [(n, last - SESSION_TURNS + n) for n in range(1, SESSION_TURNS + 1)],
        )
    restores = timed(lambda: Session.load(store), 7)
    print(f"restore {SESSION_TURNS:,}-turn session", figures(restores))
    store.close()
    for suffix in ("", "-wal", "-shm"):
        scratch.with_name(scratch.name + suffix).unlink(missing_ok=True)

    store = TurnStore(source)
    rng = random.Random(5)
    top = store.last_id()
    print("lookup by ID          ", figures(timed(lambda: store.get(rng.randint(1, top)), LOOKUPS)))
    queries = [content_expression(q) for q in sample_queries(QUERIES)]
    store.search(queries[0])  # warm the page cache as a running agent would have it
    cycle = iter(queries)
    fts = timed(lambda: store.search(next(cycle), limit=10), len(queries))
    print("FTS query (store)     ", figures(fts))
    print(f"  mean {statistics.mean(fts) * 1000:.2f} ms over {len(queries)} queries of 1-4 content words")
    store.close()


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [100_000, 1_000_000]
    for size in sizes:
        bench_size(size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
