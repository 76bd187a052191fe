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

Every request needs `Authorization: Bearer <token>`, compared in constant
time with each token configured (`hmac.compare_digest`, all of them, so the
time taken does not tell which one nearly matched). The person's token makes
the events authorised; the outside sources' tokens do not, and their events
reach the model as outside data, with the source's name as sender.

A bad request is answered with its reason (401 no token, 403 wrong token,
415 not JSON, 413 too big, 400 not parseable, 422 not the format) and
reported on the `webhook.rejected` channel (aggregatable, keyed by status and
path), so it is in the sensory archive; the token and the body never are.
The body is counted while it is read and reading stops at the limit: a
declared length over the limit is refused before a byte of body is read.

Starlette and uvicorn, both already in the lock (the fake model servers use
them): a small routing layer over an ASGI server that runs inside our event
loop, so the intake is one more task of the hub, restarted like any sensor.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import socket
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..alertmanager import Notification, reports
from ..events import CHANNEL_PATTERN, MAX_KEY, Nature, SensorInfo, Urgency
from ..hub import Emitter
from ..webhook_settings import Token, WebhookSettings, tokens_from

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import JSONResponse

log = logging.getLogger(__name__)

MAX_TEXT = 64 * 1024
M = TypeVar("M", bound=BaseModel)


class GenericEvent(BaseModel):
    """The generic format: one event a request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: str = Field(pattern=CHANNEL_PATTERN.pattern)
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    key: str = Field("", max_length=MAX_KEY)
    urgency: Urgency | None = None  # a hint: the urgency rules come first


class Refusal(Exception):
    """A request refused: its status and the reason told to the poster."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def check_token(header: str | None, tokens: list[Token]) -> Token:
    """The token an `Authorization` header presents; Refusal 401 without one, 403
    if it is none of `tokens`. Every token is compared, in constant time."""
    if not header or not header.startswith("Bearer ") or not header[7:].strip():
        raise Refusal(401, "a bearer token is required (Authorization: Bearer <token>)")
    presented = header[7:].strip().encode()
    found = None
    for token in tokens:
        if hmac.compare_digest(presented, token.value) and found is None:
            found = token
    if found is None:
        raise Refusal(403, "the token is not one this agent accepts")
    return found


async def read_body(request: Request, limit: int) -> bytes:
    """The request's JSON body, read at most `limit` bytes far."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise Refusal(415, "the body must be JSON (Content-Type: application/json)")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Refusal(413, f"the body may be at most {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:  # stop here: the rest is never read
            raise Refusal(413, f"the body may be at most {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse(body: bytes, model: type[M]) -> M:
    """The body as `model`; Refusal 400 if it is not JSON, 422 if not the format."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Refusal(400, f"the body is not valid JSON ({exc})") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:10])
        raise Refusal(422, f"the body is not a valid {model.__name__}: {problems}") from None


