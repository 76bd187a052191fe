"""Retrieval quality of `search_full_history` on LoCoMo-format conversations.

    .venv/bin/python bench/locomo_retrieval.py PATH [PATH ...] [--baseline REV] [--study] [--meaning] [--misses]
    .venv/bin/python bench/locomo_retrieval.py --smoke

PATH is a LoCoMo JSON file (a list of samples, each with `conversation` and
`qa`). The data is not part of this repository: pass its path. Each
conversation's turns go into a fresh in-memory turn store, dated with their
session's date and sent by their speaker (a shared photo's caption is part of
the turn). For every question with evidence, the script reports recall@5 and
recall@10: the share of the evidence turns found in the top k, averaged over
questions, and also pooled over all evidence turns, per category and for
categories 1-4 together. The plain-BM25 baseline (every word of the question
OR-ed, ranked by FTS5) is measured in the same run, on the same index, and so
is the search as committed at `--baseline REV` (default: the search before
its constants were cross-validated), with a paired bootstrap interval for the
difference (`locomo_cv.py`). Recall@10 is also given per conversation.

`--study` measures every constant of `SearchTuning` that shapes the ranking
at a few other values (`locomo_cv.STUDIED`) and, for each, the value chosen
by leaving one conversation out: a constant is worth keeping only where that
choice beats switching it off on conversations it was not chosen on.

`--meaning` embeds every turn with the shipped model (in this process) and
measures the rerank of the keyword top 100 at keyword shares 0.9 to 0.5,
with the share chosen by leaving one conversation out.

`--misses` says, per category, why each evidence turn missing from the top
ten of the search (with the rerank at its shipped share under `--meaning`)
was missed: by what it shares with the question as the index reads both (a
word of the question that is neither a name nor a stop word; else a word
of the question and one of the turn beginning with the same four letters, a
form the stemmer did not join; else only a name; else nothing but stop
words), against where it ended (below the hundred best by keywords, ranked
11 to 100, or in the keyword top ten and pushed out by the rerank).

No model is called and nothing is downloaded. The script prints figures and
asserts nothing. `--smoke` runs on a small made-up conversation in the same
format, to check that the script works; its figures say nothing of quality.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_cv import (  # noqa: E402
    CachedEmbedder,
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

from noema.memory.queries import STOP_WORDS, names_in  # noqa: E402
from noema.memory.search import HistorySearch, SearchTuning, plain_expression  # noqa: E402
from noema.memory.store import TurnStore, searchable_text  # noqa: E402
from noema.memory.turns import NewTurn, TurnKind  # noqa: E402

MAIN_CATEGORIES = (1, 2, 3, 4)
KS = (5, 10)
BASELINE_REV = "6e49568"  # the search before its constants were cross-validated


def session_time(text: str) -> float:
    """'4:04 pm on 20 January, 2023' as epoch seconds (UTC)."""
    cleaned = " ".join(text.replace(",", " ").split())
    for pattern in ("%I:%M %p on %d %B %Y", "%H:%M on %d %B %Y", "%d %B %Y"):
        try:
            return datetime.strptime(cleaned, pattern).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    raise ValueError(f"unreadable session date {text!r}")


def load_conversation(store: TurnStore, conversation: dict) -> dict[int, str]:
    """Append every turn in order; returns turn ID -> dialogue ID."""
    dialogue_of: dict[int, str] = {}
    number = 1
    while f"session_{number}" in conversation:
        start = session_time(conversation[f"session_{number}_date_time"])
        for offset, entry in enumerate(conversation[f"session_{number}"]):
            text = entry.get("text", "")
            if entry.get("blip_caption"):
                text += f" [shares {entry['blip_caption']}]"
            turn = store.append(
                NewTurn(TurnKind.USER, text, sender=entry.get("speaker"), channel="locomo"),
                at=start + offset,
            )
            dialogue_of[turn.id] = entry["dia_id"]
        number += 1
    return dialogue_of


def evidence_ids(raw: list) -> set[str]:
    found: set[str] = set()
    for item in raw:
        found.update(re.findall(r"D\d+:\d+", str(item)))
    return found


@dataclass
class Tally:
    """Recall counts for one method in one category."""

    questions: int = 0
    per_question: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    pooled_hits: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    evidence: int = 0

    def add(self, evidence: set[str], ranked: list[str]) -> None:
        self.questions += 1
        self.evidence += len(evidence)
        for k in KS:
            hit = len(evidence & set(ranked[:k]))
            self.per_question[k] += hit / len(evidence)
            self.pooled_hits[k] += hit

    def add_outcome(self, outcome: Outcome) -> None:
        self.questions += 1
        self.evidence += outcome.evidence
        for k, recall in ((5, outcome.recall5), (10, outcome.recall10)):
            self.per_question[k] += recall
            self.pooled_hits[k] += round(recall * outcome.evidence)

    def merge(self, other: Tally) -> None:
        self.questions += other.questions
        self.evidence += other.evidence
        for k in KS:
            self.per_question[k] += other.per_question[k]
            self.pooled_hits[k] += other.pooled_hits[k]

    def row(self) -> str:
        if not self.questions:
            return "no questions"
        cells = [f"q={self.questions:4d}"]
        for k in KS:
            cells.append(f"R@{k} {self.per_question[k] / self.questions:6.1%}")
        for k in KS:
            cells.append(f"pooled R@{k} {self.pooled_hits[k] / self.evidence:6.1%}")
        return "  ".join(cells)


Ranker = Callable[[str], list[int]]


def recall_at(evidence: set[str], ranked: list[str], k: int) -> float:
    return len(evidence & set(ranked[:k])) / len(evidence)


def load_samples(paths: list[Path]) -> list[dict]:
    samples: list[dict] = []
    for path in paths:
        loaded = json.loads(path.read_text(encoding="utf-8"))
        samples.extend(loaded if isinstance(loaded, list) else [loaded])
    for number, sample in enumerate(samples):
        sample.setdefault("sample_id", f"sample-{number}")
    return samples


def collect(
    samples: list[dict], plans: dict[str, Callable[[TurnStore], object]], main_only: bool = False
) -> tuple[
    dict[str, dict[str, list[Outcome]]], dict[str, list[float]], int
]:
    """Every plan's outcome for every question with evidence (of categories
    1-4 only if `main_only`), each conversation in a fresh in-memory store;
    and each plan's query times."""
    results: dict[str, dict[str, list[Outcome]]] = {name: {} for name in ("plain BM25", *plans)}
    timings: dict[str, list[float]] = {name: [] for name in results}
    unmatched = 0
    for sample in samples:
        name = sample["sample_id"]
        store = TurnStore(":memory:")
        dialogue_of = load_conversation(store, sample["conversation"])
        known = set(dialogue_of.values())
        searches = {plan: make(store) for plan, make in plans.items()}
        rankers: dict[str, Ranker] = {
            "plain BM25": lambda q, store=store: [
                h.turn.id for h in store.search(plain_expression(q), limit=10)
            ],
        }
        for plan, search in searches.items():
            rankers[plan] = lambda q, search=search: [f.turn.id for f in search.search(q, limit=10).hits]
        for plan in results:
            results[plan][name] = []
        for qa in sample["qa"]:
            evidence = evidence_ids(qa.get("evidence", []))
            unmatched += len(evidence - known)
            evidence &= known
            if not evidence:
                continue
            category = int(qa.get("category", 0))
            if main_only and category not in MAIN_CATEGORIES:
                continue
            for plan, ranker in rankers.items():
                started = time.perf_counter()
                ranked = [dialogue_of[i] for i in ranker(qa["question"])]
                timings[plan].append(time.perf_counter() - started)
                results[plan][name].append(
                    Outcome(name, category, recall_at(evidence, ranked, 5),
                            recall_at(evidence, ranked, 10), len(evidence))
                )
        for search in searches.values():
            search.close()
        store.close()
    return results, timings, unmatched


