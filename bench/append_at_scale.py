"""Appends back to back in a large store: with FTS5's and SQLite's defaults, and with the
store's upkeep taking index merges and WAL checkpoints off the append path.

    .venv/bin/python bench/append_at_scale.py [--store PATH | --size N] [--appends N]
    .venv/bin/python bench/append_at_scale.py --smoke

The store is copied for each mode, so both start from the same index. Each
append is the agent's (store and session, its own committed transaction),
with no pause between appends: a tool storm, or a flood of events. For each
mode it prints append p50/p95/p99/max (turns under 4 KB and large tool
results apart, and the appending thread's CPU time, which a busy machine
disturbs less), the index segments left after the burst and, with upkeep, how
long the upkeep took to merge them once the burst ended and whether the index
then passes FTS5's integrity check. Target: p99 <= 2 ms at 1M turns.

`--store` takes any turn store (for example the history `locomo_at_scale.py`
caches); otherwise a synthetic store of `--size` turns is built once under
bench/out/ by `synthetic.py`. `--smoke` uses 1,000 turns and 200 appends.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from synthetic import OUT, ensure_store, synthetic_turns

from noema.memory.session import Session
from noema.memory.store import TurnStore

LARGE = 4_000  # characters: a big tool result
SETTLE_S = 120  # how long the upkeep may take to merge after the burst


def percentile(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def figures(samples: Sequence[float]) -> str:
    if not samples:
        return "(none in this run)"
    ms = [s * 1000 for s in samples]
    return (f"p50 {percentile(ms, 0.50):6.3f} ms  p95 {percentile(ms, 0.95):6.3f} ms  "
            f"p99 {percentile(ms, 0.99):6.3f} ms  max {max(ms):7.2f} ms  (n={len(ms)})")


def segments(store: TurnStore) -> int:
    return int(store.conn.execute("SELECT COUNT(DISTINCT segid) FROM turns_fts_idx").fetchone()[0])


def burst(source: Path, scratch: Path, appends: int, upkeep: bool) -> None:
    copy = scratch / "appends.db"
    for suffix in ("", "-wal", "-shm"):
        copy.with_name(copy.name + suffix).unlink(missing_ok=True)
    shutil.copyfile(source, copy)
    store = TurnStore(copy)
    if upkeep:
        store.start_upkeep()
    else:  # the defaults, whatever settings the source store was left with
        store.conn.execute("INSERT INTO turns_fts(turns_fts, rank) VALUES('automerge', 4)")
        store.conn.execute("INSERT INTO turns_fts(turns_fts, rank) VALUES('crisismerge', 16)")
    before = segments(store)
    session = Session(store, [], None)
    fresh = synthetic_turns(appends, seed=store.last_id() + 1)
    small, large, cpu = [], [], []
    for new in fresh:
        started, on_cpu = time.perf_counter(), time.thread_time()
        session.append(new)
        (large if len(new.content) > LARGE else small).append(time.perf_counter() - started)
        cpu.append(time.thread_time() - on_cpu)
    print("  turns under 4 KB     ", figures(small))
    print("  large tool results   ", figures(large))
    print("  all turns            ", figures(small + large))
    print("  all turns, CPU time  ", figures(cpu))
    print(f"  index segments: {before} before, {segments(store)} after the burst")
    if upkeep:
        started = time.perf_counter()
        while segments(store) > before + 3 and time.perf_counter() - started < SETTLE_S:
            time.sleep(0.1)
        print(f"  upkeep merged down to {segments(store)} segments "
              f"{time.perf_counter() - started:.1f} s after the burst")
        store.conn.execute("INSERT INTO turns_fts(turns_fts) VALUES('integrity-check')")
        print("  index integrity check: passed")
    store.close()
    for suffix in ("", "-wal", "-shm"):
        copy.with_name(copy.name + suffix).unlink(missing_ok=True)


def run(source: Path, appends: int, scratch: Path) -> None:
    size = TurnStore(source)
    print(f"== {appends:,} appends back to back after {size.last_id():,} turns ({source.name}) ==")
    size.close()
    print("FTS5 and SQLite defaults (merges and checkpoints inside appends):")
    burst(source, scratch, appends, upkeep=False)
    print("store upkeep running (merges and checkpoints in the background):")
    burst(source, scratch, appends, upkeep=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="a turn store to copy")
    parser.add_argument("--size", type=int, default=1_000_000, help="synthetic turns, without --store")
    parser.add_argument("--appends", type=int, default=3_000)
    parser.add_argument("--smoke", action="store_true", help="1,000 turns, 200 appends, in seconds")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="noema-append-scale-") as scratch_dir:
        scratch = Path(scratch_dir)
        if args.smoke:
            run(ensure_store(1_000, folder=scratch), 200, scratch)
        else:
            run(args.store or ensure_store(args.size, folder=OUT), args.appends, scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