class WebhookIntake:
    """The HTTP intake and its three channels, as three sensors for the hub.

    The `webhook` sensor runs the server; the `alertmanager` and
    `webhook.rejected` sensors only lend it their emitters, so each channel
    is declared with its own nature. `ready` is set once the server listens,
    at `address` (the port the system chose if the settings say 0).
    """

    def __init__(self, settings: WebhookSettings, tokens: list[Token]) -> None:
        # The web stack is loaded only when the webhook is on.
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.routing import Route

        self.settings = settings
        self._tokens = tokens
        self._emitters: dict[str, Emitter] = {}
        self.ready = asyncio.Event()
        self.address: tuple[str, int] | None = None
        self.app = Starlette(routes=[
            Route("/events", self._events, methods=["POST"]),
            Route("/alertmanager", self._alerts, methods=["POST"]),
        ], exception_handlers={HTTPException: self._elsewhere})
        self.server = _ServerSensor(self, SensorInfo(
            settings.channel,
            f"Events posted to the webhook at http://{settings.listen}/events by monitoring"
            " and scripts; the sender is the poster's name.",
            Nature.DISCRETE, parameters={"listen": settings.listen}, can_silence=True,
        ))
        self.alerts = _Outlet(self, SensorInfo(
            settings.alert_channel,
            "Prometheus Alertmanager alerts, one value per alert (by fingerprint):"
            " firing, then resolved.",
            Nature.STATE, parameters={"listen": settings.listen}, can_silence=True,
        ))
        self.rejected = _Outlet(self, SensorInfo(
            settings.rejected_channel,
            "Requests the webhook refused (bad token, too big, not the format), counted"
            " by status and path.",
            Nature.AGGREGATABLE, parameters={"listen": settings.listen}, can_silence=True,
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

    async def _events(self, request: Request) -> JSONResponse:
        return await self._handle(request, self._take_event)

    async def _alerts(self, request: Request) -> JSONResponse:
        return await self._handle(request, self._take_alerts)

    async def _handle(self, request: Request,
                      take: Callable[[bytes, Token], dict[str, Any]]) -> JSONResponse:
        from starlette.responses import JSONResponse  # loaded with the intake (see __init__)

        try:
            token = check_token(request.headers.get("authorization"), self._tokens)
            body = await read_body(request, self.settings.max_body_bytes)
            accepted = take(body, token)
        except Refusal as refusal:
            self._report_refusal(request, refusal)
            headers = {"WWW-Authenticate": "Bearer"} if refusal.status == 401 else None
            return JSONResponse({"error": refusal.reason}, refusal.status, headers=headers)
        return JSONResponse(accepted, 202)

    async def _elsewhere(self, request: Request, exc: Exception) -> JSONResponse:
        """A path or method the intake does not serve (404, 405): refused and reported too."""
        from starlette.exceptions import HTTPException  # loaded with the intake (see __init__)
        from starlette.responses import JSONResponse

        status = exc.status_code if isinstance(exc, HTTPException) else 400
        refusal = Refusal(status, "only POST /events and POST /alertmanager are served"
                          if status in (404, 405)
                          else str(exc))
        self._report_refusal(request, refusal)
        return JSONResponse({"error": refusal.reason}, status)

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
        found = reports(notification)
        for report in found:
            emit(report.text, sender=token.sender, key=report.key, authorised=token.person,
                 payload=report.payload)
        return {"accepted": len(found)}

    def _emitter(self, channel: str) -> Emitter:
        emit = self._emitters.get(channel)
        if emit is None:  # its sensor is restarting: the poster may retry
            raise Refusal(503, f"the {channel} channel is not running; retry shortly")
        return emit

    def _report_refusal(self, request: Request, refusal: Refusal) -> None:
        client = request.client.host if request.client else "unknown"
        emit = self._emitters.get(self.settings.rejected_channel)
        log.info("webhook refused %s from %s: %s %s", request.url.path, client,
                 refusal.status, refusal.reason)
        if emit is None:
            return
        emit(f"refused {request.method} {request.url.path} from {client}: "
             f"{refusal.status} {refusal.reason}",
             sender=client, key=f"{refusal.status} {request.url.path}",
             payload={"status": refusal.status, "reason": refusal.reason,
                      "path": request.url.path, "client": client})

    # -- serving -----------------------------------------------------------

    async def serve(self, emit: Emitter) -> None:
        """Listen and answer until cancelled."""
        host, port = self.settings.address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            raise
        sock.listen(128)
        sock.setblocking(False)
        self.address = sock.getsockname()[:2]
        import uvicorn  # loaded only when the webhook is on

        server = uvicorn.Server(uvicorn.Config(
            self.app, lifespan="off", log_level="warning", access_log=False,
            limit_concurrency=64, timeout_keep_alive=5,
        ))
        # Without uvicorn's signal handlers: Ctrl-C belongs to the agent, not to a sensor.
        server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
        self.lend(emit)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        try:
            while not server.started and not serving.done():
                await asyncio.sleep(0.01)
            self.ready.set()
            await asyncio.shield(serving)
        finally:
            self.ready.clear()
            self.withdraw(emit)
            if not serving.done():
                server.should_exit = True  # a clean stop: the socket is closed
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(serving, 5)
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


def intake_sensors(settings: WebhookSettings, secrets: Mapping[str, str],
                   notice: Callable[[str], None]) -> list[Any]:
    """The webhook's sensors if it is on (none if off). With none of its token
    secrets set, `notice` tells the person, since every request would be refused."""
    if not settings.enabled:
        return []
    tokens = tokens_from(settings, dict(secrets))
    if not tokens:
        names = ", ".join([settings.person_token_secret, *settings.sources.values()])
        notice(f"the webhook at {settings.listen} is on, but none of its tokens is set "
               f"({names}, in secrets.toml or the environment): every request is refused")
    return WebhookIntake(settings, tokens).sensors()
