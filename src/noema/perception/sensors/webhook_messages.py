"""What the webhook's HTTP server and its application say to each other.

Plain data, apart from the server itself (`webhook_http.py`, which loads
h11), so the agent holds no HTTP parser while the webhook is off.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request and one client may take of the server."""

    head_timeout_s: float = 10.0
    body_timeout_s: float = 15.0
    send_timeout_s: float = 10.0
    max_waiting: int = 32  # connections not yet admitted, at once
    max_head_bytes: int = 16 * 1024  # request line and headers together
    max_target_bytes: int = 2048
    max_header_lines: int = 50
    max_header_line_bytes: int = 8 * 1024
    max_body_bytes: int = 256 * 1024


@dataclass(frozen=True, slots=True)
class Head:
    """A request's line and headers, as h11 read them (names in lowercase)."""

    method: str
    target: str
    path: str  # the target without its query
    headers: tuple[tuple[bytes, bytes], ...]
    client: str

    def values(self, name: bytes) -> list[bytes]:
        """Every value of header `name` (lowercase), in order."""
        return [value for key, value in self.headers if key == name]

    def value(self, name: bytes) -> str | None:
        """The first value of `name` as text, or None."""
        found = self.values(name)
        return found[0].decode("latin-1") if found else None


@dataclass(frozen=True, slots=True)
class Answer:
    """A JSON answer: its status, body and extra headers."""

    status: int
    body: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Closing:
    """Why the server refused a request before its handler saw it, for the report.

    `kind` is one of the fixed words of `PROTOCOL_KINDS`: only that word, never
    anything the client sent, is reported."""

    status: int
    kind: str
    detail: str  # told to the client

    def __post_init__(self) -> None:
        if self.kind not in PROTOCOL_KINDS:  # a word of ours, or the report could carry theirs
            raise ValueError(f"not a closing kind: {self.kind!r}")


PROTOCOL_KINDS = frozenset({"malformed", "head too large", "target too long",
                            "too many headers", "header too long", "ambiguous length",
                            "too slow", "pushed out", "too big", "failed"})


@dataclass
class Handler:
    """What the server asks of the application, per request.

    `admit` sees the head only and answers a refusal (an `Answer`) or anything
    else to read the body, which `take` then gets with the whole body; `report`
    hears of every request the server itself refused or dropped.
    """

    admit: Callable[[Head], Any]
    take: Callable[[Head, bytes, Any], Awaitable[Answer] | Answer]
    report: Callable[[Closing], None]
