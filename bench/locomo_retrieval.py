"""Retrieval quality of `search_full_history` on LoCoMo-format conversations.

    .venv/bin/python bench/locomo_retrieval.py PATH [PATH ...]
    .venv/bin/python bench/locomo_retrieval.py --smoke

PATH is a LoCoMo JSON file (a list of samples, each with `conversation` and
`qa`). The data is not part of this repository: pass its path. Each
conversation's turns go into a fresh in-memory turn store, dated with their
session's date and sent by their speaker (a shared photo's caption is part of
the turn). For every question with evidence, the script reports recall@5 and
recall@10: the share of the evidence turns found in the top k, averaged over
questions, and also pooled over all evidence turns, per category and for
categories 1-4 together. The plain-BM25 baseline (every word of the question
OR-ed, ranked by FTS5) is measured in the same run, on the same index.

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

from noema.memory.search import HistorySearch, SearchTuning, plain_expression  # noqa: E402
from noema.memory.store import TurnStore  # noqa: E402
from noema.memory.turns import NewTurn, TurnKind  # noqa: E402

MAIN_CATEGORIES = (1, 2, 3, 4)
KS = (5, 10)


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


def run(paths: list[Path]) -> None:
    # The full search, and the same with one signal switched off at a time, so
    # each technique's share can be read off the same run.
    variants = {
        "search_full_history": SearchTuning(),
        "  without neighbour context": SearchTuning(neighbour_decay=0.0),
        "  without sender names": SearchTuning(speaker_boost=0.0),
        "  without dates": SearchTuning(date_boost=0.0),
        "  without the words beside": SearchTuning(window_share=0.0),
        "  without the stretch": SearchTuning(stretch_boost=0.0),
    }
    methods = ("plain BM25", *variants)
    tallies = {m: defaultdict(Tally) for m in methods}
    timings: dict[str, list[float]] = {m: [] for m in methods}
    unmatched = 0
    conversations = 0
    for path in paths:
        samples = json.loads(path.read_text(encoding="utf-8"))
        for sample in samples if isinstance(samples, list) else [samples]:
            conversations += 1
            store = TurnStore(":memory:")
            dialogue_of = load_conversation(store, sample["conversation"])
            known = set(dialogue_of.values())
            searches = {name: HistorySearch(store, tuning) for name, tuning in variants.items()}
            rankers: dict[str, Ranker] = {
                "plain BM25": lambda q, store=store: [
                    h.turn.id for h in store.search(plain_expression(q), limit=10)
                ],
            }
            for name, search in searches.items():
                rankers[name] = lambda q, search=search: [
                    f.turn.id for f in search.search(q, limit=10).hits
                ]
            for qa in sample["qa"]:
                evidence = evidence_ids(qa.get("evidence", []))
                unmatched += len(evidence - known)
                evidence &= known
                if not evidence:
                    continue
                for method, ranker in rankers.items():
                    started = time.perf_counter()
                    ranked = [dialogue_of[i] for i in ranker(qa["question"])]
                    timings[method].append(time.perf_counter() - started)
                    tallies[method][int(qa.get("category", 0))].add(evidence, ranked)
            for search in searches.values():
                search.close()
            store.close()

    print(f"LoCoMo retrieval: {conversations} conversation(s) from {', '.join(map(str, paths))}")
    if unmatched:
        print(f"({unmatched} evidence reference(s) name no turn and were left out)")
    for method in methods:
        if method.startswith("  "):
            main = Tally()
            for category, tally in tallies[method].items():
                if category in MAIN_CATEGORIES:
                    main.merge(tally)
            print(f"{method:30s} categories 1-4: {main.row()}")
            continue
        print(f"\n{method}")
        main = Tally()
        for category in sorted(tallies[method]):
            tally = tallies[method][category]
            print(f"  category {category}: {tally.row()}")
            if category in MAIN_CATEGORIES:
                main.merge(tally)
        print(f"  categories 1-4: {main.row()}")
        times = sorted(timings[method])
        if times:
            p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
            print(f"  query time: median {statistics.median(times) * 1000:.2f} ms, "
                  f"p95 {p95 * 1000:.2f} ms")


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
    parser.add_argument("--smoke", action="store_true",
                        help="run on a small made-up conversation instead")
    args = parser.parse_args(argv)
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="noema-locomo-") as scratch:
            path = Path(scratch) / "smoke.json"
            path.write_text(json.dumps([smoke_sample()]), encoding="utf-8")
            run([path])
        return 0
    if not args.paths:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    run(args.paths)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
