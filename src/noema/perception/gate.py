"""The gate: the model's voluntary control over each channel.

A closed gate drops what arrives (the pipeline still counts and archives
it) and never replays it: when the gate opens, the world flows again from
that moment. A gate closes for a duration and reopens by itself when the
injected clock passes its end; there is no timer to cancel.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .events import SensorInfo
from .treatments import UnknownChannel

DEFAULT_MAX_SILENCE = 24 * 3600.0


class CannotSilence(ValueError):
    """A request to silence a sensor that declared it cannot be silenced."""


@dataclass(frozen=True, slots=True)
class GateState:
    """Whether a channel is open and, if silenced, until when."""

    channel: str
    open: bool
    until: float | None  # end of the current silence
    dropped: int  # events dropped during the current silence
    bypassed: int  # events let through the closed gate by a rule during this silence

    def time_left(self, now: float) -> float:
        return 0.0 if self.until is None else max(0.0, self.until - now)


class _Silence:
    __slots__ = ("bypassed", "dropped", "until")

    def __init__(self, until: float) -> None:
        self.until = until
        self.dropped = 0
        self.bypassed = 0


class Gate:
    """Per-channel open/closed state on an injected clock."""

    def __init__(
        self, catalogue: Mapping[str, SensorInfo], *, max_silence: float = DEFAULT_MAX_SILENCE
    ) -> None:
        if not max_silence > 0:
            raise ValueError("max_silence must be positive")
        self._catalogue = catalogue
        self.max_silence = max_silence
        self._silences: dict[str, _Silence] = {}

    def _known(self, channels: Iterable[str]) -> list[str]:
        wanted = list(dict.fromkeys(channels))
        unknown = [c for c in wanted if c not in self._catalogue]
        if unknown:
            raise UnknownChannel(
                f"unknown channel(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(self._catalogue)) or 'none'}"
            )
        return wanted

    def stop(self, channels: Iterable[str], duration: float, now: float) -> float:
        """Close channels for `duration` seconds (capped at max_silence); when they reopen.

        All or nothing: if any channel is unknown or cannot be silenced,
        no gate changes. Stopping a stopped channel sets a new end.
        """
        wanted = self._known(channels)
        fixed = [c for c in wanted if not self._catalogue[c].can_silence]
        if fixed:
            raise CannotSilence(f"these channels cannot be silenced: {', '.join(fixed)}")
        if not math.isfinite(duration) or duration <= 0:
            raise ValueError("a silence lasts a positive number of seconds")
        until = now + min(duration, self.max_silence)
        for channel in wanted:
            current = self._silences.get(channel)
            if current is not None and current.until > now:
                current.until = until
            else:
                self._silences[channel] = _Silence(until)
        return until

    def start(self, channels: Iterable[str], now: float) -> list[str]:
        """Reopen channels now; the ones that were closed."""
        reopened = []
        for channel in self._known(channels):
            silence = self._silences.pop(channel, None)
            if silence is not None and silence.until > now:
                reopened.append(channel)
        return reopened

    def is_open(self, channel: str, now: float) -> bool:
        """Whether the channel is open at `now` (a silence that has run out ends here)."""
        silence = self._silences.get(channel)
        if silence is None:
            return True
        if silence.until <= now:
            del self._silences[channel]
            return True
        return False

    def admit(self, channel: str, now: float, bypass: bool = False) -> bool:
        """Whether an event of the channel passes; a drop or bypass is counted."""
        if self.is_open(channel, now):
            return True
        silence = self._silences[channel]
        if bypass:
            silence.bypassed += 1
            return True
        silence.dropped += 1
        return False

    def state(self, channel: str, now: float) -> GateState:
        """The channel's gate as it is at `now`."""
        if self.is_open(channel, now):
            return GateState(channel, True, None, 0, 0)
        s = self._silences[channel]
        return GateState(channel, False, s.until, s.dropped, s.bypassed)
