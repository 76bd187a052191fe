"""What a sense reports: events, and what a sensor declares about itself.

Everything here is frozen and validated on construction, so an event that
reached the gate is well formed: a known shape of channel name, finite
timestamps, a payload that is JSON data and can no longer be changed.
"""

from __future__ import annotations

import enum
import functools
import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..memory.turns import SourceKind

CHANNEL_PATTERN = re.compile(r"^[a-z][a-z0-9_.:-]{0,63}$")
MAX_KEY = 512
MAX_SENDER = 512
_MAX_DEPTH = 16


class Nature(enum.StrEnum):
    """How the body digests a sensor's events before the brain sees them."""

    DISCRETE = "discrete"  # each event is a unique fact: passed through
    AGGREGATABLE = "aggregatable"  # value is in frequency: counted per key in a window
    MERGEABLE = "mergeable"  # consecutive messages of one source form one utterance
    STATE = "state"  # only the newest value per key matters


@functools.total_ordering
class Urgency(enum.Enum):
    """When an event must be seen; ordered NORMAL < PRIORITY < URGENT."""

    NORMAL = "normal"
    PRIORITY = "priority"
    URGENT = "urgent"

    @property
    def rank(self) -> int:
        return _URGENCY_RANK[self]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Urgency):
            return NotImplemented
        return self.rank < other.rank


_URGENCY_RANK = {Urgency.NORMAL: 0, Urgency.PRIORITY: 1, Urgency.URGENT: 2}


