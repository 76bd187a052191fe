"""The webhook intake, through a real HTTP server on 127.0.0.1 run by the real
hub: tokens, size, content type and schema refused with their status, events
reaching the hub, Alertmanager firing then resolving as one state value,
refusals archived."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pexpect
import pydantic
import pytest

from noema.orchestrator.settings import UrgencyRuleSettings
from noema.orchestrator.urgency import UrgencyRules
from noema.perception.archive import SensoryArchive
from noema.perception.events import Event, Urgency
from noema.perception.hub import Backoff, SensorHub
from noema.perception.items import StateValue
from noema.perception.pipeline import Pipeline
from noema.perception.sensors import webhook as webhook_module
from noema.perception.sensors.webhook import WebhookIntake, intake_sensors
from noema.perception.webhook_settings import TokenProblem, WebhookSettings, tokens_from
from tests.fakes import FakeOpenAIServer, FakeReply
from tests.foundation.test_cli import chat_with

PERSON = "person-token-0123456789"
OUTSIDE = "alertmanager-token-abcdef"
OTHER = "nightly-backup-token-42"
SECRETS = {"NOEMA_WEBHOOK_TOKEN": PERSON, "AM_TOKEN": OUTSIDE, "NIGHTLY": OTHER}
LIMIT = 4096


def settings(**more) -> WebhookSettings:
    more.setdefault("sources", {"alertmanager": "AM_TOKEN"})
    more.setdefault("max_body_bytes", LIMIT)
    return WebhookSettings(enabled=True, listen="127.0.0.1:0", **more)


@contextlib.asynccontextmanager
async def running(sink: Callable[[Event], None], **more) -> AsyncIterator[WebhookIntake]:
    """The intake's sensors under a real hub, listening on a port the system chose."""
    config = settings(**more)
    intake = WebhookIntake(config, tokens_from(config, SECRETS))
    hub = SensorHub(sink)
    for sensor in intake.sensors():
        hub.add(sensor)
    async with hub:
        async with asyncio.timeout(10):
            await intake.ready.wait()
            while len(intake.open_channels) < 3:  # the other two channels are running too
                await asyncio.sleep(0.01)
        yield intake


def url(intake: WebhookIntake, path: str) -> str:
    host, port = intake.address
    return f"http://{host}:{port}{path}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def alert(status: str, fingerprint: str = "a1b2c3", **labels: str) -> dict:
    return {
        "version": "4", "groupKey": "{}:{alertname=\"DiskFull\"}", "truncatedAlerts": 0,
        "status": status, "receiver": "noema",
        "groupLabels": {"alertname": "DiskFull"},
        "commonLabels": {"alertname": "DiskFull", "severity": "critical"},
        "commonAnnotations": {"runbook": "https://runbooks.example/disk"},
        "externalURL": "http://alertmanager.local:9093",
        "alerts": [{
            "status": status,
            "labels": {"alertname": "DiskFull", "instance": "db1", **labels},
            "annotations": {"summary": "disk / is 97% full"},
            "startsAt": "2026-11-30T10:00:00Z",
            "endsAt": "2026-11-30T10:20:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus.local/graph", "fingerprint": fingerprint,
        }],
    }


GENERIC = {"channel": "backups", "text": "nightly backup failed: disk full", "key": "backup",
           "urgency": "urgent"}


# -- tokens ----------------------------------------------------------------------------

async def test_a_request_without_the_right_token_is_refused():
    events: list[Event] = []
    async with running(events.append) as intake, httpx.AsyncClient() as client:
        missing = await client.post(url(intake, "/events"), json=GENERIC)
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert "bearer token is required" in missing.json()["error"]
        basic = await client.post(url(intake, "/events"), json=GENERIC,
                                  headers={"Authorization": "Basic dXNlcjpwYXNz"})
        assert basic.status_code == 401
        wrong = await client.post(url(intake, "/events"), json=GENERIC,
                                  headers=bearer(PERSON + "x"))
        assert wrong.status_code == 403 and "not one this agent accepts" in wrong.json()["error"]
        right = await client.post(url(intake, "/events"), json=GENERIC, headers=bearer(OUTSIDE))
        assert right.status_code == 202 and right.json()["accepted"] == 1
    assert [e.channel for e in events].count("webhook") == 1


