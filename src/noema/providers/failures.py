"""What went wrong with a model call, in neutral terms, and the error a person reads.

Each adapter turns its SDK's exceptions into a `Failure`; the retry policy
decides from it whether to try again, and `provider_error` turns the last
one into a `ProviderError` whose message says what failed and what to do.
"""

from __future__ import annotations

import ast
import email.utils
import enum
import http
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from .base import (
    AuthenticationFailed,
    BadRequest,
    ModelNotFound,
    ProtocolViolation,
    ProviderError,
    ProviderUnavailable,
)
from .endpoint import Endpoint


class FailureKind(enum.StrEnum):
    STATUS = "status"  # the server answered with an error
    CONNECTION = "connection"  # no connection, or it broke
    TIMEOUT = "timeout"  # the server went quiet for too long
    PROTOCOL = "protocol"  # the server sent something its protocol does not allow


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt."""

    kind: FailureKind
    detail: str  # the server's message or the transport's complaint
    status: int | None = None
    retry_after_s: float | None = None
    code: str | None = None  # the server's error code or type, when it gave one
    connecting: bool = False  # failed before a connection existed (nothing reached the server)
    deterministic: bool = False  # the server judged the request itself: the same one fails again

    @property
    def retryable(self) -> bool:
        if self.kind in (FailureKind.CONNECTION, FailureKind.TIMEOUT):
            return True
        if self.kind is FailureKind.STATUS and self.status is not None:
            if self.deterministic:
                return False
            return self.status in (408, 409, 429) or self.status >= 500
        return False

    @property
    def model_missing(self) -> bool:
        return self.status == 404 or self.code in ("model_not_found", "not_found_error")


class StreamMalformed(Exception):
    """Raised by the adapters' stream readers when the stream breaks its protocol."""


class StreamEndedEarly(StreamMalformed):
    """The stream ended before its finish: cut short, not garbled."""


# Errors that arrive inside a stream carry a type instead of an HTTP status.
_STATUS_OF_ERROR_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def server_message(body: object) -> tuple[str | None, str | None]:
    """The message and error code in an error body of any common shape.

    Seen in the wild: {"error": {"message", "type", "code"}} (OpenAI,
    Anthropic), the inner object alone, {"error": "text"} (Ollama), and
    {"detail": "text"} or plain text from proxies.
    """
    if isinstance(body, str):
        return (body.strip() or None), None
    if not isinstance(body, Mapping):
        return None, None
    inner = body.get("error", body)
    if isinstance(inner, str):
        return inner, None
    if not isinstance(inner, Mapping):
        return None, None
    message = inner.get("message") or body.get("detail") or body.get("message")
    code = inner.get("code") or inner.get("type")
    return (str(message) if message else None), (str(code) if code else None)


# Error types that judge the request, whatever status a server sends them with
# (llama.cpp's Python server answers a request it cannot read with a 500).
_REQUEST_ERROR_TYPES = frozenset({"invalid_request_error", "context_length_exceeded"})
# A schema validation report: pydantic's ("2 validation errors for Model",
# its lines ending "[type=string_type, …]") or FastAPI's ("7 validation
# errors:" and one dict a line, {'type': …, 'loc': (…), 'msg': …}). The
# body was checked against a schema, so the same body is refused again.
_VALIDATION_HEAD = re.compile(r"^\s*(\d+) validation errors?(?: for (\S+))?:?", re.MULTILINE)
_VALIDATION_TYPE = re.compile(r"\s*\[type=[^\]]*\]\s*$")
_TRACEBACK = "Traceback (most recent call last)"
LINE_LIMIT = 240  # characters of a server's message kept in one line


_WINDOW_WORDS = re.compile(
    r"(?:maximum context length is|exceed(?:s)? context window of|context window of)\s+(\d+)",
    re.IGNORECASE,
)


def server_window(message: str) -> int | None:
    """The context window a refusal names ("This model's maximum context
    length is 8192 tokens", as OpenAI, vLLM and llama.cpp's Python server
    word it), or None."""
    found = _WINDOW_WORDS.search(message)
    return int(found.group(1)) if found else None


