"""The chronicler with real small models: how often one attempt passes the
validator, asked for free text and for structured data, and how long it takes.

    .venv/bin/python bench/chronicler_attempts.py [--family smollm2,gemma3] [--blocks 5]
                                                  [--turns 16] [--file LOCOMO.json]
                                                  [--answer-tokens 500] [--smoke]

For each model family (llama.cpp's server, `scripts/llama_server install`),
`--blocks` blocks of `--turns` turns are taken from LoCoMo conversations (the
first speaker as the person, the second as the agent, a block from every
conversation in turn), and each block gets one attempt in free text and one
asked as structured data (the server decodes under the schema, its citations
an enum of the allowed IDs). Every attempt goes through the real validator.
Printed per family and form: attempts that pass, why the others failed (the
validator's codes, the support check's among them), of the attempts that
pass the share of citations supported, and the seconds of an attempt (mean and longest), with
the speed the chronicler measured. Asserts nothing; the machine may be shared,
so times vary from run to run. `--smoke` gives SmolLM2 one short block, in
both forms: every figure once, on too few samples to trust.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.realmodel

from noema.memory.chronicler import ChronicleRequest, Chronicler
from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.memory.support import Support
from noema.memory.turns import NewTurn, TurnKind
from noema.memory.validator import citable, validate
from noema.providers.catalog import build_provider
from noema.providers.settings import ModelSettings
from tests.realmodel.server import ServerProcess, Unavailable

LOCOMO = Path("/work/shared/data/locomo/locomo-dev5.json")


def blocks(path: Path, count: int, turns: int) -> list[list[tuple[str, str, str]]]:
    """`count` runs of `turns` consecutive lines: (speaker, role, text)."""
    conversations = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for n in range(count):
        conv = conversations[n % len(conversations)]["conversation"]
        lines = [line for key in sorted(k for k in conv if k.startswith("session_")
                                        and not k.endswith("date_time"))
                 for line in conv[key]]
        start = (n // len(conversations)) * turns
        chunk = lines[start:start + turns]
        first = conv["speaker_a"]
        found.append([(line["speaker"], "user" if line["speaker"] == first else "assistant",
                       line["text"]) for line in chunk])
    return found


async def attempt(chronicler: Chronicler, block, scratch: Path, n: int, args):
    store = TurnStore(scratch / f"turns-{n}.db")
    try:
        session = Session.load(store)
        for speaker, role, text in block:
            kind = TurnKind.USER if role == "user" else TurnKind.ASSISTANT
            session.append(NewTurn(kind, text, sender=speaker if role == "user" else None))
        turns = tuple(session.turns)
        request = ChronicleRequest(None, turns, citable(None, turns, lambda ids: ids),
                                   agent_name=block[1][0] if len(block) > 1 else "the agent",
                                   min_journey_words=40)
        started = time.perf_counter()
        text = await chronicler.write(request, max_tokens=args.answer_tokens)
        spent = time.perf_counter() - started
        verdict = validate(text, allowed=request.citable, block=turns, min_journey_words=40)
        return verdict, spent
    finally:
        store.close()


async def run(family: str, args) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="noema-chronicler-"))
    try:
        server_cm = ServerProcess(scratch / "server.log", family=family)
        server = server_cm.__enter__()
    except Unavailable as missing:
        print(f"{family}: skipped ({missing})")
        return
    try:
        settings = ModelSettings(provider="llamacpp", model=server.model, base_url=server.base_url,
                                 context_window=server.context_window, temperature=0,
                                 max_retries=1, timeout_s=600)
        provider = build_provider(settings, {})
        try:
            for structured in (False, True):
                chronicler = Chronicler(provider, structured=structured)
                passed, times, codes = 0, [], collections.Counter()
                supported = judged = 0  # the citations of the attempts that pass
                for n, block in enumerate(blocks(args.file, args.blocks, args.turns)):
                    verdict, spent = await attempt(chronicler, block, scratch, n, args)
                    times.append(spent)
                    passed += verdict.ok
                    codes.update({f.code for f in verdict.failures})
                    if verdict.ok and verdict.support is not None:
                        supported += verdict.support.count(Support.SUPPORTED)
                        judged += len(verdict.support.judgements)
                form = "structured" if structured else "free text"
                why = ", ".join(f"{c} {k}" for c, k in codes.most_common()) or "none"
                share = f"{supported} of {judged} citations supported" if judged else "none judged"
                print(f"{family} {form}: {passed} of {len(times)} attempts pass ({share}); "
                      f"failures: {why}; "
                      f"an attempt takes {statistics.mean(times):.1f} s on average, "
                      f"{max(times):.1f} s at most ({chronicler.speed.describe()})")
        finally:
            await provider.aclose()
    finally:
        server_cm.__exit__()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="smollm2,gemma3")
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--turns", type=int, default=16)
    parser.add_argument("--file", type=Path, default=LOCOMO)
    parser.add_argument("--answer-tokens", type=int, default=500,
                        help="the longest save point one attempt may write")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.family, args.blocks, args.turns, args.answer_tokens = "smollm2", 1, 6, 80
    for family in args.family.split(","):
        asyncio.run(run(family, args))


if __name__ == "__main__":
    sys.exit(main())