def tally_of(by_conversation: dict[str, list[Outcome]]) -> dict[int, Tally]:
    tallies: dict[int, Tally] = defaultdict(Tally)
    for outcomes in by_conversation.values():
        for o in outcomes:
            tallies[o.category].add_outcome(o)
    return tallies


def report(name: str, by_conversation: dict[str, list[Outcome]], times: list[float]) -> None:
    print(f"\n{name}")
    main = Tally()
    tallies = tally_of(by_conversation)
    for category in sorted(tallies):
        print(f"  category {category}: {tallies[category].row()}")
        if category in MAIN_CATEGORIES:
            main.merge(tallies[category])
    print(f"  categories 1-4: {main.row()}")
    ms = sorted(times)
    if ms:
        p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        print(f"  query time: median {statistics.median(ms) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms")


def run(paths: list[Path], baseline: str, study: bool, meaning: bool = False, misses: bool = False) -> None:
    samples = load_samples(paths)
    with tempfile.TemporaryDirectory(prefix="noema-locomo-") as scratch:
        plans: dict[str, Callable[[TurnStore], object]] = {"search_full_history": HistorySearch}
        if baseline != "none":
            old = plan_at(baseline, scratch)
            plans[f"the search at {baseline}"] = old
        choices: dict[str, list[str]] = {}
        if study:
            tunings, choices = study_plans(SearchTuning())
            for variant, tuning in tunings.items():
                if variant != "current":
                    plans[variant] = lambda store, tuning=tuning: HistorySearch(store, tuning)
        embedder = None
        if meaning:
            embedder = CachedEmbedder()
            plans.update(meaning_plans(embedder, on_demand=False))
        results, timings, unmatched = collect(samples, plans, main_only=study or meaning)
    print(f"LoCoMo retrieval: {len(samples)} conversation(s) from {', '.join(map(str, paths))}")
    if unmatched:
        print(f"({unmatched} evidence reference(s) name no turn and were left out)")
    shown = [p for p in results if "=" not in p]
    for plan in results:
        if plan.startswith("meaning="):
            timings.setdefault(plan, [])
    for plan in shown:
        report(plan, results[plan], timings[plan])
    print()
    print(conversation_table(results, shown))
    current = pooled(results["search_full_history"])
    for plan in shown:
        if plan != "search_full_history":
            print(f"search_full_history against {plan}: recall@10 "
                  f"{paired_bootstrap(current, pooled(results[plan]))} points")
    if meaning:
        print("\nThe meaning signal (all-MiniLM-L6-v2 int8) reranking the keyword top 100: the keyword"
              " share chosen on four conversations, reported on the fifth, every way round")
        print(conversation_table(results, ["search_full_history", *meaning_plans(embedder, False)]))
        print(meaning_study(results, "search_full_history"))
        print(f"(embedding took {embedder.seconds:.0f} s of CPU in all)")
    if misses:
        probe: Callable[[TurnStore], HistorySearch] = RankProbe
        if embedder is not None:
            from locomo_cv import embed_turns

            from noema.memory.embeddings import Meaning

            def probe(store: TurnStore, embedder: CachedEmbedder = embedder) -> HistorySearch:
                embed_turns(store, embedder)
                return RankProbe(store, meaning=Meaning(store, embedder))
        print_misses(count_misses(samples, probe))
    if study:
        print("\nEach constant of SearchTuning: the value chosen on four conversations, reported on"
              " the fifth, every way round, against the current value (recall@10, categories 1-4;"
              " difference in points, 95 % paired bootstrap interval)")
        results["current"] = results["search_full_history"]
        for constant, names in choices.items():
            print(study_line(results, constant, names, "current"))


