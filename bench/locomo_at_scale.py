"""LoCoMo retrieval with each conversation placed in a long history.

    .venv/bin/python bench/locomo_at_scale.py PATH [--distractors N] [--after] [--cache DIR] [--ranks CATEGORY]
    .venv/bin/python bench/locomo_at_scale.py --smoke

`bench/locomo_retrieval.py` gives every conversation an empty store, which
hides how recall falls as a store grows. Here each conversation follows N
turns of distractor history (the `--after` variant: is followed by them, so
the conversation is the old part of the store). The distractors are the
agent's mix of turn kinds and lengths from `synthetic.py` (the person's
messages, replies, tool calls and results, delivered events, notes), written
in English words drawn at their real frequencies (`wordfreq`), sent by people
drawn from a pool so that names recur, and dated before the conversation (or
after it), so that dates in questions still mean something.

The history is built once into the cache folder and copied for each
conversation (the `--after` store is built once per conversation, since IDs
follow time). Loading and scoring are `locomo_retrieval.py`'s.

For the plan in the working tree and, as the baseline in the same run, the
plan of `--baseline REV` (read from git, default the plan before candidates
were chosen with the turns around them; `c5b3dd0` is the older plan with a
budget of postings that dropped words), it prints recall@5/@10 per category and for categories 1-4,
query p50/p95 (wall clock, and CPU time, which a busy machine disturbs
less), and how many queries had words left out or a narrowed scope.
`--ranks CATEGORY` also prints, for each question of that category, where
this plan ranks each evidence turn, searched again untimed.
No model is called; nothing is asserted. `--smoke` runs a made-up
conversation after 2,000 turns in a scratch folder, in seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))
sys.path.insert(0, str(ROOT))

from locomo_retrieval import (  # noqa: E402
    MAIN_CATEGORIES,
    Tally,
    evidence_ids,
    load_conversation,
    session_time,
    smoke_sample,
)
from synthetic import english_vocabulary, synthetic_turns  # noqa: E402

from noema.memory.queries import STOP_WORDS  # noqa: E402
from noema.memory.search import HistorySearch  # noqa: E402
from noema.memory.store import TurnStore  # noqa: E402

DAY = 86_400.0
SPAN_DAYS = 730  # the distractor history covers two years
CACHE = Path("/tmp/noema-bench-cache")
BASELINE_REV = "b7b1102"  # the plan before candidates were chosen with the turns around them
SMOKE_DISTRACTORS = 2_000


# -- the history ------------------------------------------------------------


def write_history(store: TurnStore, count: int, first: float, last: float, seed: int = 7) -> None:
    """Append `count` distractor turns dated evenly from `first` to `last`."""
    turns = synthetic_turns(count, seed=seed, vocab=english_vocabulary(), people=True)
    step = (last - first) / max(count, 1)
    written, started = 0, time.perf_counter()
    while written < count:
        with store.transaction():
            for new in itertools.islice(turns, 20_000):
                store.append(new, at=first + written * step)
                written += 1
        if count >= 100_000:
            rate = written / (time.perf_counter() - started)
            print(f"  history: {written:>9,} turns ({rate:,.0f}/s)", file=sys.stderr)


def _finish(store: TurnStore) -> None:
    # A running agent's upkeep keeps the index merged; start from that state.
    store.conn.execute("INSERT INTO turns_fts(turns_fts) VALUES('optimize')")
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


def _cached(path: Path, build: Callable[[Path], None]) -> Path:
    marker = path.with_suffix(".done")
    if not marker.exists():
        for suffix in ("", "-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        print(f"building {path}, once...", file=sys.stderr)
        build(path)
        marker.write_text("complete\n")
    return path


def history_before(count: int, until: float, folder: Path) -> Path:
    """A store of `count` distractor turns ending a day before `until`, built once."""
    path = folder / f"history_{count}_until_{int(until)}.db"

    def build(target: Path) -> None:
        store = TurnStore(target)
        write_history(store, count, until - SPAN_DAYS * DAY, until - DAY)
        _finish(store)

    return _cached(path, build)


def history_after(count: int, conversation: dict, key: str, folder: Path) -> Path:
    """A store holding `conversation` then `count` distractor turns, built once."""
    path = folder / f"after_{count}_{key}.db"

    def build(target: Path) -> None:
        store = TurnStore(target)
        load_conversation(store, conversation)
        newest = store.get(store.last_id())
        assert newest is not None
        write_history(store, count, newest.ts + DAY, newest.ts + SPAN_DAYS * DAY)
        _finish(store)

    return _cached(path, build)


def conversation_turns(store: TurnStore, conversation: dict) -> dict[int, str]:
    """Turn ID -> dialogue ID for a conversation already in `store`, in load order."""
    dialogue_ids = []
    number = 1
    while f"session_{number}" in conversation:
        dialogue_ids.extend(e["dia_id"] for e in conversation[f"session_{number}"])
        number += 1
    return dict(zip(range(1, len(dialogue_ids) + 1), dialogue_ids, strict=True))


# -- the plans compared -------------------------------------------------------


def baseline_search(rev: str, scratch: Path) -> type:
    """`HistorySearch` as it was at `rev`, with the query reading of that revision."""
    package = scratch / "baseline_memory"
    package.mkdir(exist_ok=True)
    for name in ("search", "queries"):
        text = subprocess.run(
            ["git", "show", f"{rev}:src/noema/memory/{name}.py"],
            cwd=ROOT.parent, check=True, capture_output=True, text=True,
        ).stdout
        for sibling in ("recall", "store", "turns"):
            text = text.replace(f"from .{sibling} import", f"from noema.memory.{sibling} import")
        (package / f"{name}.py").write_text(text)
    (package / "__init__.py").write_text("")
    spec = importlib.util.spec_from_file_location(
        "baseline_memory", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_memory"] = module
    spec.loader.exec_module(module)
    return importlib.import_module("baseline_memory.search").HistorySearch


@dataclass
class Method:
    """One plan's figures over all conversations."""

    tallies: dict[int, Tally] = field(default_factory=lambda: defaultdict(Tally))
    times: list[float] = field(default_factory=list)  # wall clock
    cpu: list[float] = field(default_factory=list)  # this thread's CPU: steadier on a busy machine
    left_out: int = 0  # queries that searched without some of their words
    joined: int = 0  # queries with words searched only beside rarer ones
    narrowed: int = 0  # queries that searched only part of the history

    def report(self, name: str) -> None:
        print(f"\n{name}")
        main = Tally()
        for category in sorted(self.tallies):
            print(f"  category {category}: {self.tallies[category].row()}")
            if category in MAIN_CATEGORIES:
                main.merge(self.tallies[category])
        print(f"  categories 1-4: {main.row()}")
        for label, samples in (("query time", self.times), ("query CPU time", self.cpu)):
            ms = sorted(t * 1000 for t in samples)
            if ms:
                p50, p95 = ms[len(ms) // 2], ms[min(len(ms) - 1, int(len(ms) * 0.95))]
                print(f"  {label}: p50 {p50:.2f} ms, p95 {p95:.2f} ms, max {ms[-1]:.1f} ms")
        print(f"  queries with words left out: {self.left_out}; with words joined to rarer "
              f"ones: {self.joined}; with a narrowed scope: {self.narrowed} (of {len(self.times)})")


def limits_of(result: object) -> tuple[bool, bool, bool]:
    """(words left out for cost, words joined, scope narrowed) for either plan's result."""
    if hasattr(result, "unsearched"):
        return bool(result.unsearched), bool(result.joined), result.searched_from is not None
    costly = [w for w in result.dropped if w not in STOP_WORDS]  # the baseline's
    return bool(costly), False, bool(result.recent_only)


RANKS_DEPTH = 60  # how deep `--ranks` looks for each evidence turn


def show_ranks(search: HistorySearch, item: dict, evidence: set[str], dialogue_of: dict[int, str]) -> None:
    """One question's evidence turns and where the plan ranks each (untimed,
    `RANKS_DEPTH` deep), then its top ten ('x' for a turn of the history)."""
    result = search.search(item["question"], limit=RANKS_DEPTH)
    ranked = [dialogue_of.get(f.turn.id, "x") for f in result.hits]
    where = " ".join(
        f"{e}@{ranked.index(e) + 1 if e in ranked else '-'}" for e in sorted(evidence)
    )
    found = len(evidence & set(ranked[:10])) / len(evidence)
    print(f"  [{item.get('category')}] {found:4.0%} {item['question']}\n"
          f"         evidence {where}; top 10: {' '.join(ranked[:10])}")


def evaluate(
    store: TurnStore, dialogue_of: dict[int, str], qa: list[dict],
    plans: dict[str, type], methods: dict[str, Method], ranks: frozenset[int] = frozenset(),
) -> None:
    known = set(dialogue_of.values())
    searches = {name: plan(store) for name, plan in plans.items()}
    for search in searches.values():
        search.search("warm the page cache")
    for item in qa:
        evidence = evidence_ids(item.get("evidence", [])) & known
        if not evidence:
            continue
        for name, search in searches.items():
            started, cpu = time.perf_counter(), time.thread_time()
            result = search.search(item["question"], limit=10)
            methods[name].times.append(time.perf_counter() - started)
            methods[name].cpu.append(time.thread_time() - cpu)
            ranked = [dialogue_of[f.turn.id] for f in result.hits if f.turn.id in dialogue_of]
            methods[name].tallies[int(item.get("category", 0))].add(evidence, ranked)
            left_out, joined, narrowed = limits_of(result)
            methods[name].left_out += left_out
            methods[name].joined += joined
            methods[name].narrowed += narrowed
        if int(item.get("category", 0)) in ranks:  # the plan in the working tree only
            show_ranks(next(iter(searches.values())), item, evidence, dialogue_of)
    for search in searches.values():
        search.close()


def first_moment(conversation: dict) -> float:
    return session_time(conversation["session_1_date_time"])


def run(
    paths: list[Path], distractors: int, after: bool, folder: Path, rev: str,
    ranks: frozenset[int] = frozenset(),
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    samples = []
    for path in paths:
        loaded = json.loads(path.read_text(encoding="utf-8"))
        samples.extend(loaded if isinstance(loaded, list) else [loaded])
    with tempfile.TemporaryDirectory(prefix="noema-locomo-scale-") as scratch_dir:
        scratch = Path(scratch_dir)
        plans: dict[str, type] = {"search_full_history (this plan)": HistorySearch}
        if rev != "none":
            plans[f"baseline: the plan at {rev}"] = baseline_search(rev, scratch)
        methods = {name: Method() for name in plans}
        source = None
        if not after and distractors:
            source = history_before(distractors, min(first_moment(s["conversation"]) for s in samples),
                                    folder)
        for number, sample in enumerate(samples):
            conversation = sample["conversation"]
            copy = scratch / f"conversation_{number}.db"
            if after:
                key = f"{int(first_moment(conversation))}_{number}"
                shutil.copyfile(history_after(distractors, conversation, key, folder), copy)
                store = TurnStore(copy)
                dialogue_of = conversation_turns(store, conversation)
            else:
                if source is not None:
                    shutil.copyfile(source, copy)
                store = TurnStore(copy)
                dialogue_of = load_conversation(store, conversation)
            evaluate(store, dialogue_of, sample["qa"], plans, methods, ranks)
            store.close()
            copy.unlink()
    where = "after" if after else "before"
    print(f"LoCoMo at scale: {len(samples)} conversation(s), {distractors:,} distractor turns "
          f"{where} each")
    for name, method in methods.items():
        method.report(name)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="LoCoMo JSON files")
    parser.add_argument("--distractors", type=int, default=100_000)
    parser.add_argument("--after", action="store_true",
                        help="place the distractors after the conversation")
    parser.add_argument("--cache", type=Path, default=CACHE, help=f"default {CACHE}")
    parser.add_argument("--baseline", default=BASELINE_REV, help="git revision of the baseline plan, or none")
    parser.add_argument("--ranks", type=int, action="append", default=[], metavar="CATEGORY",
                        help="print where this plan ranks each question's evidence, for a category"
                        " (repeatable)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"a made-up conversation and {SMOKE_DISTRACTORS:,} turns, in seconds")
    args = parser.parse_args(argv)
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="noema-locomo-scale-smoke-") as scratch:
            path = Path(scratch) / "smoke.json"
            path.write_text(json.dumps([smoke_sample()]), encoding="utf-8")
            for after in (False, True):
                run([path], SMOKE_DISTRACTORS, after, Path(scratch) / "cache", args.baseline)
        return 0
    if not args.paths:
        parser.print_usage(sys.stderr)
        return 2
    run(args.paths, args.distractors, args.after, args.cache, args.baseline, frozenset(args.ranks))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
