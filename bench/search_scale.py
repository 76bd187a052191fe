"""`search_full_history` latency at 100k and 1M synthetic turns.

    .venv/bin/python bench/search_scale.py [SIZE ...]    (default: 100000 1000000)

Runs the same natural-language queries through the full search (query
reading, posting budget, BM25 candidates, neighbour and name signals,
snippets) plain, with a role filter and with a time window, and, for
comparison, plain FTS5 BM25 over every word of the query. Target: p95 <= 50
ms at 1M. Prints figures only; the databases come from synthetic.py.

    .venv/bin/python bench/search_scale.py --smoke      (1,000 turns, 20 queries, a scratch folder)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from synthetic import OUT, ensure_store, sample_queries

from noema.memory.search import HistorySearch, plain_expression
from noema.memory.store import TurnStore

QUERIES = 300
SMOKE_SIZE = 1_000
SMOKE_QUERIES = 20


def percentile(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def figures(samples: Sequence[float]) -> str:
    ms = [s * 1000 for s in samples]
    return (f"p50 {percentile(ms, 0.50):7.2f} ms  p95 {percentile(ms, 0.95):7.2f} ms  "
            f"p99 {percentile(ms, 0.99):7.2f} ms  max {max(ms):7.1f} ms")


def run(name: str, queries: Sequence[str], action: Callable[[str], object]) -> list:
    outcomes, samples = [], []
    for query in queries:
        started = time.perf_counter()
        outcomes.append(action(query))
        samples.append(time.perf_counter() - started)
    print(f"  {name:34s} {figures(samples)}")
    return outcomes


def bench_size(size: int, queries_count: int = QUERIES, folder: Path = OUT) -> None:
    store = TurnStore(ensure_store(size, folder=folder))
    search = HistorySearch(store)
    queries = sample_queries(queries_count)
    top = store.last_id()
    newest = store.get(top)
    assert newest is not None
    print(f"\n== {size:,} turns ==")
    search.search(queries[-1])  # warm the page cache as a running agent would have it
    results = run("search_full_history", queries, lambda q: search.search(q, limit=10))
    run("  roles=[user]", queries, lambda q: search.search(q, limit=10, roles=["user"]))
    middle = store.get(top // 2)
    assert middle is not None
    run("  since (latest half)", queries, lambda q: search.search(q, limit=10, since=middle.ts))
    run("plain FTS5 BM25, every word OR-ed", queries[:40],
        lambda q: store.search(plain_expression(q), limit=10))
    budgeted = sum(1 for r in results if r.recent_only)
    dropped = sum(1 for r in results if r.unsearched)
    joined = sum(1 for r in results if r.joined)
    empty = sum(1 for r in results if not r.hits)
    print(f"  queries: {len(results)}; with words left out {dropped}; with words joined to "
          f"rarer ones {joined}; searched only the latest turns {budgeted}; no hit {empty}")
    search.close()
    store.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, help="default: 100000 1000000")
    parser.add_argument("--smoke", action="store_true",
                        help=f"{SMOKE_SIZE:,} turns and {SMOKE_QUERIES} queries in a scratch folder")
    args = parser.parse_args(argv)
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="noema-search-scale-") as scratch:
            bench_size(args.sizes[0] if args.sizes else SMOKE_SIZE, SMOKE_QUERIES, Path(scratch))
        return 0
    for size in args.sizes or [100_000, 1_000_000]:
        bench_size(size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
