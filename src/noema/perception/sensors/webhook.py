"""The webhook intake: an HTTP endpoint where monitoring and scripts post events.

Two formats, each on its own path and channel:

- `POST /events`: a generic event, `{"channel", "text", "key", "urgency"}`.
  `channel` names the poster's stream (it goes in the payload and the key
  defaults to it). `urgency` is a hint, kept in the payload as
  `urgency_hint`: it is the event's urgency unless one of the person's
  urgency rules decides otherwise. An outside sender's hint is held to
  `outside_urgency_max` (`priority` by default); what it asked for is kept as
  `urgency_asked` and the answer says so. Discrete events on the `webhook`
  channel.
- `POST /alertmanager`: Prometheus Alertmanager's webhook notification
  (version 4). Each alert is a state event keyed by its fingerprint on the
  `alertmanager` channel: an alert that fires then resolves is one value
  that changes.

Every request needs `Authorization: Bearer <token>` (the scheme in any case,
as RFC 7235 says; a second `Authorization` header is refused, not chosen
between), compared in constant time with each token configured
(`hmac.compare_digest`, all of them, so the time taken does not tell which
one nearly matched). The person's token makes the events authorised; the
outside sources' tokens do not, and their events reach the model as outside
data, with the source's name as sender.

A bad request is answered with its reason (401 no token, 403 wrong token,
415 not JSON, 413 too big, 400 not parseable, 422 not the format) and
counted on the `webhook.rejected` channel (aggregatable, keyed by status and
one fixed word for the reason). Nothing a refused client wrote (its path,
headers, body, address) goes into that event: a stranger does not get to
write into the model's context by being refused. The log file has the detail.

JSON is read with bounds: nesting at most `MAX_DEPTH` deep, numbers of at
most `MAX_DIGITS` digits, no key twice in one object (two parsers would pick
different values), no NaN or Infinity.

The HTTP itself is `webhook_http.py` (h11, with timeouts and room bounded).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import socket
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..alertmanager import AlertClock, Notification, reports
from ..events import CHANNEL_PATTERN, MAX_KEY, Nature, SensorInfo, Urgency
from ..hub import Emitter
from ..webhook_settings import Token, WebhookSettings, check_tokens, tokens_from
from .webhook_messages import Answer, Closing, Handler, Head, Limits

log = logging.getLogger(__name__)

MAX_TEXT = 64 * 1024
MAX_DEPTH = 32  # JSON nesting: the formats need 4
MAX_DIGITS = 40  # digits of a JSON number: more is no count or time anyone posts
M = TypeVar("M", bound=BaseModel)

PATHS = {"/events": "events", "/alertmanager": "alerts"}
# RFC 7235 credentials: an auth-scheme token, then spaces and the rest.
_CREDENTIALS = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+)(?: +(.*))?")
# A JSON string (skipped whole) or a bracket: enough to measure nesting.
_JSON_NESTING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class GenericEvent(BaseModel):
    """The generic format: one event a request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: str = Field(pattern=CHANNEL_PATTERN.pattern)
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    key: str = Field("", max_length=MAX_KEY)
    urgency: Urgency | None = None  # a hint: the urgency rules come first


