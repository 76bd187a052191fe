"""LoCoMo retrieval with each conversation placed in a long history.

    .venv/bin/python bench/locomo_at_scale.py PATH [--distractors N] [--after] [--cache DIR]
        [--baseline REV] [--study] [--meaning [--shipped]] [--ranks CATEGORY] [--losses]
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
search as committed at `--baseline REV` (default: the search before its
constants were cross-validated), it prints recall@5/@10 per category and for
categories 1-4, recall@10 per conversation, a paired bootstrap interval for
the difference between the two (`locomo_cv.py`), query p50/p95 (wall clock,
and CPU time, which a busy machine disturbs less), and how many queries had
words left out or a narrowed scope. `--study` cross-validates every constant
of `SearchTuning` at this scale, as `locomo_retrieval.py --study` does alone.
`--meaning` adds the rerank by the shipped embedding model at keyword
shares 0.9 to 0.5; a turn is embedded the first time it is a candidate (a
store embedded in the background ranks the same, since a turn that is
never a candidate never counts), and that embedding is left out of the
query times, the query's own embedding is not. It also measures the rerank
at share 0.7 with 0, 1 and 2 of the hits (beside the default) given to the
dense stretches' turns closest in meaning (`SearchTuning.meant_hits`), the
number chosen by leaving one conversation out. With `--shipped`, only the
shipped share and places are measured (the figures the targets name, in a
fifth of the time), and nothing is chosen.
`--ranks CATEGORY` also prints, for each question of that category, where
this plan ranks each evidence turn, searched again untimed. `--losses`
says, per category and per conversation, at which stage of the plan each
evidence turn missing from the top ten was lost (searched again untimed,
keyword ranking only): found by no searched word, found but not among the
`scored` best, scored but not among the `candidates`, or a candidate
ranked below ten.
No model is called; nothing is asserted. `--smoke` runs a made-up
conversation after 2,000 turns in a scratch folder, in seconds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
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

from locomo_cv import (  # noqa: E402
    CachedEmbedder,
    OnDemandMeaning,
    Outcome,
    conversation_table,
    meaning_plans,
    meaning_study,
    paired_bootstrap,
    plan_at,
    pooled,
    study_line,
    study_plans,
)
from locomo_retrieval import (  # noqa: E402
    MAIN_CATEGORIES,
    Tally,
    evidence_ids,
    load_conversation,
    load_samples,
    recall_at,
    session_time,
    smoke_sample,
)
from synthetic import english_vocabulary, synthetic_turns  # noqa: E402

from noema.memory.embeddings import KEYWORD_WEIGHT  # noqa: E402
from noema.memory.queries import STOP_WORDS  # noqa: E402
from noema.memory.search import HistorySearch, SearchTuning  # noqa: E402
from noema.memory.store import TurnStore  # noqa: E402

DAY = 86_400.0
SPAN_DAYS = 730  # the distractor history covers two years
CACHE = Path("/tmp/noema-bench-cache")
BASELINE_REV = "6e49568"  # the search before its constants were cross-validated
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


@dataclass
class Method:
    """One plan's figures over all conversations."""

    tallies: dict[int, Tally] = field(default_factory=lambda: defaultdict(Tally))
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)  # per conversation
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


class StageProbe(HistorySearch):
    """The plan in the working tree, keeping what each stage of its last
    search chose: the turns found, the rank of each by the words that choose
    candidates, the candidates, and the refined ranking."""

    def _gather(self, plan, low, high, searched):  # type: ignore[no-untyped-def]
        gathered = super()._gather(plan, low, high, searched)
        self.found = gathered.found
        return gathered

    def _score(self, found, beside, kinds, favour=None):  # type: ignore[no-untyped-def]
        chosen = dict(found)
        for turn_id, weight in beside.items():
            chosen[turn_id] += self.tuning.window_share * weight
        for turn_id, factor in (favour or {}).items():
            chosen[turn_id] *= factor
        order = sorted(chosen, key=chosen.__getitem__, reverse=True)
        self.rough = {turn_id: rank for rank, turn_id in enumerate(order)}
        scored = super()._score(found, beside, kinds, favour)
        self.candidates = set(scored)
        return scored

    def _refine(self, scored, query):  # type: ignore[no-untyped-def]
        ranked = super()._refine(scored, query)
        self.refined = [turn_id for turn_id, *_ in ranked]
        return ranked

    def stage_of(self, turn_id: int) -> str:
        """Where the last search lost `turn_id` (or 'top 10')."""
        position = self.refined.index(turn_id) if turn_id in self.refined else None
        if position is not None and position < 10:
            return "top 10"
        if turn_id in self.candidates:
            return "candidate below 10"
        if turn_id in self.rough:
            if self.rough[turn_id] < self.tuning.scored:
                return "scored, not a candidate"
            return "found, not scored"
        return "lifted by neighbours only" if position is not None else "not found"


