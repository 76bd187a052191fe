"""Figures that a choice fitted to some conversations cannot inflate.

The LoCoMo benches give each question one outcome per plan (its recall@5 and
recall@10). From those outcomes this module reports:

- each conversation's own figure, so that one conversation carrying the
  average shows;
- a leave-one-conversation-out figure for a choice among several plans: for
  each conversation in turn, the plan that does best on all the others is
  picked, and only its outcomes on the conversation left out count. The
  figure is what choosing by the data would give on a conversation it never
  saw; which plan each fold picked says how stable the choice is;
- a paired bootstrap interval for the difference between two plans: the
  questions are drawn again with replacement within each conversation (so
  every resample keeps the conversations' mix), and the 2.5th and 97.5th
  percentiles of the mean difference bound it.

Categories 1-4 only (LoCoMo's fifth is adversarial: questions with no answer).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAIN_CATEGORIES = (1, 2, 3, 4)
BOOTSTRAP_ROUNDS = 2_000


@dataclass(frozen=True, slots=True)
class Outcome:
    """One question under one plan."""

    conversation: str
    category: int
    recall5: float
    recall10: float
    evidence: int = 1  # evidence turns of the question


# plan -> conversation -> outcomes, the questions in the same order for every plan
Outcomes = Mapping[str, Mapping[str, Sequence[Outcome]]]


def main_questions(outcomes: Sequence[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.category in MAIN_CATEGORIES]


def mean_recall(outcomes: Sequence[Outcome], k: int = 10) -> float:
    """Recall@k averaged over the questions of categories 1-4."""
    kept = main_questions(outcomes)
    if not kept:
        return 0.0
    return sum(o.recall10 if k == 10 else o.recall5 for o in kept) / len(kept)


def pooled(by_conversation: Mapping[str, Sequence[Outcome]]) -> list[Outcome]:
    return [o for name in sorted(by_conversation) for o in by_conversation[name]]


@dataclass(frozen=True, slots=True)
class CrossValidated:
    """A choice among plans, made without the conversation it is measured on."""

    picked: dict[str, str]  # conversation left out -> plan chosen on the others
    outcomes: list[Outcome]  # each conversation's outcomes under the plan its fold chose

    @property
    def recall10(self) -> float:
        return mean_recall(self.outcomes)


def leave_one_out(results: Outcomes, choices: Sequence[str]) -> CrossValidated:
    """For each conversation, the plan among `choices` with the best recall@10
    on the other conversations (the earlier in `choices` on a tie, so list the
    simpler first), and its outcomes on the one left out."""
    conversations = sorted(results[choices[0]])
    picked: dict[str, str] = {}
    held_out: list[Outcome] = []
    for left_out in conversations:
        best, best_score = choices[0], -1.0
        for choice in choices:
            train = [o for name in conversations if name != left_out for o in results[choice][name]]
            score = mean_recall(train)
            if score > best_score + 1e-12:
                best, best_score = choice, score
        picked[left_out] = best
        held_out.extend(results[best][left_out])
    return CrossValidated(picked, held_out)


@dataclass(frozen=True, slots=True)
class Interval:
    """A difference of recall@10 (points) with its 95 % bootstrap interval."""

    difference: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.difference:+.1f} [{self.low:+.1f}, {self.high:+.1f}]"


def paired_bootstrap(
    new: Sequence[Outcome], old: Sequence[Outcome], *, rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0
) -> Interval:
    """The mean difference `new - old` of recall@10 over the same questions
    (categories 1-4), in points, with a 95 % interval from resampling the
    questions within each conversation."""
    if len(new) != len(old):
        raise ValueError(f"unpaired outcomes: {len(new)} against {len(old)}")
    strata: dict[str, list[float]] = {}
    for a, b in zip(new, old, strict=True):
        if (a.conversation, a.category) != (b.conversation, b.category):
            raise ValueError(f"outcomes out of order at {a.conversation}: the questions must pair")
        if a.category in MAIN_CATEGORIES:
            strata.setdefault(a.conversation, []).append(a.recall10 - b.recall10)
    diffs = [d for group in strata.values() for d in group]
    if not diffs:
        return Interval(0.0, 0.0, 0.0)
    rng = random.Random(seed)
    count = len(diffs)
    means = []
    for _ in range(rounds):
        total = 0.0
        for group in strata.values():
            total += sum(rng.choices(group, k=len(group)))
        means.append(total / count)
    means.sort()
    low = means[int(rounds * 0.025)]
    high = means[min(rounds - 1, int(rounds * 0.975))]
    return Interval(100 * sum(diffs) / count, 100 * low, 100 * high)


def conversation_table(results: Outcomes, plans: Sequence[str]) -> str:
    """Recall@10 (categories 1-4) of each plan on each conversation, and overall."""
    conversations = sorted(results[plans[0]])
    width = max(len(p) for p in plans)
    head = " ".join(f"{c[-8:]:>8s}" for c in conversations)
    lines = [f"{'recall@10, categories 1-4':{width}s} {head}      all"]
    for plan in plans:
        cells = " ".join(f"{mean_recall(results[plan][c]):8.1%}" for c in conversations)
        lines.append(f"{plan:{width}s} {cells} {mean_recall(pooled(results[plan])):8.1%}")
    return "\n".join(lines)


def study_line(results: Outcomes, name: str, choices: Sequence[str], current: str) -> str:
    """One constant's study: the cross-validated choice among `choices`
    against `current`, and each alternative alone against it."""
    cv = leave_one_out(results, choices)
    base = pooled(results[current])
    folds = ", ".join(f"{c[-2:]}:{p}" for c, p in sorted(cv.picked.items()))
    parts = [f"{name}: cross-validated {cv.recall10:.1%} {paired_bootstrap(cv.outcomes, base)} (picked {folds})"]
    for choice in choices:
        if choice == current:
            continue
        parts.append(f"    {choice}: {mean_recall(pooled(results[choice])):.1%} "
                     f"{paired_bootstrap(pooled(results[choice]), base)}")
    return "\n".join(parts)


# -- the constants studied -------------------------------------------------------

# Each constant of SearchTuning that shapes the ranking, with the values tried
# against the current one. Where a value switches the signal off it comes
# first, so that a tie in a fold goes to the simpler plan.
STUDIED: dict[str, tuple[object, ...]] = {
    "neighbour_decay": (0.0, 0.25),
    "speaker_boost": (0.0, 1.0),
    "name_weight": (10**9, 1.0),  # 10**9: a name weighs what its rarity says
    "date_boost": (0.0, 1.0),
    "b": (0.0, 0.5),
    "window_share": (0.0,),
    "stretch_boost": (0.0, 0.5),
    "company_boost": (0.0, 1.0),
    "name_stretch_turns": (0, 5, 16),
}


def study_plans(tuning: object) -> tuple[dict[str, object], dict[str, list[str]]]:
    """Every variant of `tuning` to measure, by name ("current" first), and for
    each studied constant the names of its choices (the current one included)."""
    from dataclasses import replace

    plans: dict[str, object] = {"current": tuning}
    choices: dict[str, list[str]] = {}
    for constant, values in STUDIED.items():
        names = []
        for value in values:
            name = f"{constant}={value}"
            plans[name] = replace(tuning, **{constant: value})
            names.append(name)
        names.insert(1 if values and _switches_off(constant, values[0]) else 0, "current")
        choices[constant] = names
    return plans, choices


def _switches_off(constant: str, value: object) -> bool:
    return value in (0, 10**9)


def plan_at(rev: str, scratch: object, package_name: str = "baseline_memory") -> type:
    """`HistorySearch` as committed at `rev` (its search and query reading),
    importable beside the working tree's."""
    import importlib
    import importlib.util
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    package = Path(str(scratch)) / package_name
    package.mkdir(exist_ok=True)
    for name in ("search", "queries"):
        text = subprocess.run(
            ["git", "show", f"{rev}:src/noema/memory/{name}.py"],
            cwd=root, check=True, capture_output=True, text=True,
        ).stdout
        for sibling in ("recall", "store", "turns", "stemming", "embeddings"):
            text = text.replace(f"from .{sibling} import", f"from noema.memory.{sibling} import")
        (package / f"{name}.py").write_text(text)
    (package / "__init__.py").write_text("")
    spec = importlib.util.spec_from_file_location(
        package_name, package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[package_name] = module
    spec.loader.exec_module(module)
    return importlib.import_module(f"{package_name}.search").HistorySearch


# -- the meaning signal ----------------------------------------------------------------

# Keyword shares of the reranked score tried under cross-validation; 1.0 is
# the keyword ranking alone, so it comes first.
MEANING_WEIGHTS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)