async def test_every_token_is_compared_in_constant_time(monkeypatch):
    compared: list[tuple[bytes, bytes]] = []
    real = webhook_module.hmac.compare_digest

    def recording(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(webhook_module.hmac, "compare_digest", recording)
    async with running(lambda e: None) as intake, httpx.AsyncClient() as client:
        assert (await client.post(url(intake, "/events"), json=GENERIC,
                                  headers=bearer(PERSON))).status_code == 202
    # Both tokens compared, though the first one matched: no early exit to time.
    assert sorted(b for _, b in compared) == sorted([PERSON.encode(), OUTSIDE.encode()])


async def test_the_persons_token_makes_events_authorised_an_outside_one_does_not():
    events: list[Event] = []
    async with running(events.append) as intake, httpx.AsyncClient() as client:
        for token in (PERSON, OUTSIDE):
            response = await client.post(url(intake, "/events"), json=GENERIC,
                                         headers=bearer(token))
            assert response.status_code == 202
    person, outside = [e for e in events if e.channel == "webhook"]
    assert person.authorised and person.sender == "person"
    assert not outside.authorised and outside.sender == "alertmanager"
    assert outside.text == "nightly backup failed: disk full" and outside.key == "backup"
    assert outside.payload.thaw() == {"channel": "backups", "urgency_hint": "priority",
                                      "urgency_asked": "urgent"}
    assert person.payload.thaw() == {"channel": "backups", "urgency_hint": "urgent"}


# -- urgency hints ---------------------------------------------------------------------

async def post_events(bodies: list[tuple[dict, str]], **more) -> tuple[list[Event], list[dict]]:
    """Post each (body, token) to /events; the events the hub received and the answers."""
    events: list[Event] = []
    answers = []
    async with running(events.append, **more) as intake, httpx.AsyncClient() as client:
        for body, token in bodies:
            response = await client.post(url(intake, "/events"), json=body, headers=bearer(token))
            assert response.status_code == 202
            answers.append(response.json())
    return [e for e in events if e.channel == "webhook"], answers


async def test_an_outside_hint_is_held_to_the_cap_and_the_poster_is_told():
    asks = [{**GENERIC, "urgency": level} for level in ("normal", "priority", "urgent")]
    events, answers = await post_events([(body, OUTSIDE) for body in asks])
    assert [e.payload["urgency_hint"] for e in events] == ["normal", "priority", "priority"]
    assert [e.payload.get("urgency_asked") for e in events] == [None, None, "urgent"]
    assert answers[:2] == [{"accepted": 1}, {"accepted": 1}]
    assert answers[2]["urgency_hint"] == "priority"
    assert "'urgent' taken as 'priority'" in answers[2]["note"]
    assert "alertmanager may ask" in answers[2]["note"]


async def test_the_person_sets_how_far_outside_hints_may_go():
    urgent = {**GENERIC, "urgency": "urgent"}
    allowed, _ = await post_events([(urgent, OUTSIDE)], outside_urgency_max="urgent")
    assert allowed[0].payload.thaw() == {"channel": "backups", "urgency_hint": "urgent"}
    held, _ = await post_events([(urgent, OUTSIDE), (urgent, PERSON)],
                                outside_urgency_max="normal")
    assert [e.payload["urgency_hint"] for e in held] == ["normal", "urgent"]  # the person's: as is
    without = {k: v for k, v in GENERIC.items() if k != "urgency"}
    quiet, _ = await post_events([(without, OUTSIDE)])
    assert "urgency_hint" not in quiet[0].payload
    with pytest.raises(pydantic.ValidationError):
        settings(outside_urgency_max="panic")


async def test_the_rules_take_the_hint_as_the_default_and_may_override_it():
    """The events the real intake makes, classified as the agent classifies them."""
    rules = UrgencyRules.from_settings([UrgencyRuleSettings(
        channel="webhook", sender="nightly", urgency="normal")])
    urgent = {**GENERIC, "urgency": "urgent"}
    events, _ = await post_events([(urgent, OUTSIDE), (urgent, PERSON), (GENERIC, OTHER)],
                                  sources={"alertmanager": "AM_TOKEN", "nightly": "NIGHTLY"})
    verdicts = [rules.classify(e, Urgency.NORMAL) for e in events]
    assert [v.urgency for v in verdicts] == [Urgency.PRIORITY, Urgency.URGENT, Urgency.NORMAL]
    assert verdicts[0].hinted and verdicts[1].hinted
    assert verdicts[2].from_rule and not verdicts[2].hinted  # the person's rule ignores it


# -- size, content type, schema ----------------------------------------------------------

def raw_exchange(address: tuple[str, int], head: bytes, body_parts: list[bytes]) -> bytes:
    """Send a request's head and some body over a plain socket, never finishing the
    body, and read what the server answers (it must answer without the rest)."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(head)
        for part in body_parts:
            sock.sendall(part)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        return answer


async def test_a_declared_length_over_the_limit_is_refused_before_the_body():
    async with running(lambda e: None) as intake:
        head = (f"POST /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {OUTSIDE}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {LIMIT * 1000}\r\n\r\n"
                ).encode()
        answer = await asyncio.to_thread(raw_exchange, intake.address, head, [])
    assert answer.startswith(b"HTTP/1.1 413")


async def test_a_streamed_body_is_cut_off_at_the_limit():
    """Chunked, so the size is unknown until read: the server stops reading past
    the limit and answers, while the client still holds most of its body."""
    async with running(lambda e: None) as intake:
        head = (f"POST /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {OUTSIDE}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
        chunk = b"x" * 1024
        parts = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * (LIMIT // 1024 + 2)
        answer = await asyncio.to_thread(raw_exchange, intake.address, head, parts)
    assert answer.startswith(b"HTTP/1.1 413")


async def test_a_body_within_the_limit_streamed_in_chunks_is_taken():
    async with running(lambda e: None) as intake, httpx.AsyncClient() as client:
        body = json.dumps(GENERIC).encode()

        async def pieces():
            for i in range(0, len(body), 7):
                yield body[i:i + 7]

        response = await client.post(url(intake, "/events"), content=pieces(), headers={
            **bearer(OUTSIDE), "Content-Type": "application/json"})
        assert response.status_code == 202


@pytest.mark.parametrize(("path", "content", "kind", "status", "says"), [
    ("/events", b"text, not JSON", "text/plain", 415, "must be JSON"),
    ("/events", b"{not json", "application/json", 400, "not valid JSON"),
    ("/events", json.dumps({"text": "no channel"}), "application/json", 422, "channel"),
    ("/events", json.dumps({**GENERIC, "extra": 1}), "application/json", 422, "extra"),
    ("/events", json.dumps({**GENERIC, "channel": "Bad Channel"}), "application/json", 422,
     "channel"),
    ("/events", json.dumps({**GENERIC, "urgency": "panic"}), "application/json", 422,
     "urgency"),
    ("/alertmanager", json.dumps({**alert("firing"), "version": "3"}), "application/json",
     422, "version"),
    ("/alertmanager", json.dumps({**alert("firing"), "alerts": []}), "application/json", 422,
     "alerts"),
    ("/alertmanager", json.dumps(GENERIC), "application/json", 422, "Notification"),
])
async def test_malformed_bodies_are_refused_with_their_reason(path, content, kind, status, says):
    events: list[Event] = []
    async with running(events.append) as intake, httpx.AsyncClient() as client:
        response = await client.post(url(intake, path), content=content, headers={
            **bearer(OUTSIDE), "Content-Type": kind})
    assert response.status_code == status
    assert says in response.json()["error"]
    assert [e.channel for e in events] == ["webhook.rejected"]


# -- Alertmanager -------------------------------------------------------------------------

async def test_an_alert_firing_then_resolved_is_one_state_value():
    archive = SensoryArchive(":memory:")
    intake_settings = settings()
    probe = WebhookIntake(intake_settings, [])
    pipeline = Pipeline(archive, [s.info for s in probe.sensors()])
    loop = asyncio.get_running_loop()

    def ingest(event: Event) -> None:
        pipeline.ingest(event, loop.time())

    async with running(ingest) as intake, httpx.AsyncClient() as client:
        for status in ("firing", "resolved"):
            response = await client.post(url(intake, "/alertmanager"), json=alert(status),
                                         headers=bearer(OUTSIDE))
            assert response.status_code == 202 and response.json() == {"accepted": 1}
    items = pipeline.drain(loop.time(), force=True)
    assert len(items) == 1
    (value,) = items
    assert isinstance(value, StateValue) and value.key == "a1b2c3"
    assert value.value.text.startswith("RESOLVED: DiskFull — disk / is 97% full")
    assert "group: alertname=DiskFull" in value.value.text
    assert "group annotations: runbook=https://runbooks.example/disk" in value.value.text
    assert value.value.payload["status"] == "resolved" and not value.value.authorised
    assert len(value.superseded) == 1  # the firing value: archived, not delivered again


async def test_each_alert_of_a_group_is_its_own_value():
    events: list[Event] = []
    payload = alert("firing")
    second = {**payload["alerts"][0], "fingerprint": "ffff01",
              "labels": {"alertname": "DiskFull", "instance": "db2"}}
    payload["alerts"].append(second)
    async with running(events.append) as intake, httpx.AsyncClient() as client:
        response = await client.post(url(intake, "/alertmanager"), json=payload,
                                     headers=bearer(OUTSIDE))
        assert response.json() == {"accepted": 2}
    assert [(e.channel, e.key) for e in events] == [
        ("alertmanager", "a1b2c3"), ("alertmanager", "ffff01")]
    assert "labels: instance=db2" in events[1].text


# -- refusals in the archive --------------------------------------------------------------

async def test_refused_requests_are_archived_without_token_or_body():
    archive = SensoryArchive(":memory:")
    probe = WebhookIntake(settings(), [])
    pipeline = Pipeline(archive, [s.info for s in probe.sensors()])
    loop = asyncio.get_running_loop()
    async with running(lambda e: pipeline.ingest(e, loop.time())) as intake, \
            httpx.AsyncClient() as client:
        await client.post(url(intake, "/events"), json=GENERIC, headers=bearer("guess-1234"))
        await client.post(url(intake, "/alertmanager"), content=b"{secret body",
                          headers={**bearer(OUTSIDE), "Content-Type": "application/json"})
    archived = [e for e in archive.undelivered() if e.channel == "webhook.rejected"]
    assert [(e.key, e.payload["status"]) for e in archived] == [
        ("403 wrong token", 403), ("400 bad JSON", 400)]
    assert archived[0].sender == "webhook.rejected" and not archived[0].authorised
    # Counts by reason only: neither the token, the body, the path nor the client.
    for event in archived:
        shown = event.text + json.dumps(event.payload.thaw())
        assert not any(leak in shown for leak in ("guess-1234", "secret body", "/events",
                                                  "/alertmanager", "127.0.0.1"))


# -- where it listens -----------------------------------------------------------------------

def test_it_listens_on_loopback_unless_told_otherwise():
    assert WebhookSettings().listen == "127.0.0.1:8787" and not WebhookSettings().enabled
    for far in ("0.0.0.0:8787", "192.168.1.5:8787", "[::]:8787", "example.org:80"):
        with pytest.raises(pydantic.ValidationError, match="allow_remote"):
            WebhookSettings(listen=far)
    assert WebhookSettings(listen="0.0.0.0:8787", allow_remote=True).address == ("0.0.0.0", 8787)
    assert WebhookSettings(listen="[::1]:9000").address == ("::1", 9000)
    with pytest.raises(pydantic.ValidationError, match="host:port"):
        WebhookSettings(listen="8787")


async def test_the_server_binds_the_configured_loopback_address():
    async with running(lambda e: None) as intake:
        assert intake.address[0] == "127.0.0.1" and intake.address[1] > 0


def test_unset_tokens_admit_nobody():
    config = settings()
    assert tokens_from(config, {}) == []
    assert [t.sender for t in tokens_from(config, {"AM_TOKEN": OUTSIDE})] == ["alertmanager"]


async def test_the_hub_restarts_the_server_when_its_port_frees():
    """Its port taken, the server crashes; the hub reports it and restarts it
    until it listens."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    config = WebhookSettings(enabled=True, listen=f"127.0.0.1:{port}")
    intake = WebhookIntake(config, tokens_from(config, SECRETS))
    crashes = []

    def crashed(crash) -> None:
        crashes.append(crash)
        taken.close()  # the port is free for the next attempt

    hub = SensorHub(lambda e: None, on_crash=crashed,
                    backoff=Backoff(initial=0.05, maximum=0.05, stable_after=1))
    for sensor in intake.sensors():
        hub.add(sensor)
    async with hub:
        async with asyncio.timeout(10):
            await intake.ready.wait()
        assert intake.address == ("127.0.0.1", port)
        assert [c.channel for c in crashes] == ["webhook"]
        assert "in use" in crashes[0].error


async def test_a_channel_whose_sensor_is_not_running_answers_503():
    config = settings()
    intake = WebhookIntake(config, tokens_from(config, SECRETS))
    hub = SensorHub(lambda e: None)
    hub.add(intake.server)  # the alertmanager channel's sensor is not running
    async with hub, httpx.AsyncClient() as client:
        async with asyncio.timeout(10):
            await intake.ready.wait()
        response = await client.post(url(intake, "/alertmanager"), json=alert("firing"),
                                     headers=bearer(OUTSIDE))
    assert response.status_code == 503 and "retry" in response.json()["error"]


def test_the_intake_is_built_only_when_enabled_and_refuses_to_start_without_a_token():
    assert intake_sensors(WebhookSettings(), {}) == []
    built = intake_sensors(settings(), SECRETS)
    assert [s.info.channel for s in built] == ["webhook", "alertmanager", "webhook.rejected"]
    with pytest.raises(TokenProblem, match="NOEMA_WEBHOOK_TOKEN, AM_TOKEN"):
        intake_sensors(settings(), {})
    for value, says in (("", "set but empty"), ("   ", "set but empty"),
                        (" " + PERSON, "spaces around it"), ("short", "at least 16")):
        with pytest.raises(TokenProblem, match=f"NOEMA_WEBHOOK_TOKEN .*{says}"):
            intake_sensors(settings(), {**SECRETS, "NOEMA_WEBHOOK_TOKEN": value})
    # The outside source's token alone is enough: the person may not post at all.
    assert intake_sensors(settings(), {"AM_TOKEN": OUTSIDE})


async def test_other_paths_and_methods_are_refused_and_reported():
    events: list[Event] = []
    async with running(events.append) as intake, httpx.AsyncClient() as client:
        elsewhere = await client.post(url(intake, "/admin"), json={}, headers=bearer(PERSON))
        fetched = await client.get(url(intake, "/events"))
    assert elsewhere.status_code == 404 and fetched.status_code == 405
    assert "only POST /events and POST /alertmanager" in elsewhere.json()["error"]
    assert [(e.channel, e.key) for e in events] == [
        ("webhook.rejected", "404 unknown path"), ("webhook.rejected", "405 wrong method")]


@pytest.mark.slow
def test_an_alert_posted_to_noema_chat_reaches_the_model(tmp_path):
    """The whole product: `noema chat` with `[webhook]` on, its tokens in
    secrets.toml; Alertmanager posts a firing alert; the model's next request
    carries it as outside data and its answer is shown."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with FakeOpenAIServer() as server:
        server.script(FakeReply(text="Disk alert on db1 noted."))
        config = (
            "[models.reasoning]\nprovider = 'openai-compatible'\nmodel = 'fake-model'\n"
            f"base_url = '{server.base_url}'\n\n"
            f"[webhook]\nenabled = true\nlisten = '127.0.0.1:{port}'\n"
            "sources = { alertmanager = 'AM_TOKEN' }\n\n"
            "[reflexes]\nidle_quiet_window_s = 0\nidle_max_wait_s = 0\n\n"
            "[[reflexes.rules]]\nchannel = 'alertmanager'\nurgency = 'urgent'\n"
        )
        secrets = f"AM_TOKEN = '{OUTSIDE}'\n"
        with chat_with(tmp_path, config, **{"secrets.toml": secrets}) as chat:
            chat.expect("you> ")
            deadline = time.monotonic() + 30  # the intake starts with the agent
            while True:
                try:
                    response = httpx.post(f"http://127.0.0.1:{port}/alertmanager",
                                          json=alert("firing"), headers=bearer(OUTSIDE))
                    break
                except httpx.ConnectError:
                    assert time.monotonic() < deadline, "the intake never listened"
                    time.sleep(0.1)
            assert response.status_code == 202
            chat.expect("Disk alert on db1 noted")
            chat.sendline("/quit")
            chat.expect(pexpect.EOF)
        sent = json.dumps([r.body for r in server.requests])
    assert "DiskFull" in sent and "authorised=no" in sent


def read_answer(address: tuple[str, int], request: bytes) -> bytes:
    """Send `request` whole and read until the server closes the connection."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        return answer


async def test_a_head_request_gets_an_answer_without_a_body():
    events: list[Event] = []
    async with running(events.append) as intake:
        for token in ("", f"authorization: Bearer {PERSON}\r\n"):
            request = f"HEAD /events HTTP/1.1\r\nhost: x\r\n{token}\r\n".encode()
            answer = await asyncio.to_thread(read_answer, intake.address, request)
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 405 Method Not Allowed\r\n")
            assert b"\r\nallow: POST" in head and body == b""
    assert [e.key for e in events] == ["405 wrong method"] * 2


async def served_answer(server) -> bytes:
    """What a client that POSTs `{}` to /events gets from `server`."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        ready = asyncio.Event()
        serving = asyncio.create_task(server.serve(sock, ready.set))
        try:
            await ready.wait()
            return await asyncio.to_thread(
                read_answer, sock.getsockname(),
                b"POST /events HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving


async def test_an_answer_http_refuses_to_frame_still_reaches_the_client():
    """A handler's answer HTTP/1.1 cannot carry (a body on a 304) is a bug of ours:
    the client still gets a status line, and the connection is closed."""
    from noema.perception.sensors.webhook_http import HttpServer
    from noema.perception.sensors.webhook_messages import Answer, Handler

    server = HttpServer(Handler(lambda head: None, lambda head, body, token: Answer(
        304, {"error": "a body a 304 cannot have"}), lambda closing: None))
    answer = await served_answer(server)
    assert answer.startswith(b"HTTP/1.1 304 Not Modified\r\n")
    assert b"connection: close" in answer


@pytest.mark.parametrize("where", ["admit", "take"])
async def test_a_failure_of_ours_still_answers_the_client(where, caplog):
    from noema.perception.sensors.webhook_http import HttpServer
    from noema.perception.sensors.webhook_messages import Answer, Handler

    def broken(*_args):
        raise RuntimeError("a bug of ours")

    reported = []
    server = HttpServer(Handler(
        broken if where == "admit" else (lambda head: None),
        broken if where == "take" else (lambda head, body, token: Answer(202, {})),
        reported.append))
    answer = await served_answer(server)
    assert answer.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert b"the agent's log says why" in answer and b"a bug of ours" not in answer
    assert [(c.status, c.kind) for c in reported] == [(500, "failed")]
    assert "a bug of ours" in caplog.text  # the traceback went to the log, not the client