LOSS_STAGES = ("top 10", "candidate below 10", "scored, not a candidate", "found, not scored",
               "lifted by neighbours only", "not found")


def count_losses(probe: StageProbe, item: dict, evidence: set[str], dialogue_of: dict[int, str],
                 losses: dict[str, dict[str, int]]) -> None:
    """Adds where each of a question's evidence turns was lost to `losses`, by
    category and by conversation."""
    probe.search(item["question"], limit=10)
    turn_of = {dialogue: turn_id for turn_id, dialogue in dialogue_of.items()}
    for dialogue in evidence:
        stage = probe.stage_of(turn_of[dialogue])
        for key in (f"category {item.get('category')}", item["sample_id"], "categories 1-4"):
            row = losses.setdefault(key, dict.fromkeys(LOSS_STAGES, 0))
            row[stage] += 1


def print_losses(losses: dict[str, dict[str, int]]) -> None:
    print("\nWhere the evidence turns were lost (this plan, keyword ranking): share of evidence turns")
    width = max(map(len, losses))
    print(f"{'':{width}s} " + " | ".join(LOSS_STAGES))
    for key in sorted(losses):
        row = losses[key]
        total = sum(row.values()) or 1
        print(f"{key:{width}s} " + " | ".join(f"{row[s] / total:>{len(s)}.0%}" for s in LOSS_STAGES)
              + f"   ({total} turns)")


def evaluate(
    store: TurnStore, dialogue_of: dict[int, str], sample: dict,
    plans: dict[str, Callable[[TurnStore], object]], methods: dict[str, Method],
    ranks: frozenset[int] = frozenset(), main_only: bool = False,
    losses: dict[str, dict[str, int]] | None = None,
) -> None:
    known = set(dialogue_of.values())
    qa, conversation = sample["qa"], sample["sample_id"]
    searches = {name: plan(store) for name, plan in plans.items()}
    probe = StageProbe(store) if losses is not None else None
    for method in methods.values():
        method.outcomes[conversation] = []
    for search in searches.values():
        search.search("warm the page cache")
    for item in qa:
        evidence = evidence_ids(item.get("evidence", [])) & known
        if not evidence or main_only and int(item.get("category", 0)) not in MAIN_CATEGORIES:
            continue
        for name, search in searches.items():
            meaning = getattr(search, "meaning", None)
            embedder = getattr(meaning, "_embedder", None)
            # The query is embedded in a thread of its own, while the words are searched.
            elsewhere = embedder.query_cpu if embedder is not None else 0.0
            started, cpu = time.perf_counter(), time.thread_time()
            result = search.search(item["question"], limit=10)
            wall, cpu = time.perf_counter() - started, time.thread_time() - cpu
            if embedder is not None:
                cpu += embedder.query_cpu - elsewhere
            if meaning is not None and hasattr(meaning, "excluded"):  # embedding its candidates
                wall, cpu = wall - meaning.excluded[0], cpu - meaning.excluded[1]
                meaning.excluded = (0.0, 0.0)
            methods[name].times.append(wall)
            methods[name].cpu.append(cpu)
            ranked = [dialogue_of[f.turn.id] for f in result.hits if f.turn.id in dialogue_of]
            category = int(item.get("category", 0))
            methods[name].tallies[category].add(evidence, ranked)
            methods[name].outcomes[conversation].append(Outcome(
                conversation, category, recall_at(evidence, ranked, 5), recall_at(evidence, ranked, 10),
                len(evidence)))
            left_out, joined, narrowed = limits_of(result)
            methods[name].left_out += left_out
            methods[name].joined += joined
            methods[name].narrowed += narrowed
        if int(item.get("category", 0)) in ranks:  # the plan in the working tree only
            show_ranks(next(iter(searches.values())), item, evidence, dialogue_of)
        if losses is not None and int(item.get("category", 0)) in MAIN_CATEGORIES:
            count_losses(probe, dict(item, sample_id=conversation), evidence, dialogue_of, losses)
    for search in searches.values():
        search.close()
    if losses is not None:
        probe.close()


def first_moment(conversation: dict) -> float:
    return session_time(conversation["session_1_date_time"])


THIS_PLAN = "search_full_history (this plan)"
SHIPPED = f"meaning={KEYWORD_WEIGHT}"  # the plan of the keyword share the search ships with
MEANT_HITS = (0, 1, 2)  # places for meaning in the dense stretches, beside the default, at share 0.7


def meant_plans(embedder: CachedEmbedder) -> dict[str, Callable[[TurnStore], object]]:
    """The rerank at the shipped share with other numbers of places for the
    dense stretches' turns closest in meaning (`SearchTuning.meant_hits`)."""
    from dataclasses import replace

    def make(store: TurnStore, places: int) -> HistorySearch:
        tuning = replace(SearchTuning(), meant_hits=places)
        return HistorySearch(store, tuning, meaning=OnDemandMeaning(store, embedder, 0.7))

    return {f"meaning=0.7 meant_hits={n}": lambda store, n=n: make(store, n) for n in MEANT_HITS}


