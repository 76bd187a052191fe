"""How fast an endpoint works, and who goes first when two callers share it.

A local server on a CPU reads a prompt at a few hundred tokens a second and
writes twenty or thirty; many serve one request at a time. Two things follow:

- `Speed`: what an endpoint did, learnt from every answer that passes through
  `Metered` (the person's replies teach it as well as the chronicler's
  attempts), so a background job can size itself to a time it must keep.
- `Traffic`: one guard per server whose catalogue record says it serves one
  request at a time (`ProviderSpec.one_at_a_time`). The person's requests go
  first: one that starts while a background request streams cancels it, and
  the background caller gets `Preempted`, waits until the person's side has
  been quiet for a moment (`wait_turn`), and asks again. The conversation
  never waits behind a chronicle.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from .base import Finish, ModelRequest, Provider, StreamEvent, TextDelta, ToolCallDelta, Usage

# How much a new measure moves the learnt speed (the rest is the past).
LEARN_RATE = 0.5
# A background request starts only after the person's side was this quiet:
# between two steps of a cycle the server is idle for a moment, and a
# chronicle begun there would only be cut again.
QUIET_S = 3.0
# Each background request cut in a row doubles the quiet it waits for, this
# many times at most: a conversation in full flow keeps the server (and its
# cache of the conversation's prompt) to itself instead of being interrupted
# by a chronicle that starts again in every pause and is cut again.
MAX_DOUBLINGS = 6

# Below these a measure says more about noise than speed.
MIN_TOKENS = 8
MIN_SECONDS = 0.05


@dataclass
class Speed:
    """What one endpoint does per second: tokens of prompt read, of answer written."""

    read: float | None = None  # prompt tokens per second
    write: float | None = None  # answer tokens per second
    samples: int = 0

    def learn(self, *, prompt_tokens: int, first_s: float | None, answer_tokens: int,
              writing_s: float | None) -> None:
        """Fold in one request: `first_s` from sending to the first piece of the
        answer (mostly reading the prompt), `writing_s` from there to the end."""
        if first_s is not None and prompt_tokens >= MIN_TOKENS and first_s >= MIN_SECONDS:
            self.read = _blend(self.read, prompt_tokens / first_s)
        if writing_s is not None and answer_tokens >= MIN_TOKENS and writing_s >= MIN_SECONDS:
            self.write = _blend(self.write, answer_tokens / writing_s)
        self.samples += 1

    def seconds(self, prompt_tokens: int, answer_tokens: int) -> float | None:
        """How long a request of this size would take, or None while unknown."""
        if self.write is None:
            return None
        reading = prompt_tokens / self.read if self.read else 0.0
        return reading + answer_tokens / self.write

    def describe(self) -> str:
        """`reads 310 tokens/s, writes 28 tokens/s`, for the log and the status."""
        parts = []
        if self.read:
            parts.append(f"reads {self.read:,.0f} tokens/s")
        if self.write:
            parts.append(f"writes {self.write:,.1f} tokens/s")
        return ", ".join(parts) or "speed not measured yet"


def _blend(old: float | None, new: float) -> float:
    return new if old is None else old + LEARN_RATE * (new - old)


class Preempted(Exception):
    """A background request gave way to the person's; ask again after `Traffic.wait_turn`."""


@dataclass
class Traffic:
    """The requests of one server that serves one at a time: the person's first."""

    quiet_s: float = QUIET_S
    clock: Callable[[], float] = time.monotonic
    _person: int = 0
    _last_person: float = float("-inf")
    _background: set[asyncio.Task[Any]] = field(default_factory=set)
    _preempted: set[asyncio.Task[Any]] = field(default_factory=set)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    preemptions: int = 0  # background requests cut so far, for the log and the benches
    _streak: int = 0  # background requests cut in a row, since one ran to its end

    def quiet_needed(self) -> float:
        """How long the person's side must be quiet before a background request starts."""
        return self.quiet_s * 2 ** min(self._streak, MAX_DOUBLINGS)

    @property
    def person_busy(self) -> bool:
        return self._person > 0

    @contextlib.asynccontextmanager
    async def person(self) -> AsyncIterator[None]:
        """Around one of the person's requests: a background one streaming now gives way."""
        self._person += 1
        for task in list(self._background):
            if task not in self._preempted and not task.done():
                self._preempted.add(task)
                self.preemptions += 1
                task.cancel()
        try:
            yield
        finally:
            self._person -= 1
            self._last_person = self.clock()
            self._changed.set()

    async def wait_turn(self) -> None:
        """Until the person's side has been quiet for `quiet_s`."""
        while True:
            if not self._person:
                left = self._last_person + self.quiet_needed() - self.clock()
                if left <= 0:
                    return
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await self._changed.wait()
                continue
            self._changed.clear()
            await self._changed.wait()

    @contextlib.asynccontextmanager
    async def background(self) -> AsyncIterator[None]:
        """Around a background request: it starts once the person's side is
        quiet, and raises `Preempted` if the person's next request cuts it."""
        await self.wait_turn()
        task = asyncio.current_task()
        assert task is not None
        self._background.add(task)
        try:
            yield
        except asyncio.CancelledError:
            if task not in self._preempted:
                raise
            self._preempted.discard(task)
            task.uncancel()
            self._streak += 1
            raise Preempted("the person's request went first") from None
        else:
            self._streak = 0
        finally:
            self._background.discard(task)
            self._preempted.discard(task)