class Payload(Mapping[str, Any]):
    """A read-only, deeply frozen JSON object (nested objects are Payloads, arrays tuples)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data = _freeze_object(data or {}, 0)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Payload({self.to_json()})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Payload):
            return self._data == other._data
        return Mapping.__eq__(self, other)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def thaw(self) -> dict[str, Any]:
        """A plain, mutable copy (dicts and lists) for serialisers."""
        return {k: _thaw(v) for k, v in self._data.items()}

    def to_json(self) -> str:
        """Compact JSON text of the payload."""
        return json.dumps(self.thaw(), ensure_ascii=False, separators=(",", ":"))


def _freeze_object(data: Mapping[str, Any], depth: int) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise TypeError(f"a payload must be a JSON object, not {type(data).__name__}")
    if isinstance(data, Payload):
        return data._data
    out: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise TypeError(f"payload keys must be strings, not {type(key).__name__}")
        out[key] = _freeze_value(value, depth + 1)
    return out


def _freeze_value(value: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise ValueError("a payload may nest at most 16 levels")
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("payload numbers must be finite (JSON has no NaN or infinity)")
        return value
    if isinstance(value, Payload):
        return value
    if isinstance(value, Mapping):
        frozen = Payload.__new__(Payload)
        frozen._data = _freeze_object(value, depth)
        return frozen
    if isinstance(value, (list, tuple)):
        return tuple(_freeze_value(v, depth + 1) for v in value)
    raise TypeError(f"payload values must be JSON data, not {type(value).__name__}")


def _thaw(value: Any) -> Any:
    if isinstance(value, Payload):
        return value.thaw()
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


EMPTY_PAYLOAD = Payload()


def _check_time(name: str, value: object) -> float:
    if type(value) is float and 0 <= value < math.inf:  # the common case, checked cheaply
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be seconds since the epoch, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite, non-negative number of seconds")
    return float(value)


def check_channel(channel: object) -> str:
    """Return the channel name if it is well formed, else raise ValueError."""
    if not isinstance(channel, str) or not CHANNEL_PATTERN.match(channel):
        raise ValueError(
            f"channel {channel!r} is not usable: lowercase letters, digits and . _ : -,"
            " starting with a letter, at most 64 characters"
        )
    return channel


def new_event_id() -> str:
    """A fresh, globally unique event ID (128 random bits in hex)."""
    return os.urandom(16).hex()


@dataclass(frozen=True, slots=True)
class Event:
    """One raw perception, as a sensor reported it.

    `batch_id` and `batch_seq` are set by the sensory archive: the batch the
    event was stored in and its offset inside that batch.
    """

    id: str
    channel: str
    sender: str
    authorised: bool
    occurred_at: float
    received_at: float
    key: str = ""
    text: str = ""
    payload: Payload = EMPTY_PAYLOAD
    batch_id: str | None = None
    batch_seq: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not 0 < len(self.id) <= 64:
            raise ValueError("an event ID must be a non-empty string of at most 64 characters")
        check_channel(self.channel)
        if not isinstance(self.sender, str) or not 0 < len(self.sender) <= MAX_SENDER:
            raise ValueError(f"an event sender must be a non-empty string of at most {MAX_SENDER}")
        if not isinstance(self.authorised, bool):
            raise TypeError("authorised must be a bool")
        object.__setattr__(self, "occurred_at", _check_time("occurred_at", self.occurred_at))
        object.__setattr__(self, "received_at", _check_time("received_at", self.received_at))
        if not isinstance(self.key, str) or len(self.key) > MAX_KEY:
            raise ValueError(f"an event key must be a string of at most {MAX_KEY} characters")
        if not isinstance(self.text, str):
            raise TypeError("event text must be a string")
        if not isinstance(self.payload, Payload):
            object.__setattr__(self, "payload", Payload(self.payload))
        if (self.batch_id is None) != (self.batch_seq is None):
            raise ValueError("batch_id and batch_seq are set together, by the archive")
        if self.batch_seq is not None and (
            not isinstance(self.batch_seq, int) or self.batch_seq < 0
        ):
            raise ValueError("batch_seq must be a non-negative integer")

    @classmethod
    def create(
        cls,
        channel: str,
        text: str,
        *,
        received_at: float,
        sender: str | None = None,
        key: str = "",
        authorised: bool = False,
        occurred_at: float | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> Event:
        """A new event with a fresh ID; the sender defaults to the channel."""
        return cls(
            id=new_event_id(),
            channel=channel,
            sender=sender or channel,
            authorised=authorised,
            occurred_at=received_at if occurred_at is None else occurred_at,
            received_at=received_at,
            key=key,
            text=text,
            payload=payload if isinstance(payload, Payload) else (
                Payload(payload) if payload else EMPTY_PAYLOAD),
        )


@dataclass(frozen=True, slots=True)
class TreatmentParams:
    """The knobs of a sensor's treatment, in seconds and events."""

    window: float = 300.0  # aggregatable: a key's window before it is reported
    quiet_gap: float = 5.0  # mergeable: silence that ends an utterance
    max_hold: float = 60.0  # mergeable: longest an utterance is held back
    hold: int = 20  # events kept in memory at each end of a burst; the middle is archived

    def __post_init__(self) -> None:
        for name in ("window", "quiet_gap", "max_hold"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds")
        if self.max_hold < self.quiet_gap:
            raise ValueError("max_hold must be at least quiet_gap")
        if not isinstance(self.hold, int) or self.hold < 1:
            raise ValueError("hold must be a positive number of events")


@dataclass(frozen=True, slots=True)
class SensorInfo:
    """What a sensor declares: its channel, its nature and how it may be controlled."""

    channel: str
    description: str
    nature: Nature
    parameters: Payload = EMPTY_PAYLOAD  # what the sensor is configured with, for the model
    can_silence: bool = True
    default_urgency: Urgency = Urgency.NORMAL
    treatment: TreatmentParams = field(default_factory=TreatmentParams)
    # Its events can carry words someone other than the person wrote (a mail,
    # a file's name, a log line); False for a sensor that speaks only its own
    # words, like a count of unread mail.
    outside_words: bool = True
    # What an unauthorised sender's words are, for the person's questions
    # (a `memory.turns.SourceKind` value: "mail", "log", "webhook" ...).
    words_of: str = "event"

    def __post_init__(self) -> None:
        check_channel(self.channel)
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValueError(f"sensor {self.channel} needs a description")
        object.__setattr__(self, "nature", Nature(self.nature))
        if not isinstance(self.default_urgency, Urgency):
            object.__setattr__(self, "default_urgency", Urgency(self.default_urgency))
        if not isinstance(self.parameters, Payload):
            object.__setattr__(self, "parameters", Payload(self.parameters))
        if not isinstance(self.treatment, TreatmentParams):
            raise TypeError("treatment must be TreatmentParams")
        object.__setattr__(self, "words_of", SourceKind(self.words_of).value)
