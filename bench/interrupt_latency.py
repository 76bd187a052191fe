"""Interrupt latency: from an urgent event's arrival to the next request on the wire.

The real OpenAI client streams from the fake Chat Completions server on
127.0.0.1 at 50 tokens a second. In each trial the model is mid-answer when
an urgent event arrives; half the trials are safe cycles (safe cancellation),
half follow a file write (unsafe cancellation: notice and event). Measured
from the call that hands the event to the agent:

- closed:     the model stream is closed on our side (the HTTP response released);
- sanitised:  the history is repaired and the package written to the session;
- sent:       the new request is handed to the HTTP transport;
- answered:   the new response's headers are back (includes the fake server's work).

The fake server runs in its own process, as a real endpoint would: in the
same process its thread would compete with the agent's loop for the GIL.

Target: p99 of `sent` within 20 ms. Prints figures and ratios; asserts nothing.

    .venv/bin/python bench/interrupt_latency.py [--trials 1000] [--tokens-per-second 50] [--smoke]

`--smoke` runs 4 trials: every figure once, on too few samples to trust.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.fakes

from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.orchestrator.agent import Agent, AgentListener, Senses
from noema.orchestrator.cycle import ReasoningCycle
from noema.orchestrator.decisions import Deliver
from noema.orchestrator.settings import ReflexSettings
from noema.perception.archive import SensoryArchive
from noema.perception.events import Event, Nature, SensorInfo, Urgency
from noema.perception.packing import render_pool_event
from noema.perception.pipeline import Pipeline
from noema.perception.untrusted import SessionDelimiter
from noema.providers.catalog import build_provider
from noema.providers.settings import ModelSettings
from noema.tools.registry import ToolContext, ToolRegistry, tool
from tests.fakes import FakeOpenAIServer, FakeReply, FakeToolCall

TARGET_MS = 20.0
SMOKE_TRIALS = 4  # two of each kind: the fewest the percentiles can be taken over
LONG = "word " * 2000
PAGER = SensorInfo("pager", "the on-call pager", Nature.DISCRETE, default_urgency=Urgency.URGENT)


@tool(side_effects=True)
def write_note(ctx: ToolContext, text: str) -> str:
    """Write a note.

    Args:
        text: The note.
    """
    return f"wrote {text}"


class Marks:
    """Moments of one trial, on the performance counter."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.event: float | None = None
        self.closed: float | None = None
        self.sanitised: float | None = None
        self.sent: float | None = None
        self.answered: float | None = None


class Timed:
    """A provider wrapper that notes when a stream is released."""

    def __init__(self, inner, marks: Marks) -> None:
        self.inner, self.marks = inner, marks
        self.name, self.model, self.context_window = inner.name, inner.model, inner.context_window

    async def stream(self, request):
        stream = self.inner.stream(request)
        try:
            async for item in stream:
                yield item
        finally:
            await stream.aclose()
            if self.marks.event is not None and self.marks.closed is None:
                self.marks.closed = time.perf_counter()


class Listener(AgentListener):
    def __init__(self, marks: Marks) -> None:
        self.marks = marks
        self.streaming = asyncio.Event()
        self.step = 0

    def on_model_request(self, step: int) -> None:
        self.step = step

    def on_text(self, delta: str) -> None:
        if self.step >= self.wanted_step:
            self.streaming.set()

    def on_decision(self, decision) -> None:
        if isinstance(decision, Deliver) and self.marks.event is not None:
            self.marks.sanitised = self.marks.sanitised or time.perf_counter()


def hook_http(provider, marks: Marks) -> None:
    http = provider._client._client  # the openai client's httpx.AsyncClient

    async def on_request(request) -> None:
        if marks.event is not None and marks.sent is None:
            marks.sent = time.perf_counter()

    async def on_response(response) -> None:
        if marks.sent is not None and marks.answered is None:
            marks.answered = time.perf_counter()

    http.event_hooks = {"request": [on_request], "response": [on_response]}


