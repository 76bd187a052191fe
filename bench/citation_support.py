"""Does the support check tell a right citation from a wrong one? On LoCoMo's observations.

    .venv/bin/python bench/citation_support.py FILE [FILE ...] [--tune IDS] [--words-only] [--fit]
    .venv/bin/python bench/citation_support.py --smoke

FILE is a LoCoMo JSON file (a list of samples, each with `conversation` and
`observation`). LoCoMo's observations are facts about each speaker, each
naming the turn(s) it came from (`D1:3`): labelled (sentence, turn) pairs.
Each conversation's turns are cut, in order, into blocks of 16 turns, as the
compactor cuts a session, and each fact belongs to the block of its evidence.

- **per citation**: each fact cites its evidence turn (correct) and, one at a
  time, every other turn of the same block (wrong); a citation is accepted
  unless the check finds it unsupported.
- **per save point**: the facts of a block make one Journey, each fact a
  sentence ending with its citation; "good" cites the evidence, "shuffled"
  gives each fact another turn of the block (drawn with a fixed seed). A save
  point is rejected as the validator rejects it (`support.SupportReport.rejects`).

The constants were fitted on the conversations named by `--tune` (by default
conv-26, conv-30 and conv-41 of the five we have). The first two lines give
both figures on the others (held out; on all of them when none of the file's
conversations was tuned on); then come the tuning conversations, the
baselines, the embedding model's cosine alone (at least 0.4, or the cited
turn among the block's 5 nearest to the clause) measured in the same run
under the same rejection rule, the save point's rule at other shares of
unsupported citations, the time of one save point's check (and of embedding
its clauses), the share of correct citations found weak, and the figures per
conversation. `--words-only` judges without vectors (as the validator
does without the embedding model). `--fit` fits the weights again on the
tuning conversations and prints them (what the module's constants came from).

Turns are embedded as the store embeds them (`speaker: text`), clauses as
the validator embeds them, all with the shipped model in this process. No
model is called and nothing is downloaded. `--smoke` runs on a small
made-up conversation to check that the script works; its figures say
nothing of quality.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from noema.memory.support import (  # noqa: E402
    MAX_UNSUPPORTED_SHARE,
    WITH_MEANING,
    WORDS_ONLY,
    Judgement,
    Source,
    Support,
    SupportReport,
    Weights,
    clauses,
    judge,
    quantized,
    with_context,
)

BLOCK = 16  # turns per block, as the compactor's blocks on a long chat
TUNING = ("conv-26", "conv-30", "conv-41")
COSINE_BASELINE = 0.4
NEAREST_BASELINE = 5
SEED = 32


@dataclass
class Turn:
    number: int  # 1.. in the conversation: the turn's ID here
    speaker: str
    text: str


@dataclass
class Fact:
    sentence: str
    evidence: tuple[int, ...]  # turn numbers, all in one block


@dataclass
class Block:
    conversation: str
    turns: list[Turn]
    facts: list[Fact] = field(default_factory=list)


def load(paths: Sequence[Path]) -> list[Block]:
    """Every conversation's blocks, with the facts whose evidence they hold."""
    blocks: list[Block] = []
    for path in paths:
        for sample in json.loads(path.read_text(encoding="utf-8")):
            name = sample.get("sample_id", path.stem)
            conversation = sample["conversation"]
            turns: list[Turn] = []
            number_of: dict[str, int] = {}
            session = 1
            while f"session_{session}" in conversation:
                for entry in conversation[f"session_{session}"]:
                    text = entry.get("text", "")
                    if entry.get("blip_caption"):
                        text += f" [shares {entry['blip_caption']}]"
                    turns.append(Turn(len(turns) + 1, entry["speaker"], text))
                    number_of[entry["dia_id"]] = len(turns)
                session += 1
            mine = [Block(name, turns[at: at + BLOCK]) for at in range(0, len(turns), BLOCK)]
            for observations in sample.get("observation", {}).values():
                for facts in observations.values():
                    for sentence, evidence in facts:
                        cited = [number_of[e] for e in ([evidence] if isinstance(evidence, str)
                                                        else evidence) if e in number_of]
                        if not cited:
                            continue
                        block = (cited[0] - 1) // BLOCK
                        inside = tuple(sorted({n for n in cited if (n - 1) // BLOCK == block}))
                        mine[block].facts.append(Fact(sentence.strip().rstrip("."), inside))
            blocks.extend(b for b in mine if b.facts and len(b.turns) > 1)
    return blocks


def not_locomo(path: Path) -> str | None:
    """Why `path` cannot be read as LoCoMo's format, or None when it can."""
    shape = ("a LoCoMo file is a JSON list of samples, each with a `conversation` of "
             "`session_N` lists and an `observation`")
    try:
        samples = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    except ValueError as exc:
        return f"is not JSON ({exc}); {shape}"
    if not isinstance(samples, list) or not samples:
        return f"holds no sample; {shape}"
    for sample in samples:
        if (not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict)
                or not isinstance(sample.get("observation", {}), dict)
                or "session_1" not in sample["conversation"]):
            return f"has a sample that is not one; {shape}"
    return None


def sentence(fact: Fact, ids: Sequence[int]) -> str:
    return f"{fact.sentence} {{cite:{', '.join(str(i) for i in ids)}}}."


def journey(facts: Sequence[Fact], cited: Sequence[Sequence[int]]) -> str:
    body = " ".join(sentence(f, ids) for f, ids in zip(facts, cited, strict=True))
    return f"## State\nWhere things stand.\n\n## The Journey\n{body}\n"


class Vectors:
    """The shipped model in this process, each text embedded once."""

    def __init__(self, enabled: bool, cache: Path | None = None) -> None:
        self.kept: dict[str, list[float]] = {}
        self.cache = cache
        if cache is not None and cache.exists():
            self.kept = json.loads(cache.read_text(encoding="utf-8"))
        self.model = None
        if enabled:
            from noema.memory.embeddings_local import OnnxEmbedder

            self.model = OnnxEmbedder()
        self.seconds = 0.0

    def embed(self, texts: Sequence[str]) -> None:
        todo = [t for t in dict.fromkeys(texts) if t not in self.kept]
        if self.model is None or not todo:
            return
        started = time.perf_counter()
        for text, vector in zip(todo, self.model.embed(todo), strict=True):
            self.kept[text] = vector
        self.seconds += time.perf_counter() - started
        if self.cache is not None:
            self.cache.write_text(json.dumps(self.kept), encoding="utf-8")

    def get(self, text: str) -> list[float] | None:
        return self.kept.get(text)


def sources_of(block: Block, vectors: Vectors) -> list[Source]:
    """The block's turns as the validator reads them, with their vectors as the store keeps them."""
    made = []
    for t in block.turns:
        vector = vectors.get(f"{t.speaker}: {t.text}")
        made.append(Source(t.number, t.text, (t.speaker,), quantized(vector) if vector else None))
    return with_context(made)


@dataclass
class Tally:
    correct: int = 0
    correct_accepted: int = 0
    wrong: int = 0
    wrong_rejected: int = 0
    good: int = 0
    good_accepted: int = 0
    shuffled: int = 0
    shuffled_rejected: int = 0
    weak: int = 0
    judged: int = 0

    def add(self, other: Tally) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def line(self) -> str:
        return (f"per citation: accept correct {pct(self.correct_accepted, self.correct)}, reject "
                f"wrong {pct(self.wrong_rejected, self.wrong)}; per save point: accept good "
                f"{pct(self.good_accepted, self.good)}, reject shuffled "
                f"{pct(self.shuffled_rejected, self.shuffled)}")


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "n/a"


def check(text: str, sources: list[Source], vectors: Vectors, weights: tuple[Weights, Weights],
          ) -> SupportReport:
    wanted = {c: v for c in clauses(text) if (v := vectors.get(c)) is not None}
    return judge(text, sources, clause_vectors=wanted or None,
                 with_meaning=weights[0], words_only=weights[1])


def baseline(report: SupportReport, sources: list[Source], vectors: Vectors, kind: str,
             ) -> SupportReport:
    """The same citations decided by the cosine alone."""
    by_id = {s.id: s for s in sources}
    decided = []
    for j in report.judgements:
        clause = vectors.get(j.claim.clause)
        mine = by_id[j.claim.turn_id]
        if clause is None or mine.vector is None:
            decided.append(j)
            continue
        cosines = {s.id: s.vector[0] * sum(a * b for a, b in zip(clause, s.vector[1], strict=True))
                   for s in sources if s.vector is not None}
        if kind == "cosine":
            ok = cosines[mine.id] >= COSINE_BASELINE
        else:
            nearest = sorted(cosines, key=lambda i: (-cosines[i], i))[:NEAREST_BASELINE]
            ok = mine.id in nearest
        decided.append(Judgement(j.claim, Support.SUPPORTED if ok else Support.UNSUPPORTED,
                                 0.0, j.words, j.words_margin, j.named, cosines[mine.id], None))
    return SupportReport(tuple(decided))


def accepted_citation(report: SupportReport) -> bool:
    return all(j.support is not Support.UNSUPPORTED for j in report.judgements)


def measure(blocks: Sequence[Block], vectors: Vectors, weights: tuple[Weights, Weights],
            plans: Sequence[str], signals: list | None = None,
            ) -> tuple[dict[str, dict[str, Tally]], list[float], list[tuple[str, float, float]]]:
    """Tallies per plan and conversation, the seconds of each good save point's
    check, and each block's unsupported shares (good, shuffled) by the check."""
    tallies: dict[str, dict[str, Tally]] = {p: defaultdict(Tally) for p in plans}
    times: list[float] = []
    shares: list[tuple[str, float, float]] = []
    rng = random.Random(SEED)
    for block in blocks:
        sources = sources_of(block, vectors)
        numbers = [t.number for t in block.turns]
        shuffled = []
        for fact in block.facts:
            others = [n for n in numbers if n not in fact.evidence]
            shuffled.append((rng.choice(others),))
        good_text = journey(block.facts, [f.evidence for f in block.facts])
        bad_text = journey(block.facts, shuffled)
        started = time.process_time()  # CPU: the machine may be shared
        good = check(good_text, sources, vectors, weights)
        times.append(time.process_time() - started)
        bad = check(bad_text, sources, vectors, weights)
        shares.append((block.conversation, good.unsupported_share, bad.unsupported_share))
        singles: list[tuple[bool, SupportReport]] = []
        for fact in block.facts:
            singles.append((True, check(sentence(fact, fact.evidence), sources, vectors, weights)))
            for n in numbers:
                if n not in fact.evidence:
                    singles.append((False, check(sentence(fact, (n,)), sources, vectors, weights)))
        if signals is not None:
            for right, report in singles:
                signals.extend((block.conversation, right, j) for j in report.judgements)
        for plan in plans:
            tally = tallies[plan][block.conversation]

            def decided(report: SupportReport, plan: str = plan) -> SupportReport:
                return report if plan == "check" else baseline(report, sources, vectors, plan)

            tally.good += 1
            tally.good_accepted += not decided(good).rejects
            tally.shuffled += 1
            tally.shuffled_rejected += decided(bad).rejects
            for right, report in singles:
                ok = accepted_citation(decided(report))
                if right:
                    tally.correct += 1
                    tally.correct_accepted += ok
                    tally.weak += any(j.support is Support.WEAK for j in report.judgements)
                    tally.judged += 1
                else:
                    tally.wrong += 1
                    tally.wrong_rejected += not ok
    return tallies, times, shares


def pooled(by_conversation: dict[str, Tally], names: Sequence[str]) -> Tally:
    total = Tally()
    for name in names:
        total.add(by_conversation[name])
    return total


def fit(signals: list, tuning: Sequence[str]) -> tuple[Weights, Weights]:
    """Logistic models on the tuning conversations' citations (classes weighed
    equally), with and without the cosine; the bands keep 90 % and 98 % of the
    correct citations there."""
    import numpy as np

    rows = [(right, j) for name, right, j in signals if name in tuning]
    y = np.array([1.0 if right else 0.0 for right, _ in rows])

    def columns(j: Judgement, meaning: bool) -> list[float]:
        base = [j.words, j.words_margin, 1.0 if j.named < 0 else 0.0]
        if meaning:
            base.append(j.cosine_margin or 0.0)
        return [*base, 1.0]

    fitted = []
    for meaning in (True, False):
        keep = [k for k, (_, j) in enumerate(rows) if not meaning or j.cosine is not None]
        x = np.array([columns(rows[k][1], meaning) for k in keep])
        t = y[keep]
        w = np.zeros(x.shape[1])
        balance = np.where(t == 1, 0.5 / t.mean(), 0.5 / (1 - t.mean()))
        for _ in range(60):
            p = 1 / (1 + np.exp(-x @ w))
            gradient = x.T @ (balance * (p - t)) + 1e-3 * w
            hessian = (x * (balance * p * (1 - p))[:, None]).T @ x + 1e-3 * np.eye(len(w))
            w -= np.linalg.solve(hessian, gradient)
        w = np.round(w, 2)
        scores = x @ w
        right = np.sort(scores[t == 1])
        supported = float(np.round(right[int(0.10 * len(right))], 2))
        weak = float(np.round(right[int(0.02 * len(right))], 2))
        named = dict(words=float(w[0]), words_margin=float(w[1]), other_named=float(w[2]),
                     bias=float(w[-1]), supported=supported, weak=weak)
        if meaning:
            named.update(cosine_margin=float(w[3]))
        fitted.append(Weights(**named))
    return fitted[0], fitted[1]


SHARES = (0.15, MAX_UNSUPPORTED_SHARE, 0.5)  # the save point's rule, at the shipped share and around it


def run(paths: Sequence[Path], tuning: Sequence[str], words_only: bool, refit: bool,
        cache: Path | None = None) -> None:
    started = time.perf_counter()
    blocks = load(paths)
    names = list(dict.fromkeys(b.conversation for b in blocks))
    vectors = Vectors(not words_only, cache)
    texts = [f"{t.speaker}: {t.text}" for b in blocks for t in b.turns]
    texts += [c for b in blocks for f in b.facts for c in clauses(sentence(f, f.evidence))]
    vectors.embed(texts)
    weights = (WITH_MEANING, WORDS_ONLY)
    plans = ["check"] if words_only else ["check", "cosine", "nearest"]
    signals: list | None = [] if refit else None
    if refit:
        measure(blocks, vectors, weights, ["check"], signals)
        weights = fit(signals or [], tuning)
    tallies, times, shares = measure(blocks, vectors, weights, plans)
    held = [n for n in names if n not in tuning]
    tuned = [n for n in names if n in tuning]
    headline = held or names
    first = pooled(tallies["check"], headline)
    print(f"per citation: accept correct {pct(first.correct_accepted, first.correct)}, "
          f"reject wrong {pct(first.wrong_rejected, first.wrong)}")
    print(f"per save point: accept good {pct(first.good_accepted, first.good)}, "
          f"reject shuffled {pct(first.shuffled_rejected, first.shuffled)}")
    facts = sum(len(b.facts) for b in blocks)
    mode = "words alone (no vectors)" if words_only else "words, speaker and meaning"
    print(f"(above: {'held out' if held else 'all'}, {', '.join(headline)}; {len(blocks)} blocks of "
          f"up to {BLOCK} turns, {facts} facts; the check on {mode})")
    if held and tuned:
        print(f"tuning ({', '.join(tuned)}): {pooled(tallies['check'], tuned).line()}")
    if not words_only:
        for plan, title in (("cosine", f"baseline cosine >= {COSINE_BASELINE}"),
                            ("nearest", f"baseline among the block's {NEAREST_BASELINE} nearest")):
            for label, group in (("held out", held), ("tuning", tuned)):
                if group:
                    print(f"{title}, {label}: {pooled(tallies[plan], group).line()}")
    for share in SHARES:
        kept = [(g, b) for name, g, b in shares if name in headline]
        good = sum(g <= share for g, _ in kept)
        bad = sum(b > share for _, b in kept)
        shipped = " (shipped)" if share == MAX_UNSUPPORTED_SHARE else ""
        print(f"save points rejected past {share:.0%} unsupported{shipped}: accept good "
              f"{pct(good, len(kept))}, reject shuffled {pct(bad, len(kept))}")
    total = pooled(tallies["check"], names)
    print(f"time per save point (the check, vectors at hand; CPU time): median "
          f"{statistics.median(times) * 1000:.2f} ms, max {max(times) * 1000:.2f} ms")
    if vectors.model is not None:
        clause_times = []
        for block in blocks[:40]:
            batch = clauses(journey(block.facts, [f.evidence for f in block.facts]))
            at = time.process_time()
            vectors.model.embed(batch)
            clause_times.append((time.process_time() - at, len(batch)))
        per = statistics.median(t for t, _ in clause_times)
        size = statistics.median(n for _, n in clause_times)
        print(f"embedding a save point's clauses in one batch (in process, one thread; CPU time): "
              f"median {per * 1000:.1f} ms for {size:.0f} clauses")
    print(f"weak among correct citations: {pct(total.weak, total.judged)}")
    for name in names:
        tally = tallies["check"][name]
        print(f"  {name} ({'tuning' if name in tuning else 'held out'}): {tally.line()}")
    if refit:
        print(f"fitted on {', '.join(tuning)}:\n  WITH_MEANING = {weights[0]}\n  WORDS_ONLY = {weights[1]}")
    print(f"(embedding took {vectors.seconds:.0f} s; the run {time.perf_counter() - started:.0f} s)")


def smoke_sample() -> dict:
    """A made-up conversation in LoCoMo's format, with observations."""
    topics = ["the garden and its tomatoes", "a trip to Lisbon by train", "the new red bike",
              "her sister's wedding in June", "a job interview at the bakery",
              "the book club reading Dune", "learning the cello at night", "a broken laptop screen"]
    speakers = ("Ana", "Luis")
    conversation: dict = {"speaker_a": speakers[0], "speaker_b": speakers[1]}
    observation: dict = {}
    for number in (1, 2):
        conversation[f"session_{number}_date_time"] = "4:04 pm on 20 January, 2023"
        entries, facts = [], {s: [] for s in speakers}
        for n, topic in enumerate(topics * 2):
            dia_id = f"D{number}:{n + 1}"
            who = speakers[n % 2]
            entries.append({"speaker": who, "dia_id": dia_id, "text": f"I keep thinking about {topic}."})
            if n % 3 == 0:
                facts[who].append([f"{who} keeps thinking about {topic}.", dia_id])
        conversation[f"session_{number}"] = entries
        observation[f"session_{number}_observation"] = facts
    return {"sample_id": "smoke", "conversation": conversation, "observation": observation}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="LoCoMo JSON files")
    parser.add_argument("--tune", default=",".join(TUNING),
                        help="the conversations the constants were fitted on (default %(default)s)")
    parser.add_argument("--words-only", action="store_true", help="judge without vectors")
    parser.add_argument("--fit", action="store_true", help="fit the weights again on --tune and use them")
    parser.add_argument("--vectors", type=Path,
                        help="a file keeping the vectors between runs (made if missing)")
    parser.add_argument("--smoke", action="store_true", help="run on a small made-up conversation")
    args = parser.parse_args(argv)
    tuning = tuple(n for n in args.tune.split(",") if n)
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="noema-support-") as scratch:
            path = Path(scratch) / "smoke.json"
            path.write_text(json.dumps([smoke_sample()]), encoding="utf-8")
            run([path], tuning, words_only=True, refit=False)
        return 0
    if not args.paths:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for path in args.paths:
        problem = not_locomo(path)
        if problem:
            print(f"{path}: {problem}", file=sys.stderr)
            return 2
    run(args.paths, tuning, args.words_only, args.fit, args.vectors)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