def is_deterministic(status: int, message: str | None, code: str | None) -> bool:
    """Whether an error answer judged the request itself, so sending it again is useless.

    Decided by shape, not by a list of servers: a 4xx other than the ones
    that ask for patience (408, 409, 429), or a 500 whose body is a schema
    validation report or names an error type that judges the request. A
    502/503/504 is the path to the model, never the request.
    """
    if 400 <= status < 500:
        return status not in (408, 409, 429)
    if status != 500:
        return False
    if code and code.lower() in _REQUEST_ERROR_TYPES:
        return True
    return bool(message and (_VALIDATION_HEAD.search(message) or "[type=" in message
                             or ("'loc':" in message and "'msg':" in message)))


def one_line(message: str, limit: int = LINE_LIMIT) -> str:
    """A server's message as one readable line.

    A schema validation report becomes its head and first complaint
    ("1 validation error for Message: messages.1.content: Input should be a
    valid string"), a traceback is dropped, whitespace is collapsed, and the
    rest is cut at `limit` characters.
    """
    text = message.split(_TRACEBACK, 1)[0]
    head = _VALIDATION_HEAD.search(text)
    if head:
        count, model = int(head.group(1)), head.group(2)
        lines = [line for line in text[head.end():].splitlines() if line.strip()]
        complaints = _listed_complaints(lines) or _paired_complaints(lines)
        noun = "error" if count == 1 else "errors"
        text = f"{count} validation {noun}" + (f" for {model}" if model else "")
        if complaints:
            text += ": " + complaints[0]
            if count > 1:
                text += f" (and {count - 1} more)"
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text or "no message"


def _paired_complaints(lines: list[str]) -> list[str]:
    # pydantic's report alternates a location line and an indented complaint.
    return [f"{where.strip()}: {_VALIDATION_TYPE.sub('', what).strip()}"
            for where, what in zip(lines, lines[1:])
            if not where.startswith((" ", "\t")) and what.startswith((" ", "\t"))]