async def trial(provider, server, marks: Marks, unsafe: bool, n: int) -> None:
    store = TurnStore(":memory:")
    session = Session.load(store)
    pipeline = Pipeline(SensoryArchive(":memory:"), [PAGER])
    delimiter = SessionDelimiter("be7c4b1e5eed")
    senses = Senses(pipeline, lambda items, now: render_pool_event(items, delimiter, now=now))
    listener = Listener(marks)
    listener.wanted_step = 1 if unsafe else 0
    cycle = ReasoningCycle(session, provider, ToolRegistry([write_note]), lambda: "You are terse.")
    agent = Agent(session, cycle, listener, context_window=100_000,
                  reflexes=ReflexSettings(idle_quiet_window_s=0, idle_max_wait_s=0),
                  senses=senses)
    if unsafe:
        server.script(
            FakeReply(text="Writing.", tool_calls=(FakeToolCall("write_note", '{"text":"x"}'),)),
            FakeReply(text=LONG), FakeReply(text=LONG),
        )
    else:
        server.script(FakeReply(text=LONG), FakeReply(text=LONG))
    agent.submit(f"trial {n}: write at length")
    await asyncio.wait_for(listener.streaming.wait(), 30)
    await asyncio.sleep(random.uniform(0, 0.04))  # land anywhere between two chunks
    marks.reset()
    alert = Event.create("pager", f"alert {n}: the server is down", received_at=time.time())
    marks.event = time.perf_counter()
    agent.perceive(alert)
    while marks.sent is None or marks.answered is None:
        await asyncio.sleep(0.001)
    await agent.stop()
    await agent.close()
    store.close()
    pipeline.archive.conn.close()


class RemoteServer:
    """The fake server in a child process, scripted over a pipe."""

    def __init__(self, tokens_per_second: float) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, tokens_per_second),
                                         daemon=True)
        self._process.start()
        self.base_url = self._pipe.recv()

    def script(self, *replies: FakeReply) -> None:
        self._pipe.send(replies)
        self._pipe.recv()  # scripted before the next request can arrive

    def close(self) -> None:
        self._pipe.send(None)
        self._process.join(10)


def _serve(pipe, tokens_per_second: float) -> None:
    with FakeOpenAIServer(tokens_per_second=tokens_per_second) as server:
        pipe.send(server.base_url)
        while (replies := pipe.recv()) is not None:
            server.script(*replies)
            pipe.send(True)


def figures(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return (f"{name:<10} p50 {q[49]:6.2f}  p90 {q[89]:6.2f}  p99 {q[98]:6.2f}  "
            f"max {ms[-1]:6.2f} ms")


async def main(trials: int, tokens_per_second: float) -> None:
    server = RemoteServer(tokens_per_second)
    try:
        settings = ModelSettings(provider="openai-compatible", model="fake",
                                 base_url=server.base_url, max_retries=0)
        raw = build_provider(settings, {})
        marks = Marks()
        hook_http(raw, marks)
        provider = Timed(raw, marks)
        results: dict[str, dict[str, list[float]]] = {
            kind: {"closed": [], "sanitised": [], "sent": [], "answered": []}
            for kind in ("safe", "unsafe")
        }
        started = time.perf_counter()
        for n in range(trials):
            kind = "unsafe" if n % 2 else "safe"
            gc.collect()
            await trial(provider, server, marks, kind == "unsafe", n)
            for part in ("closed", "sanitised", "sent", "answered"):
                results[kind][part].append(getattr(marks, part) - marks.event)
        await raw.aclose()
        elapsed = time.perf_counter() - started
    finally:
        server.close()
    print(f"Interrupt latency, {trials} trials ({trials // 2} safe, {trials - trials // 2} "
          f"unsafe), real openai client, fake SSE server at {tokens_per_second:g} tokens/s, "
          f"{elapsed:.0f} s in all\n")
    for kind, parts in results.items():
        print(f"{kind} cancellation:")
        for part, samples in parts.items():
            print("  " + figures(part, samples))
    every = results["safe"]["sent"] + results["unsafe"]["sent"]
    p99 = statistics.quantiles([s * 1000 for s in every], n=100, method="inclusive")[98]
    chunk_ms = 1000 / tokens_per_second
    print(f"\nall trials, event -> new request sent: p99 {p99:.2f} ms; target {TARGET_MS:g} ms "
          f"(ratio {p99 / TARGET_MS:.2f}); one token every {chunk_ms:.0f} ms "
          f"(p99 is {p99 / chunk_ms:.2f} of a token's time)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--tokens-per-second", type=float, default=50.0)
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_TRIALS} trials")
    args = parser.parse_args()
    asyncio.run(main(SMOKE_TRIALS if args.smoke else args.trials, args.tokens_per_second))