class CachedEmbedder:
    """The local model in this process, each text embedded once: the plans
    compared embed the same questions, and at scale the same candidates."""

    def __init__(self) -> None:
        from noema.memory.embeddings_local import MODEL_NAME, OnnxEmbedder

        self.name = MODEL_NAME
        self._model = OnnxEmbedder()
        self._kept: dict[str, list[float]] = {}
        self.seconds = 0.0  # spent embedding
        self.query_cpu = 0.0  # CPU seconds spent embedding queries outside the main thread

    def embed(self, texts):
        import time

        if len(texts) == 1:  # a query: embedded every time, as the search would, and timed with it
            import threading

            started = time.thread_time()
            vectors = self._model.embed(texts)
            if threading.current_thread() is not threading.main_thread():
                self.query_cpu += time.thread_time() - started
            return vectors
        todo = [t for t in dict.fromkeys(texts) if t not in self._kept]
        if todo:
            started = time.process_time()
            for text, vector in zip(todo, self._model.embed(todo), strict=True):
                self._kept[text] = vector
            self.seconds += time.process_time() - started
        return [self._kept[t] for t in texts]

    def forget(self) -> None:
        self._kept.clear()

    def close(self) -> None:
        pass


def embed_turns(store: object, embedder: CachedEmbedder, ids: object = None) -> None:
    """Vectors for the turns of `store` (those of `ids`, or all) that have none."""
    from noema.memory.embeddings import EmbeddingTable, embed_text

    table = EmbeddingTable(store, embedder.name)
    wanted = sorted(ids) if ids is not None else None
    turns = store.get_many(wanted) if wanted is not None else store.range(1, store.last_id())
    have = table.get(t.id for t in turns)
    todo = [t for t in turns if t.id not in have]
    for start in range(0, len(todo), 64):
        chunk = todo[start : start + 64]
        table.put([t.id for t in chunk], embedder.embed([embed_text(t) for t in chunk]))


