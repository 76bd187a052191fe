"""Validator time per save point, for save points of growing size.

    .venv/bin/python bench/validator_time.py [--smoke]     (--smoke: 3 runs a case)

Each case is a block of turns (some of them recall results that surface
older turns), a previous save point, and a new save point whose Journey
cites the block inline. The figure is the time of `citable` plus `validate`
for one save point. Prints figures only.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from noema.memory.recall import turn_header  # noqa: E402
from noema.memory.turns import ROLE_OF_KIND, Turn, TurnKind  # noqa: E402
from noema.memory.validator import citable, validate  # noqa: E402

RUNS = 200
SMOKE_RUNS = 3


def case(block_size: int, journey_words: int, seed: int = 3) -> tuple[list[Turn], str, str]:
    rng = random.Random(seed)
    first = 50_000
    turns: list[Turn] = []
    for n in range(block_size):
        tid = first + n
        if n % 25 == 24:  # now and then a recall result surfacing older turns
            older = [Turn(i, 0.0, TurnKind.USER, ROLE_OF_KIND[TurnKind.USER], "old")
                     for i in rng.sample(range(1, first), 5)]
            shown = "\n\n".join(f"{turn_header(t)}\n{t.content}" for t in older)
            turns.append(Turn(tid, 0.0, TurnKind.TOOL_RESULT, ROLE_OF_KIND[TurnKind.TOOL_RESULT],
                              shown, tool_name="lookup_turn", call_id=f"c{n}"))
        else:
            kind = TurnKind.USER if n % 2 else TurnKind.ASSISTANT
            turns.append(Turn(tid, 0.0, kind, ROLE_OF_KIND[kind], "words " * 30))
    old = rng.sample(range(1, first), 80)
    previous = "## State\nearlier\n\n## The Journey\n" + " ".join(
        f"Earlier the two discussed point {i} {{cite:{i}}}." for i in old)
    cites = [t.id for t in turns if t.kind in (TurnKind.USER, TurnKind.ASSISTANT)]
    sentences, words = [], 0
    while words < journey_words:
        cited = rng.choice(cites + old[:20])
        sentence = (f"Then the conversation turned, with some doubt and a correction, to what "
                    f"the person had said about the plan {{cite:{cited}}}, which mattered later.")
        sentences.append(sentence)
        words += len(sentence.split())
    paragraphs = [" ".join(sentences[i:i + 6]) for i in range(0, len(sentences), 6)]
    text = "## State\nWhere things stand {cite:%d}.\n\n## The Journey\n%s\n" % (
        cites[0], "\n\n".join(paragraphs))
    return turns, previous, text


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_RUNS} runs a case")
    runs = SMOKE_RUNS if parser.parse_args(argv).smoke else RUNS
    print(f"validator time per save point (citable + validate), {runs} runs each")
    for block_size, journey_words in ((20, 300), (100, 1000), (240, 2500), (240, 6000)):
        turns, previous, text = case(block_size, journey_words)
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            allowed = citable(previous, turns)
            verdict = validate(text, allowed=allowed, block=turns)
            samples.append(time.perf_counter() - started)
        samples.sort()
        state = "valid" if verdict.ok else "INVALID: " + ", ".join(f.code for f in verdict.failures)
        written = len(text.partition("## The Journey")[2].split())
        print(f"  block {block_size:3d} turns, Journey {written:5d} words, "
              f"{len(verdict.cited):3d} IDs cited: p50 {samples[len(samples) // 2] * 1000:.2f} ms, "
              f"p99 {samples[int(len(samples) * 0.99)] * 1000:.2f} ms ({state})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