# Speeds by endpoint (server and model), for the life of the process: the
# reasoning model's replies teach the chronicler's when both are one model.
_SPEEDS: dict[tuple[str, str], Speed] = {}


def speed_of(provider: Provider) -> Speed:
    """The speed learnt so far for the endpoint (server and model) `provider`
    talks to; a provider with no endpoint (a scripted one) gets its own."""
    endpoint = getattr(provider, "endpoint", None)
    base_url = getattr(endpoint, "base_url", None)
    if not base_url:
        return Speed()
    key = (str(base_url).rstrip("/").removesuffix("/v1"), provider.model)
    return _SPEEDS.setdefault(key, Speed())


def shared_traffic(first: Provider, second: Provider) -> Traffic | None:
    """One guard for a server both providers talk to, when the catalogue says
    that kind of server answers one request at a time; None otherwise."""
    from .catalog import PROVIDERS

    def where(provider: Provider) -> str | None:
        spec = PROVIDERS.get(provider.name)
        endpoint = getattr(provider, "endpoint", None)
        base_url = getattr(endpoint, "base_url", None)
        if spec is None or not spec.one_at_a_time or not base_url:
            return None
        return str(base_url).rstrip("/").removesuffix("/v1")

    here = where(first)
    return Traffic() if here is not None and here == where(second) else None


def _estimate(text: str) -> int:
    # Rough on purpose: used only when the server sent no usage, and a speed
    # is a guide for sizing, not a count.
    return max(len(text) // 4, 0)


class Metered:
    """A provider whose answers teach `speed`, and which, given `traffic`, takes
    its turn on a shared server: first as the person's (`background=False`),
    or giving way as a background job's.

    Anything else asked of it is asked of the provider it wraps.
    """

    def __init__(self, provider: Provider, *, speed: Speed | None = None,
                 traffic: Traffic | None = None, background: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.inner = provider
        self.speed = speed if speed is not None else speed_of(provider)
        self.traffic = traffic
        self.background = background
        self._clock = clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    @property
    def model(self) -> str:  # type: ignore[override]
        return self.inner.model

    @property
    def context_window(self) -> int:
        return self.inner.context_window

    @context_window.setter
    def context_window(self, value: int) -> None:
        self.inner.context_window = value

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if self.traffic is None:
            guard: contextlib.AbstractAsyncContextManager[None] = contextlib.nullcontext()
        elif self.background:
            guard = self.traffic.background()
        else:
            guard = self.traffic.person()
        async with guard:
            async for event in self._measured(request):
                yield event

    async def _measured(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        started = self._clock()
        first: float | None = None
        written: list[str] = []
        usage: Usage | None = None
        finished = False
        try:
            async for event in self.inner.stream(request):
                if first is None and isinstance(event, (TextDelta, ToolCallDelta)):
                    first = self._clock()
                if isinstance(event, TextDelta):
                    written.append(event.text)
                elif isinstance(event, ToolCallDelta):
                    written.append(event.arguments)
                elif isinstance(event, Usage):
                    usage = event
                elif isinstance(event, Finish):
                    finished = True
                yield event
        finally:
            # A request cut short (a timeout, the person's turn) still says how
            # fast the server went while it ran.
            now = self._clock()
            if first is not None and now - first < MIN_SECONDS and written:
                first = None  # the answer came whole: its time says nothing apart
            prompt = usage.input_tokens if usage and usage.input_tokens else sum(
                _estimate(m.content) for m in request.messages)
            answer = usage.output_tokens if usage and finished else _estimate("".join(written))
            self.speed.learn(prompt_tokens=prompt,
                             first_s=None if first is None else first - started,
                             answer_tokens=answer,
                             writing_s=None if first is None else now - first)