class OnDemandMeaning:
    """`Meaning` over a store whose turns are embedded when first a candidate:
    the ranking is what a fully embedded store gives (a turn that is never a
    candidate never counts), without embedding a million distractors."""

    def __init__(self, store: object, embedder: CachedEmbedder, weight: float) -> None:
        from noema.memory.embeddings import Meaning

        self._store, self._embedder = store, embedder
        self._inner = Meaning(store, embedder, weight=weight)
        self.depth = self._inner.depth
        self.excluded = (0.0, 0.0)  # (wall, CPU) seconds the last rerank spent embedding candidates

    def expect(self, query):
        self._inner.expect(query)

    def rerank(self, query, candidates):
        import time

        started, cpu = time.perf_counter(), time.thread_time()
        embed_turns(self._store, self._embedder, [i for i, _ in candidates[: self.depth]])
        # What a store embedded in the background would not spend at query time.
        self.excluded = (time.perf_counter() - started, time.thread_time() - cpu)
        return self._inner.rerank(query, candidates)

    def closest(self, query, turn_ids, count):
        import time

        ids = list(turn_ids)
        started, cpu = time.perf_counter(), time.thread_time()
        embed_turns(self._store, self._embedder, ids)
        wall, spent = self.excluded  # added to what the rerank of the same search spent
        self.excluded = (wall + time.perf_counter() - started, spent + time.thread_time() - cpu)
        return self._inner.closest(query, ids, count)

    def close(self) -> None:
        pass  # the embedder is shared by every plan and conversation of the run


def meaning_plans(embedder: CachedEmbedder, on_demand: bool) -> dict:
    """A plan per keyword share in MEANING_WEIGHTS (below 1.0), by name."""
    from noema.memory.embeddings import Meaning
    from noema.memory.search import HistorySearch

    plans = {}
    for weight in MEANING_WEIGHTS[1:]:
        def make(store, weight=weight):
            if on_demand:
                return HistorySearch(store, meaning=OnDemandMeaning(store, embedder, weight))
            embed_turns(store, embedder)
            return HistorySearch(store, meaning=Meaning(store, embedder, weight=weight))
        plans[f"meaning={weight}"] = make
    return plans


def meaning_study(results: Outcomes, current: str) -> str:
    """The keyword share chosen by leaving one conversation out, against the
    keyword ranking alone, and each share alone against it."""
    names = [current, *(f"meaning={w}" for w in MEANING_WEIGHTS[1:])]
    return study_line(results, "keyword share with the meaning signal", names, current)
