"""A scripted source of events, for the demo, the benchmarks and tests.

A script is a list of stimuli with their offset from the start; builders
make the usual shapes (a log storm, a chat burst, state updates), and the
sensor replays a script on whatever clock and sleep it is given.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..clock import Clock, wall_clock
from ..events import Event, Payload, SensorInfo
from ..hub import Emitter, Sleep


@dataclass(frozen=True, slots=True)
class Stimulus:
    """One scripted event, `at` seconds after the script starts."""

    at: float
    channel: str
    text: str
    sender: str = ""
    key: str = ""
    authorised: bool = False
    payload: Payload = field(default_factory=Payload)

    def __post_init__(self) -> None:
        if self.at < 0:
            raise ValueError("a stimulus cannot come before its script starts")
        if not isinstance(self.payload, Payload):
            object.__setattr__(self, "payload", Payload(self.payload))

    def event(self, start: float, received_at: float | None = None) -> Event:
        """The event this stimulus becomes for a script started at `start`."""
        when = start + self.at
        return Event.create(
            self.channel, self.text, received_at=when if received_at is None else received_at,
            sender=self.sender or None, key=self.key, authorised=self.authorised,
            occurred_at=when, payload=self.payload,
        )


def log_storm(
    channel: str,
    *,
    rate: float,
    duration: float,
    lines: Mapping[str, float],
    sender: str = "/var/log/app.log",
    start: float = 0.0,
    seed: int = 0,
    key: Callable[[str], str] | None = None,
) -> list[Stimulus]:
    """`rate` lines a second for `duration` seconds, drawn from line templates by weight.

    Templates may use {ip}, {n}, {ms}, {hex} and {uuid}; `key` maps a line to
    its aggregation key (by default the template itself).
    """
    rng = random.Random(seed)
    templates, weights = list(lines), list(lines.values())
    count = int(rate * duration)
    out = []
    for i in range(count):
        template = rng.choices(templates, weights)[0]
        text = template.format(
            ip=f"10.0.{rng.randrange(4)}.{rng.randrange(1, 255)}", n=rng.randrange(1, 5000),
            ms=rng.randrange(5, 2000), hex=f"{rng.getrandbits(48):012x}",
            uuid=f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}"
                 f"-a{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}",
        )
        out.append(Stimulus(start + i / rate, channel, text, sender,
                            key(text) if key else template))
    return out


def chat_burst(
    channel: str, sender: str, messages: Iterable[str], *, start: float, spacing: float = 2.0,
    authorised: bool = True,
) -> list[Stimulus]:
    """Messages from one sender, `spacing` seconds apart."""
    return [
        Stimulus(start + i * spacing, channel, text, sender, authorised=authorised)
        for i, text in enumerate(messages)
    ]


def state_updates(
    channel: str, key: str, values: Iterable[tuple[float, str, Mapping[str, Any]]],
    *, sender: str = "", authorised: bool = True,
) -> list[Stimulus]:
    """(at, text, payload) updates of one state key."""
    return [Stimulus(at, channel, text, sender, key, authorised, Payload(data))
            for at, text, data in values]


def merge(*scripts: Iterable[Stimulus]) -> list[Stimulus]:
    """Several scripts as one, in time order (stable for equal times)."""
    return sorted((s for script in scripts for s in script), key=lambda s: s.at)


class SimulatedSensor:
    """Replays a script of one channel in real (or fake) time."""

    def __init__(
        self, info: SensorInfo, script: Iterable[Stimulus], *, clock: Clock = wall_clock,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.info = info
        self._script = sorted(script, key=lambda s: s.at)
        for stimulus in self._script:
            if stimulus.channel != info.channel:
                raise ValueError(f"a stimulus of {stimulus.channel} in the script of "
                                 f"{info.channel}")
        self._clock = clock
        self._sleep = sleep

    async def run(self, emit: Emitter) -> None:
        start = self._clock()
        for s in self._script:
            wait = start + s.at - self._clock()
            if wait > 0:
                await self._sleep(wait)
            emit(s.text, sender=s.sender or None, key=s.key, authorised=s.authorised,
                 occurred_at=start + s.at, payload=s.payload)