def _listed_complaints(lines: list[str]) -> list[str]:
    # FastAPI's: one dict a line. A body that matches none of a union's
    # members fails each; the members' "wrong role" complaints say least,
    # so the others come first.
    found: list[tuple[bool, str]] = []
    for line in lines:
        if len(line) > 4000:  # no complaint of a report is that long; do not parse it
            continue
        try:
            entry = ast.literal_eval(line.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if not isinstance(entry, dict) or "msg" not in entry:
            continue
        where = ".".join(str(part) for part in entry.get("loc", ()) if part != "body")
        found.append((entry.get("type") == "literal_error", f"{where}: {entry['msg']}"))
    return [text for _, text in sorted(found, key=lambda item: item[0])]


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a server asked for, from `retry-after-ms` or `retry-after`."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


_MARKUP = re.compile(r"<\s*(?:!doctype|html|head|body|title|h[1-6]|div|p|pre|center|hr)\b",
                     re.IGNORECASE)


def _web_page_instead(status: int) -> str:
    """What the person reads for an error sent as a web page: its status in plain
    words, never the page (markup, styles, a traceback meant for a browser)."""
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "an unknown status"
    return (f"{phrase}, sent as a web page rather than an API error; the server's own log "
            "says what failed")


def failure_from_response(
    status: int, headers: Mapping[str, str], body: object, fallback: str
) -> Failure:
    """A failure from an HTTP error response."""
    message, code = server_message(body)
    kind = (headers.get("content-type") or "").lower()
    if "html" in kind or _MARKUP.search(message or "") or _MARKUP.search(fallback or ""):
        message, code = _web_page_instead(status), None
    return Failure(
        FailureKind.STATUS,
        one_line(message or fallback),
        status=status,
        retry_after_s=retry_after_seconds(headers),
        code=code,
        deterministic=is_deterministic(status, message, code),
    )


def failure_from_stream_error(body: object, fallback: str) -> Failure:
    """A failure from an error event sent inside an already started stream."""
    message, code = server_message(body)
    status = _STATUS_OF_ERROR_TYPE.get(code or "", 500)
    return Failure(FailureKind.STATUS, one_line(message or fallback), status=status, code=code,
                   deterministic=is_deterministic(status, message, code))


def describe_transport(exc: BaseException) -> Failure | None:
    """Failures the SDKs let through unwrapped; None for anything else (a bug)."""
    if isinstance(exc, StreamMalformed):
        return Failure(FailureKind.PROTOCOL, str(exc))
    if isinstance(exc, json.JSONDecodeError):
        return Failure(FailureKind.PROTOCOL, f"an event was not valid JSON ({exc.msg})")
    import httpx2  # loaded by the SDKs' clients by now; not at start

    if isinstance(exc, httpx2.TimeoutException):
        return timeout_failure(exc)
    if isinstance(exc, httpx2.TransportError):
        return connection_failure(exc)
    return None


def timeout_failure(exc: BaseException) -> Failure:
    """A timeout, noting whether connecting or waiting for data took too long."""
    import httpx2

    chain = (exc, exc.__cause__, exc.__context__)
    connecting = any(isinstance(e, (httpx2.ConnectTimeout, httpx2.PoolTimeout)) for e in chain)
    return Failure(FailureKind.TIMEOUT, _words(exc), connecting=connecting)


def connection_failure(exc: BaseException) -> Failure:
    """A connection failure, noting whether one was never made or it broke.

    The detail is the transport's own words, found under an SDK's generic
    'Connection error.' when there is one.
    """
    import httpx2

    chain = (exc, exc.__cause__, exc.__context__)
    connecting = any(isinstance(e, httpx2.ConnectError) for e in chain)
    return Failure(FailureKind.CONNECTION, _words(exc), connecting=connecting)


def _words(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause):
        return str(cause)
    return str(exc) or type(exc).__name__


def summary(failure: Failure, endpoint: Endpoint) -> str:
    """A short phrase for what happened: 'rate limited (HTTP 429: slow down)'."""
    if failure.kind is FailureKind.TIMEOUT and failure.connecting:
        return f"timed out (no connection within {endpoint.connect_timeout_s:g} s)"
    if failure.kind is FailureKind.TIMEOUT:
        return f"timed out (no data for {endpoint.timeout_s:g} s)"
    if failure.kind is FailureKind.CONNECTION and failure.connecting:
        return f"could not connect ({failure.detail})"
    if failure.kind is FailureKind.CONNECTION:
        return f"the connection broke ({failure.detail})"
    if failure.kind is FailureKind.PROTOCOL:
        return f"malformed stream ({failure.detail})"
    reason = "rate limited" if failure.status == 429 else "server error"
    return f"{reason} (HTTP {failure.status}: {failure.detail})"


def provider_error(
    failure: Failure, endpoint: Endpoint, *, attempts: int, mid_stream: bool
) -> ProviderError:
    """The error to raise once no more attempts will be made."""
    where = endpoint.where
    if failure.kind is FailureKind.PROTOCOL:
        return ProtocolViolation(f"{where} sent a stream that breaks its own protocol: {failure.detail}")
    if failure.kind is FailureKind.STATUS and failure.status in (401, 403):
        if endpoint.key_env:
            return AuthenticationFailed(
                f"the key in {endpoint.key_env} was rejected by {where} "
                f"(HTTP {failure.status}: {failure.detail}); check it"
            )
        return AuthenticationFailed(
            f"{where} refused the request as unauthorised (HTTP {failure.status}: "
            f"{failure.detail}); if it needs a key, set api_key_env to the variable that holds it"
        )
    if failure.kind is FailureKind.STATUS and failure.status and 300 <= failure.status < 400:
        return BadRequest(
            f"{where} answered with a redirect (HTTP {failure.status}); a model server's "
            "redirects are not followed, so the key never goes to another address: if the "
            "server has moved, set base_url to its new address"
        )
    if failure.kind is FailureKind.STATUS and failure.model_missing:
        return ModelNotFound(
            f"{where} does not know model {endpoint.model!r} ({failure.detail}); check the "
            "model name (for a local server, that the model is pulled or loaded) and that "
            "base_url is right"
        )
    if failure.kind is FailureKind.STATUS and not failure.retryable:
        window = server_window(failure.detail)
        advice = (f"; the server's window is {window:,} tokens: set the model's "
                  f"context_window to {window}" if window else "")
        return BadRequest(
            f"{where} rejected the request (HTTP {failure.status}): {failure.detail}{advice}",
            server_window=window,
        )
    if mid_stream:
        return ProviderUnavailable(
            f"the answer from {where} broke off after it had started: {summary(failure, endpoint)}; "
            "it was not retried, so that a partial answer is never repeated"
        )
    times = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    return ProviderUnavailable(
        f"{where} (model {endpoint.model!r}) kept failing: {summary(failure, endpoint)}; "
        f"gave up after {times}"
    )
