"""A real model server: llama.cpp's (llama-cpp-python) with SmolLM2-135M-Instruct
on 127.0.0.1, driven through Noema's own provider and chronicler.

- first token:  a short streamed request → its first words (p50/p99), without
  tools and with a tool offered (that server then answers in one piece);
- stop:         a long answer cancelled at its first words → the stream closed
  on our side, and → the server free again (its next answer's first words,
  less a first token measured alone: what the abandoned answer still cost);
- chronicler:   save points asked of the real model over a synthetic
  conversation, with the validator's retries: the share of attempts it
  accepts, and why the others were refused.

Prints figures; asserts nothing. Needs `scripts/llama_server install`.

    .venv/bin/python bench/real_model.py [--requests 20] [--stops 10] [--compactions 3]
                                         [--retries 2] [--answer-tokens 400] [--smoke]

`--smoke` asks one of each, and one short attempt per save point: every
figure once, on too few samples to trust.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.realmodel

from noema.memory.chronicler import Chronicler
from noema.memory.compaction import Compactor
from noema.memory.session import Session
from noema.memory.settings import MemorySettings
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind
from noema.providers.base import Message, MessageRole, ModelRequest, TextDelta, ToolCallDelta, ToolSpec
from noema.providers.catalog import build_provider
from noema.providers.settings import ModelSettings
from tests.realmodel.server import ServerProcess, Unavailable

WRITE = ToolSpec("file_write", "Write a text file.", {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
})
TOPICS = ("the vegetable garden", "a trip to Lisbon", "the leaking kitchen tap",
          "a birthday present for Marta", "learning the guitar", "the tax return")


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def ms(samples: list[float]) -> str:
    values = [s * 1000 for s in samples]
    return (f"p50 {percentile(values, 0.5):8.1f} ms  p99 {percentile(values, 0.99):8.1f} ms  "
            f"max {max(values):8.1f} ms  (n={len(values)})")


def ask(text: str, tools: tuple[ToolSpec, ...] = (), max_tokens: int = 24) -> ModelRequest:
    return ModelRequest(messages=(Message(MessageRole.SYSTEM, "You are a helpful assistant."),
                                  Message(MessageRole.USER, text)),
                        tools=tools, max_tokens=max_tokens)


async def first_event(provider, request: ModelRequest) -> float:
    """Seconds from the request to its first words or call; the rest is read to its end."""
    started = time.perf_counter()
    first = None
    async for event in provider.stream(request):
        if first is None and isinstance(event, (TextDelta, ToolCallDelta)):
            first = time.perf_counter() - started
    if first is None:
        raise RuntimeError("the answer held neither words nor a call")
    return first


async def first_tokens(provider, count: int) -> None:
    plain = [await first_event(provider, ask(f"Name a colour. ({n})")) for n in range(count)]
    print(f"first token, no tools:      {ms(plain)}")
    tooled = [await first_event(provider, ask(f"Write hello to a.txt. ({n})", tools=(WRITE,)))
              for n in range(count)]
    print(f"first event, a tool offered: {ms(tooled)}")


async def stops(provider, count: int) -> None:
    closed: list[float] = []
    freed: list[float] = []
    baseline = [await first_event(provider, ask(f"Say yes. ({n})")) for n in range(count)]
    for n in range(count):
        stream = provider.stream(ask(f"Tell me a very long story about a lighthouse. ({n})",
                                     max_tokens=1024))
        async for event in stream:
            if isinstance(event, TextDelta) and event.text.strip():
                break
        stop = time.perf_counter()
        await stream.aclose()
        closed.append(time.perf_counter() - stop)
        # The server notices the hang-up between two tokens; until then the next waits.
        next_first = await first_event(provider, ask(f"Say yes. ({n})"))
        freed.append(time.perf_counter() - stop - next_first)
    print(f"/stop → stream closed:       {ms(closed)}")
    extra = [max(0.0, f) for f in freed]
    print(f"/stop → server free again:   {ms(extra)}  "
          f"(next first token {statistics.median(baseline) * 1000:.1f} ms alone)")


def converse(session: Session, exchanges: int, offset: int) -> None:
    for n in range(exchanges):
        topic = TOPICS[(n + offset) % len(TOPICS)]
        session.append(NewTurn(TurnKind.USER, f"Can you help me with {topic}? It is on my mind."))
        session.append(NewTurn(TurnKind.ASSISTANT,
                               f"Of course. About {topic}: let us take it one step at a time, "
                               "starting with what matters most to you."))


async def chronicler_share(provider, compactions: int, retries: int, window: int,
                           answer_tokens: int) -> None:
    settings = MemorySettings(retries=retries, min_journey_words=20, keep_recent_turns=2)
    verdicts = collections.Counter()
    attempts = accepted = 0
    spent: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        for n in range(compactions):
            store = TurnStore(Path(folder) / f"turns-{n}.db")
            try:
                session = Session.load(store)
                converse(session, 8, n)
                compactor = Compactor(session, Chronicler(provider, max_output_tokens=answer_tokens),
                                      settings, context_window=window)
                outcome = await compactor.compact()
                report = outcome.save_point.report if outcome.save_point else None
                for attempt in report.attempts if report else ():
                    attempts += 1
                    spent.append(attempt.chronicler_s)
                    if not attempt.failures:
                        accepted += 1
                    verdicts.update(code for code, _ in attempt.failures)
            finally:
                store.close()
    share = accepted / attempts if attempts else 0.0
    print(f"chronicler attempts accepted: {share:.1%} ({accepted} of {attempts}, "
          f"{compactions} compactions)")
    if spent:
        print(f"chronicler attempt:          p50 {statistics.median(spent):.1f} s")
    for code, times in verdicts.most_common():
        print(f"  refused for {code}: {times}")


async def main(args: argparse.Namespace) -> None:
    log = Path(tempfile.mkdtemp(prefix="noema-llama-")) / "server.log"
    try:
        server_cm = ServerProcess(log)
        server = server_cm.__enter__()
    except Unavailable as missing:
        sys.exit(f"real_model: {missing}")
    try:
        settings = ModelSettings(provider="llamacpp", model=server.model, base_url=server.base_url,
                                 context_window=server.context_window, temperature=0,
                                 max_retries=1)
        provider = build_provider(settings, {})
        try:
            await first_tokens(provider, args.requests)
            await stops(provider, args.stops)
            await chronicler_share(provider, args.compactions, args.retries, server.context_window,
                                   args.answer_tokens)
        finally:
            await provider.aclose()
    finally:
        server_cm.__exit__()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--stops", type=int, default=10)
    parser.add_argument("--compactions", type=int, default=3)
    parser.add_argument("--retries", type=int, default=2, help="the validator's retries")
    parser.add_argument("--answer-tokens", type=int, default=400,
                        help="the most tokens a save point may take")
    parser.add_argument("--smoke", action="store_true")
    parsed = parser.parse_args()
    if parsed.smoke:
        parsed.requests, parsed.stops, parsed.compactions, parsed.retries = 1, 1, 1, 0
        parsed.answer_tokens = 60
    asyncio.run(main(parsed))