# -- why evidence is missed ------------------------------------------------------

MISS_WORDS = ("a content word", "a variant form", "only a name", "nothing")
MISS_STAGES = ("below the 100 best by keywords", "ranked 11-100", "keyword top 10, out after the rerank")
_TOKEN = re.compile(r"[^\W_]+")


class RankProbe(HistorySearch):
    """The search, keeping the order its keyword ranking gave before any rerank."""

    def _refine(self, scored, query):  # type: ignore[no-untyped-def]
        ranked = super()._refine(scored, query)
        self.by_words = [turn_id for turn_id, *_ in ranked]
        return ranked


def shared_words(search: HistorySearch, question: str, text: str) -> str:
    """What a turn's indexed text shares with the question, as the index reads
    both (one of MISS_WORDS)."""
    named = names_in(question)
    asked = [w for w in _TOKEN.findall(question) if w.lower() not in STOP_WORDS and len(w) > 1]
    content = {s for w in asked if w.casefold() not in named for s in search._stems(w)}
    names = {s for w in asked if w.casefold() in named for s in search._stems(w)}
    words = {w.lower() for w in _TOKEN.findall(text)}
    stems = {s for w in words for s in search._stems(w)}
    if stems & content:
        return MISS_WORDS[0]
    heads = {w.lower()[:4] for w in asked if len(w) >= 4 and w.casefold() not in named}
    if any(len(w) >= 4 and w[:4] in heads for w in words):
        return MISS_WORDS[1]
    if stems & names:
        return MISS_WORDS[2]
    return MISS_WORDS[3]


