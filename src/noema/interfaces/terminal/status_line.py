"""The terminal chat's status bar: context use, phase, waiting events, what
memory is writing, a retry's countdown, in one line.

Everything here is computed from protocol messages and a clock passed in, so
it is tested without a terminal and without waiting.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..host.protocol import RetryWaiting, StatusView

URGENCIES = ("urgent", "priority", "normal")  # the order the bar names them in


def waiting_events(counts: dict[str, int]) -> str:
    """`2 urgent, 5 normal`: the events waiting by urgency, most urgent first."""
    named = [u for u in URGENCIES if counts.get(u)]
    named += sorted(u for u in counts if u not in URGENCIES and counts[u])
    return ", ".join(f"{counts[u]} {u}" for u in named)


def countdown(retry: RetryWaiting, now: float) -> str:
    """`retry 2 of 4 in 7 s` while the wait lasts, `retry 2 of 4 now` after."""
    left = math.ceil(retry.until - now)
    when = f"in {left} s" if left > 0 else "now"
    return f"retry {retry.retry} of {retry.of} {when}"


def compact_tokens(n: int) -> str:
    """`812`, `12.3k`, `128k`, `1.05M`: a token count short enough for the bar."""
    if n < 1000:
        return str(n)
    if n < 100_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.2f}M".replace(".00M", "M")


@dataclass
class StatusBar:
    """The state behind the bottom bar, updated message by message."""

    agent: str = ""
    clock: Callable[[], float] = time.time
    view: StatusView | None = None
    phase: str = "idle"
    retry: RetryWaiting | None = None
    approvals: int = 0  # questions waiting for the person
    activity: str = ""  # the tool running now, if any
    _changed: list[Callable[[], None]] = field(default_factory=list)

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call `callback` whenever what the bar shows may have changed."""
        self._changed.append(callback)

    def changed(self) -> None:
        for callback in self._changed:
            callback()

    def text(self) -> str:
        """The bar's one line, as of now."""
        parts = [self.agent] if self.agent else []
        view = self.view
        if view is not None and view.context_window:
            share = view.context_tokens / view.context_window
            parts.append(f"context {compact_tokens(view.context_tokens)}/"
                         f"{compact_tokens(view.context_window)} ({share:.0%})")
        parts.append(self.phase + (f": {self.activity}" if self.activity else ""))
        if view is not None:
            waiting = waiting_events(view.waiting_events)
            if waiting:
                parts.append(f"events waiting: {waiting}" + (" (held)" if view.held else ""))
            if view.waiting_messages:
                parts.append(f"{view.waiting_messages} message(s) waiting")
        if view is not None and view.memory:
            parts.append(f"memory: {view.memory}")
        if self.retry is not None:
            parts.append(countdown(self.retry, self.clock()))
        if self.approvals:
            parts.append("an approval waits for your answer")
        return " · ".join(parts)

    @property
    def counting_down(self) -> bool:
        """Whether the bar shows a countdown (and so wants a redraw each second)."""
        return self.retry is not None and self.retry.until > self.clock()