class Refusal(Exception):
    """A request refused: its status, the fixed word counted for it, and the
    reason told to the poster (which only the poster sees)."""

    def __init__(self, status: int, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.kind = kind
        self.reason = reason


def check_token(values: list[bytes], tokens: list[Token]) -> Token:
    """The token the `Authorization` header values present; Refusal 401 without
    one, 400 for two headers, 403 if it is none of `tokens`. Every token is
    compared, in constant time."""
    if len(values) > 1:
        raise Refusal(400, "two tokens", "send one Authorization header, not several")
    match = _CREDENTIALS.fullmatch(values[0].decode("latin-1")) if values else None
    presented = (match[2] or "").strip() if match else ""
    if match is None or match[1].lower() != "bearer" or not presented:
        raise Refusal(401, "no token", "a bearer token is required (Authorization: Bearer <token>)")
    found = None
    for token in tokens:
        if hmac.compare_digest(presented.encode("latin-1"), token.value) and found is None:
            found = token
    if found is None:
        raise Refusal(403, "wrong token", "the token is not one this agent accepts")
    return found


class _Unreadable(ValueError):
    """JSON that is valid by the grammar but outside our bounds."""


def _number(kind: type) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        if len(text) > MAX_DIGITS + 2:  # a sign and a point or exponent aside
            raise _Unreadable(f"a number may have at most {MAX_DIGITS} digits")
        return kind(text)

    return read


def _constant(name: str) -> Any:
    raise _Unreadable(f"{name} is not a JSON number")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Unreadable(f"the key {key[:40]!r} appears twice in one object")
        out[key] = value
    return out


def load_json(body: bytes) -> Any:
    """The body as JSON within our bounds; Refusal 400 naming what is wrong."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal(400, "bad JSON", "the body is not valid JSON (not UTF-8)") from None
    depth = deepest = 0
    for match in _JSON_NESTING.finditer(text):
        bracket = match.group()
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                raise Refusal(400, "bad JSON",
                              f"the body is nested deeper than {MAX_DEPTH} levels")
        elif bracket in "]}":
            depth -= 1
    try:
        return json.loads(text, object_pairs_hook=_unique, parse_int=_number(int),
                          parse_float=_number(float), parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise Refusal(400, "bad JSON", f"the body is not valid JSON ({exc})") from None
    except _Unreadable as exc:
        raise Refusal(400, "bad JSON", f"the body is not accepted JSON: {exc}") from None
    except (RecursionError, ValueError):  # bounds above make these unlikely; never a 500
        raise Refusal(400, "bad JSON", "the body is not accepted JSON") from None


def parse(body: bytes, model: type[M]) -> M:
    """The body as `model`; Refusal 400 if it is not JSON, 422 if not the format."""
    data = load_json(body)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:10])
        raise Refusal(422, "not the format",
                      f"the body is not a valid {model.__name__}: {problems}") from None


class WebhookIntake:
    """The HTTP intake and its three channels, as three sensors for the hub.

    The `webhook` sensor runs the server; the `alertmanager` and
    `webhook.rejected` sensors only lend it their emitters, so each channel
    is declared with its own nature. `ready` is set once the server listens,
    at `address` (the port the system chose if the settings say 0).
    """

    def __init__(self, settings: WebhookSettings, tokens: list[Token]) -> None:
        self.settings = settings
        self._tokens = tokens
        self._emitters: dict[str, Emitter] = {}
        self._clock = AlertClock()
        self.ready = asyncio.Event()
        self.address: tuple[str, int] | None = None
        from .webhook_http import HttpServer  # the HTTP parser comes with the webhook

        self.http = HttpServer(Handler(self._admit, self._take, self._closed), Limits(
            head_timeout_s=settings.head_timeout_s, body_timeout_s=settings.body_timeout_s,
            max_waiting=settings.max_waiting_connections,
            max_body_bytes=settings.max_body_bytes))
        self.server = _ServerSensor(self, SensorInfo(
            settings.channel,
            f"Events posted to the webhook at http://{settings.listen}/events by monitoring"
            " and scripts; the sender is the poster's name.",
            Nature.DISCRETE, parameters={"listen": settings.listen}, can_silence=True,
            words_of="webhook",
        ))
        self.alerts = _Outlet(self, SensorInfo(
            settings.alert_channel,
            "Prometheus Alertmanager alerts, one value per alert (by fingerprint):"
            " firing, then resolved; a notification of many alerts is one summary.",
            Nature.STATE, parameters={"listen": settings.listen}, can_silence=True,
            words_of="webhook",
        ))
        self.rejected = _Outlet(self, SensorInfo(
            settings.rejected_channel,
            "Requests the webhook refused or closed, counted by status and reason"
            " (what the refused client sent is never shown).",
            Nature.AGGREGATABLE, parameters={"listen": settings.listen}, can_silence=True,
            words_of="webhook",
        ))

    def sensors(self) -> list[Any]:
        """The intake's sensors, for the hub."""
        return [self.server, self.alerts, self.rejected]

    @property
    def open_channels(self) -> frozenset[str]:
        """The channels whose sensors are running: requests for the others get 503."""
        return frozenset(self._emitters)

    def lend(self, emit: Emitter) -> None:
        """Requests may report on `emit`'s channel (its sensor is running)."""
        self._emitters[emit.channel] = emit

    def withdraw(self, emit: Emitter) -> None:
        """`emit`'s sensor stopped: its channel refuses requests until it is back."""
        if self._emitters.get(emit.channel) is emit:
            del self._emitters[emit.channel]

    # -- requests ----------------------------------------------------------

    def _admit(self, head: Head) -> Answer | Token:
        """Refuse on the head alone, before a byte of body is read; the token if admitted."""
        try:
            route = PATHS.get(head.path)
            if route is None:
                raise Refusal(404, "unknown path",
                              "only POST /events and POST /alertmanager are served")
            if head.method != "POST":
                raise Refusal(405, "wrong method",
                              "only POST /events and POST /alertmanager are served")
            token = check_token(head.values(b"authorization"), self._tokens)
            kinds = head.values(b"content-type")
            kind = kinds[0].decode("latin-1").split(";")[0].strip().lower() if kinds else ""
            if len(kinds) != 1 or kind != "application/json":
                raise Refusal(415, "not JSON",
                              "the body must be JSON (Content-Type: application/json)")
            declared = head.value(b"content-length")  # h11 has checked it is digits
            limit = self.settings.max_body_bytes
            if declared is not None and int(declared) > limit:
                raise Refusal(413, "too big", f"the body may be at most {limit} bytes")
            self._emitter(self._channel_of(route))
        except Refusal as refusal:
            return self._refused(head, refusal)
        return token

    def _take(self, head: Head, body: bytes, token: Token) -> Answer:
        route = PATHS[head.path]
        try:
            accepted = (self._take_event if route == "events" else self._take_alerts)(body, token)
        except Refusal as refusal:
            return self._refused(head, refusal)
        return Answer(202, accepted)

    def _channel_of(self, route: str) -> str:
        return self.settings.channel if route == "events" else self.settings.alert_channel

    def _refused(self, head: Head, refusal: Refusal) -> Answer:
        log.info("webhook refused %s %.200r from %s: %s %s", head.method, head.path,
                 head.client, refusal.status, refusal.kind)
        self._count(refusal.status, refusal.kind)
        headers = {401: (("www-authenticate", "Bearer"),), 405: (("allow", "POST"),)
                   }.get(refusal.status, ())
        return Answer(refusal.status, {"error": refusal.reason}, headers)

    def _closed(self, closing: Closing) -> None:
        """The server refused or dropped a request before any handler saw it."""
        log.info("webhook closed a connection: %s %s", closing.status, closing.kind)
        self._count(closing.status, closing.kind)

    def _count(self, status: int, kind: str) -> None:
        """One refusal on the rejected channel: the status and a fixed word, nothing else."""
        emit = self._emitters.get(self.settings.rejected_channel)
        if emit is not None:
            emit(f"refused a request: {kind} ({status})", key=f"{status} {kind}",
                 payload={"status": status, "reason": kind})

    def _take_event(self, body: bytes, token: Token) -> dict[str, Any]:
        event = parse(body, GenericEvent)
        emit = self._emitter(self.settings.channel)
        payload: dict[str, Any] = {"channel": event.channel}
        answer: dict[str, Any] = {"accepted": 1}
        if event.urgency is not None:
            granted = self.settings.granted_urgency(event.urgency, token)
            payload["urgency_hint"] = granted.value
            if granted is not event.urgency:
                payload["urgency_asked"] = event.urgency.value
                answer["urgency_hint"] = granted.value
                answer["note"] = (f"urgency {event.urgency.value!r} taken as {granted.value!r}:"
                                  f" {token.sender} may ask for {granted.value!r} at most")
        emit(event.text, sender=token.sender, key=event.key or event.channel,
             authorised=token.person, payload=payload)
        return answer

    def _take_alerts(self, body: bytes, token: Token) -> dict[str, Any]:
        notification = parse(body, Notification)
        emit = self._emitter(self.settings.alert_channel)
        found, stale = reports(notification, self._clock)
        for report in found:
            emit(report.text, sender=token.sender, key=report.key, authorised=token.person,
                 payload=report.payload)
        answer: dict[str, Any] = {"accepted": len(notification.alerts) - stale}
        if stale:
            answer["stale"] = stale
            answer["note"] = "older than a state already seen for the same alert"
        if found and found[0].payload.get("condensed"):
            answer["condensed"] = True
        return answer

    def _emitter(self, channel: str) -> Emitter:
        emit = self._emitters.get(channel)
        if emit is None:  # its sensor is restarting: the poster may retry
            raise Refusal(503, "channel not running",
                          f"the {channel} channel is not running; retry shortly")
        return emit

    # -- serving -----------------------------------------------------------

    async def serve(self, emit: Emitter) -> None:
        """Listen and answer until cancelled."""
        host, port = self.settings.address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(256)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.address = sock.getsockname()[:2]
        self.lend(emit)
        try:
            await self.http.serve(sock, self.ready.set)
        finally:
            self.ready.clear()
            self.withdraw(emit)
            sock.close()


class _ServerSensor:
    """The sensor that runs the intake's server (its generic-events channel)."""

    def __init__(self, intake: WebhookIntake, info: SensorInfo) -> None:
        self._intake = intake
        self.info = info

    async def run(self, emit: Emitter) -> None:
        await self._intake.serve(emit)


class _Outlet:
    """A channel of the intake: its emitter is lent to the server while it runs."""

    def __init__(self, intake: WebhookIntake, info: SensorInfo) -> None:
        self._intake = intake
        self.info = info

    async def run(self, emit: Emitter) -> None:
        self._intake.lend(emit)
        try:
            await asyncio.Future()  # until cancelled
        finally:
            self._intake.withdraw(emit)


def intake_sensors(settings: WebhookSettings, secrets: Mapping[str, str]) -> list[Any]:
    """The webhook's sensors if it is on (none if off); a `TokenProblem` naming
    the secret to set when no usable token is configured."""
    if not settings.enabled:
        return []
    check_tokens(settings, dict(secrets))
    return WebhookIntake(settings, tokens_from(settings, dict(secrets))).sensors()