def count_misses(samples: list[dict], make: Callable[[TurnStore], HistorySearch]) -> dict[int, dict]:
    """For each category, (what the turn shares, where it ended) -> missed evidence turns."""
    misses: dict[int, dict] = defaultdict(lambda: defaultdict(int))
    for sample in samples:
        store = TurnStore(":memory:")
        dialogue_of = load_conversation(store, sample["conversation"])
        turn_of = {dialogue: turn_id for turn_id, dialogue in dialogue_of.items()}
        search = make(store)
        for qa in sample["qa"]:
            category = int(qa.get("category", 0))
            evidence = evidence_ids(qa.get("evidence", [])) & set(turn_of)
            if category not in MAIN_CATEGORIES or not evidence:
                continue
            hits = {f.turn.id for f in search.search(qa["question"], limit=10).hits}
            by_words = {turn_id: rank for rank, turn_id in enumerate(search.by_words)}
            for dialogue in evidence:
                turn_id = turn_of[dialogue]
                if turn_id in hits:
                    continue
                rank = by_words.get(turn_id, len(by_words))
                stage = MISS_STAGES[0] if rank >= 100 else MISS_STAGES[1] if rank >= 10 else MISS_STAGES[2]
                (turn,) = store.get_many([turn_id])
                misses[category][(shared_words(search, qa["question"], searchable_text(turn)), stage)] += 1
        search.close()
        store.close()
    return misses


def print_misses(misses: dict[int, dict]) -> None:
    print("\nWhy the evidence turns missing from the top 10 were missed: what each shares with its"
          " question (rows), where it ended (columns)")
    width = max(map(len, MISS_WORDS)) + 2
    for category in sorted(misses):
        row = misses[category]
        print(f"category {category}: {sum(row.values())} missed\n{'':{width}s}" + " | ".join(MISS_STAGES))
        for words in MISS_WORDS:
            print(f"  {words:{width - 2}s}" + " | ".join(f"{row[(words, s)]:>{len(s)}d}" for s in MISS_STAGES))


def smoke_sample() -> dict:
    """A made-up conversation in LoCoMo's format: two sessions, a few questions."""
    topics = ["the garden", "a trip to Lisbon", "the new bike", "her sister's wedding",
              "a job interview", "the book club", "learning the cello", "a broken laptop"]
    speakers = ("Ana", "Luis")
    conversation: dict = {"speaker_a": speakers[0], "speaker_b": speakers[1]}
    qa = []
    for number, date in ((1, "4:04 pm on 20 January, 2023"), (2, "10:15 am on 3 March, 2023")):
        conversation[f"session_{number}_date_time"] = date
        entries = []
        for n, topic in enumerate(topics):
            dia_id = f"D{number}:{n + 1}"
            entries.append({"speaker": speakers[n % 2], "dia_id": dia_id,
                            "text": f"Session {number}: I keep thinking about {topic}."})
            if n % 3 == 0:
                qa.append({"question": f"What did {speakers[n % 2]} say about {topic}?",
                           "evidence": [dia_id], "category": 1 + n % 4})
        conversation[f"session_{number}"] = entries
    return {"conversation": conversation, "qa": qa}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="LoCoMo JSON files")
    parser.add_argument("--baseline", default=BASELINE_REV,
                        help=f"git revision of the search compared against, or none (default {BASELINE_REV})")
    parser.add_argument("--study", action="store_true",
                        help="cross-validate the constants of SearchTuning (locomo_cv.STUDIED; categories 1-4 only)")
    parser.add_argument("--meaning", action="store_true",
                        help="also rerank by the local embedding model, at several keyword shares")
    parser.add_argument("--misses", action="store_true",
                        help="say why each missed evidence turn was missed (categories 1-4)")
    parser.add_argument("--smoke", action="store_true",
                        help="run on a small made-up conversation instead")
    args = parser.parse_args(argv)
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="noema-locomo-") as scratch:
            path = Path(scratch) / "smoke.json"
            path.write_text(json.dumps([smoke_sample()]), encoding="utf-8")
            run([path], args.baseline, args.study, args.meaning, args.misses)
        return 0
    if not args.paths:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    run(args.paths, args.baseline, args.study, args.meaning, args.misses)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