def meant_study(results: dict) -> str:
    """meant_hits chosen by leaving one conversation out, against none."""
    default = f"meaning=0.7 meant_hits={SearchTuning().meant_hits}"
    results = {**results, default: results["meaning=0.7"]}
    names = sorted({default, *(f"meaning=0.7 meant_hits={n}" for n in MEANT_HITS)},
                   key=lambda name: int(name.rsplit("=", 1)[1]))
    return study_line(results, "places for meaning in the dense stretches", names, names[0])


def run(
    paths: list[Path], distractors: int, after: bool, folder: Path, rev: str,
    ranks: frozenset[int] = frozenset(), study: bool = False, meaning: bool = False,
    losses: bool = False, shipped: bool = False,
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    samples = load_samples(paths)
    with tempfile.TemporaryDirectory(prefix="noema-locomo-scale-") as scratch_dir:
        scratch = Path(scratch_dir)
        plans: dict[str, Callable[[TurnStore], object]] = {THIS_PLAN: HistorySearch}
        baseline = f"baseline: the search at {rev}"
        if rev != "none":
            plans[baseline] = plan_at(rev, scratch)
        choices: dict[str, list[str]] = {}
        if study:
            tunings, choices = study_plans(SearchTuning())
            for variant, tuning in tunings.items():
                if variant != "current":
                    plans[variant] = lambda store, tuning=tuning: HistorySearch(store, tuning)
        embedder = None
        if meaning:
            embedder = CachedEmbedder()
            shares = meaning_plans(embedder, on_demand=True)
            if shipped:
                shares = {SHIPPED: shares[SHIPPED]}
            plans.update(shares)
            if not shipped:
                plans.update(meant_plans(embedder))
        methods = {name: Method() for name in plans}
        lost: dict[str, dict[str, int]] | None = {} if losses else None
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
            evaluate(store, dialogue_of, sample, plans, methods, ranks, main_only=study or meaning,
                     losses=lost)
            if embedder is not None:
                embedder.forget()  # the next conversation's store holds other turns
            store.close()
            copy.unlink()
    where = "after" if after else "before"
    print(f"LoCoMo at scale: {len(samples)} conversation(s), {distractors:,} distractor turns "
          f"{where} each")
    shown = [name for name in methods
             if "=" not in name or name in ("meaning=0.7", f"meaning=0.7 meant_hits={MEANT_HITS[0]}")]
    for name in shown:
        methods[name].report(name)
    results = {name: method.outcomes for name, method in methods.items()}
    if lost:
        print_losses(lost)
    print()
    print(conversation_table(results, shown))
    if baseline in results:
        print(f"this plan against {baseline[10:]}: recall@10 "
              f"{paired_bootstrap(pooled(results[THIS_PLAN]), pooled(results[baseline]))} points")
    if meaning:
        print("\nThe meaning signal (all-MiniLM-L6-v2 int8) reranking the keyword top 100, turns"
              " embedded when first a candidate (query times leave that embedding out, as a store"
              " embedded in the background would; the query's own embedding is in them)")
        print(conversation_table(results, [THIS_PLAN, *(n for n in results if n.startswith("meaning="))]))
        if not shipped:
            print(meaning_study(results, THIS_PLAN))
            print(meant_study(results))
    if study:
        print("\nEach constant of SearchTuning: the value chosen on four conversations, reported on"
              " the fifth, every way round, against the current value (recall@10, categories 1-4;"
              " difference in points, 95 % paired bootstrap interval)")
        results["current"] = results[THIS_PLAN]
        for constant, names in choices.items():
            print(study_line(results, constant, names, "current"))


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
    parser.add_argument("--study", action="store_true",
                        help="cross-validate the constants of SearchTuning (locomo_cv.STUDIED; categories 1-4 only)")
    parser.add_argument("--meaning", action="store_true",
                        help="also rerank by the local embedding model, at several keyword shares")
    parser.add_argument("--shipped", action="store_true",
                        help="with --meaning, only the shipped keyword share and places (no study)")
    parser.add_argument("--losses", action="store_true",
                        help="say at which stage of the plan each evidence turn missing from the top ten"
                        " was lost")
    parser.add_argument("--smoke", action="store_true",
                        help=f"a made-up conversation and {SMOKE_DISTRACTORS:,} turns, in seconds")
    args = parser.parse_args(argv)
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="noema-locomo-scale-smoke-") as scratch:
            path = Path(scratch) / "smoke.json"
            path.write_text(json.dumps([smoke_sample()]), encoding="utf-8")
            for after in (False, True):
                run([path], SMOKE_DISTRACTORS, after, Path(scratch) / "cache", args.baseline,
                    losses=True)
        return 0
    if not args.paths:
        parser.print_usage(sys.stderr)
        return 2
    run(args.paths, args.distractors, args.after, args.cache, args.baseline, frozenset(args.ranks),
        args.study, args.meaning, args.losses, args.shipped)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
