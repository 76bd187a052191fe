"""Attacks on the webhook intake, over raw sockets to a real server on 127.0.0.1
run by the real hub. Verdicts come from what reached the hub (and, end to end,
the model), and from what the sockets saw: answers, closes, silence."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import httpx
import pexpect
import pytest

from noema.perception.archive import SensoryArchive
from noema.perception.events import Event
from noema.perception.items import StateValue
from noema.perception.packing import render_pool_event
from noema.perception.pipeline import Pipeline
from noema.perception.sensors.webhook import WebhookIntake
from noema.perception.untrusted import SessionDelimiter
from tests.fakes import FakeOpenAIServer, FakeReply
from tests.foundation.test_cli import chat_with
from tests.perception.test_webhook import (
    GENERIC, OUTSIDE, PERSON, alert, bearer, running, settings, url,
)


def head(path: str = "/events", *, token: str | None = PERSON, extra: str = "",
         length: int | None = None) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


def exchange(address, data: bytes, wait: float = 10.0) -> tuple[bytes, bool]:
    """Send `data`, read until the server closes (or `wait` passes): what it
    answered, and whether it closed the connection."""
    with socket.create_connection(address, timeout=wait) as sock:
        sock.sendall(data)
        answer = b""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                return answer, False
            except ConnectionResetError:
                return answer, True
            if not chunk:
                return answer, True
            answer += chunk
        return answer, False


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def posted(events: list[Event], channel: str = "webhook") -> list[Event]:
    return [e for e in events if e.channel == channel]


# -- who may post --------------------------------------------------------------------

@pytest.mark.parametrize("order", [(PERSON, "not-the-token-000000"),
                                   ("not-the-token-000000", PERSON), (PERSON, PERSON)])
async def test_two_authorization_headers_are_refused_whichever_comes_first(order):
    events: list[Event] = []
    body = json.dumps(GENERIC).encode()
    async with running(events.append) as intake:
        extra = "".join(f"Authorization: Bearer {t}\r\n" for t in order)
        answer, closed = await asyncio.to_thread(
            exchange, intake.address, head(token=None, extra=extra, length=len(body)) + body)
    assert status_of(answer) == 400 and b"one Authorization header" in answer and closed
    assert posted(events) == []


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "BeArEr"])
async def test_the_bearer_scheme_is_matched_in_any_case(scheme):
    events: list[Event] = []
    async with running(events.append) as intake, httpx.AsyncClient() as client:
        answer = await client.post(url(intake, "/events"), json=GENERIC,
                                   headers={"Authorization": f"{scheme}   {PERSON}"})
    assert answer.status_code == 202
    assert [e.text for e in posted(events)] == [GENERIC["text"]]


async def test_nothing_a_refused_client_wrote_reaches_the_hub():
    """Refusals are counted by status and reason: the path, headers, body,
    token and address of a refused request stay out of every event."""
    events: list[Event] = []
    canary = "CANARY-7f3e"
    body = json.dumps({"channel": "x", "text": canary}).encode()
    attempts = [
        head(f"/{canary}/ignore-previous-instructions", length=len(body)) + body,
        head(token=f"{canary}-guess", extra=f"X-Note: {canary}\r\n", length=len(body)) + body,
        head(token=None, extra=f"X-Note: {canary}\r\n", length=len(body)) + body,
        head(length=len(canary) + 2) + f"{{{canary}".encode() + b"}",
        f"GET /events?{canary}=1 HTTP/1.1\r\nHost: {canary}\r\n\r\n".encode(),
        f"POST /events HTTP/1.1\r\nHost: x\r\n{canary}\x01: y\r\n\r\n".encode(),
    ]
    async with running(events.append) as intake:
        for attempt in attempts:
            answer, _ = await asyncio.to_thread(exchange, intake.address, attempt)
            assert 400 <= status_of(answer) < 500
    rejected = posted(events, "webhook.rejected")
    assert len(rejected) == len(attempts) and posted(events) == []
    for event in rejected:
        shown = f"{event.text} {event.key} {event.sender} {json.dumps(event.payload.thaw())}"
        assert canary not in shown and "127.0.0.1" not in shown and "/" not in shown


@pytest.mark.slow
def test_refused_requests_reach_the_model_only_as_counts(tmp_path):
    """End to end: `noema chat` with the intake on; refused requests carrying a
    canary in the path, a header and the body; the model is told of them (the
    count and reason) and never sees the canary."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    canary = "CANARY-91ad"
    with FakeOpenAIServer() as server:
        server.default = FakeReply(text="Noted.")
        config = (
            "[models.reasoning]\nprovider = 'openai-compatible'\nmodel = 'fake-model'\n"
            f"base_url = '{server.base_url}'\n\n"
            f"[webhook]\nenabled = true\nlisten = '127.0.0.1:{port}'\n\n"
            "[reflexes]\nidle_quiet_window_s = 0\nidle_max_wait_s = 0\n\n"
            "[[reflexes.rules]]\nchannel = 'webhook*'\nurgency = 'urgent'\n"
        )
        with chat_with(tmp_path, config, **{"secrets.toml": f"NOEMA_WEBHOOK_TOKEN = '{PERSON}'\n"}
                       ) as chat:
            chat.expect("you> ")
            body = json.dumps({"channel": "x", "text": canary}).encode()
            deadline = time.monotonic() + 30  # the intake starts with the agent
            while True:
                try:
                    exchange(("127.0.0.1", port), head(f"/{canary}", length=len(body)) + body)
                    break
                except ConnectionRefusedError:
                    assert time.monotonic() < deadline, "the intake never listened"
                    time.sleep(0.1)
            exchange(("127.0.0.1", port),
                     head(token=canary + "-guess", extra=f"X-Say: {canary}\r\n",
                          length=len(body)) + body)
            assert server.wait_requests_sync(1, 30)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                sent = said_to_model(server)
                if "wrong token" in sent and "unknown path" in sent:
                    break
                time.sleep(0.2)
            chat.sendline("/quit")
            chat.expect(pexpect.EOF)
        sent = said_to_model(server)
    assert "wrong token" in sent and "unknown path" in sent
    assert canary not in sent


def said_to_model(server: FakeOpenAIServer) -> str:
    """Every request the model received, with outside text's space marks undone."""
    return json.dumps([r.body for r in server.requests], ensure_ascii=False).replace("ˆ", " ")


# -- slow clients ----------------------------------------------------------------------

class SlowFlood:
    """`count` connections that send a request's head one byte at a time, each
    from its own socket, in a thread of its own (as a separate attacker would)."""

    def __init__(self, address, count: int, every_s: float = 0.5) -> None:
        self.address, self.count, self.every_s = address, count, every_s
        self.opened = 0
        self.closed_by_server = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SlowFlood:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        trickle = head(token=None, length=10)
        sockets: dict[socket.socket, int] = {}
        for _ in range(self.count):
            sock = socket.create_connection(self.address, timeout=5)
            sock.setblocking(False)
            sockets[sock] = 0
            self.opened += 1
        while sockets and not self._stop.is_set():
            for sock in list(sockets):
                try:
                    if sock.recv(4096) == b"":  # the server closed it
                        raise ConnectionResetError
                except BlockingIOError:
                    pass
                except OSError:
                    self.closed_by_server += 1
                    del sockets[sock]
                    sock.close()
                    continue
                sent = sockets[sock]
                try:
                    sock.send(trickle[sent % len(trickle):sent % len(trickle) + 1])
                    sockets[sock] = sent + 1
                except OSError:
                    pass  # reset: seen as closed on the next round
            self._stop.wait(self.every_s)
        for sock in sockets:
            sock.close()


async def test_a_slow_client_flood_does_not_stop_the_token_holder():
    """200 slowloris connections, the token holder posting meanwhile: every one
    of its requests is served, and the slow sockets are closed by the server."""
    events: list[Event] = []
    async with running(events.append, head_timeout_s=3, max_waiting_connections=16) as intake:
        with SlowFlood(intake.address, 200) as flood:
            while flood.opened < 200:
                await asyncio.sleep(0.05)
            assert intake.http.waiting <= 16  # the flood holds a bounded number of places
            answers = []
            async with httpx.AsyncClient(timeout=20) as client:
                for n in range(10):
                    response = await client.post(
                        url(intake, "/events"), headers=bearer(PERSON),
                        json={**GENERIC, "text": f"still here {n}"})
                    answers.append(response.status_code)
                    await asyncio.sleep(0.1)
            async with asyncio.timeout(30):  # generous: the head timeout is 3 s
                while flood.closed_by_server < 200:
                    await asyncio.sleep(0.2)
    assert answers == [202] * 10
    assert [e.text for e in posted(events)] == [f"still here {n}" for n in range(10)]
    assert flood.closed_by_server == 200
    reasons = {e.key for e in posted(events, "webhook.rejected")}
    assert reasons <= {"503 pushed out", "408 too slow"} and "503 pushed out" in reasons


async def test_a_slow_body_under_the_size_limit_is_timed_out():
    async with running(lambda e: None, body_timeout_s=1) as intake:
        began = time.monotonic()
        answer, closed = await asyncio.to_thread(
            exchange, intake.address, head(length=1000) + b'{"channel": ', 20)
    assert status_of(answer) == 408 and closed
    assert time.monotonic() - began < 15  # generous: a stalled body is not waited on forever


async def test_a_head_that_never_ends_is_timed_out():
    async with running(lambda e: None, head_timeout_s=1) as intake:
        answer, closed = await asyncio.to_thread(
            exchange, intake.address, b"POST /events HTTP/1.1\r\nHost: x\r\n", 20)
    assert status_of(answer) == 408 and closed


# -- framing and shape ---------------------------------------------------------------

async def test_content_length_with_chunked_is_refused_and_the_connection_closed():
    """A smuggled second request rides behind the first: it must never be read."""
    events: list[Event] = []
    smuggled_body = json.dumps({**GENERIC, "text": "SMUGGLED"}).encode()
    smuggled = head(length=len(smuggled_body)) + smuggled_body
    first = b'{"channel": "a", "text": "b"}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(first), first)
    attack = head(length=len(chunked) + len(smuggled), extra="Transfer-Encoding: chunked\r\n")
    async with running(events.append) as intake:
        answer, closed = await asyncio.to_thread(exchange, intake.address,
                                                 attack + chunked + smuggled)
    assert status_of(answer) == 400 and b"together are refused" in answer and closed
    assert answer.count(b"HTTP/1.1 ") == 1
    assert posted(events) == []
    assert [e.key for e in posted(events, "webhook.rejected")] == ["400 ambiguous length"]


@pytest.mark.parametrize(("data", "status"), [
    (b"POST /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (b"POST /events HTTP/1.1\r\nHost: x\r\n" + b"".join(
        b"X-%d: y\r\n" % n for n in range(100)) + b"\r\n", 431),
    (b"POST /events HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * 9000 + b"\r\n\r\n", 431),
    (b"POST /events HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"z" * 7000 + b"\r\n"
     + b"X-Pad2: " + b"z" * 7000 + b"\r\nX-Pad3: " + b"z" * 7000 + b"\r\n\r\n", 431),
])
async def test_request_line_and_headers_are_bounded(data, status):
    events: list[Event] = []
    async with running(events.append) as intake:
        answer, closed = await asyncio.to_thread(exchange, intake.address, data)
        assert status_of(answer) == status and closed
        # The server is unharmed: the next request is served.
        async with httpx.AsyncClient() as client:
            ok = await client.post(url(intake, "/events"), json=GENERIC, headers=bearer(PERSON))
    assert ok.status_code == 202 and len(posted(events)) == 1


@pytest.mark.parametrize(("body", "says"), [
    (b"[" * 100_000 + b"]" * 100_000, b"nested deeper"),
    (b'{"channel": "a", "text": "b", "key": ' + b"9" * 5000 + b"}", b"at most 40 digits"),
    (b'{"channel": "a", "text": "b", "key": 1.' + b"5" * 5000 + b"}", b"at most 40 digits"),
    (b'{"channel": "a", "text": "benign", "text": "evil"}', b"appears twice"),
    (b'{"channel": "a", "text": "b", "key": NaN}', b"not a JSON number"),
])
async def test_hostile_json_is_a_clean_400(body, says, caplog):
    events: list[Event] = []
    async with running(events.append, max_body_bytes=256 * 1024) as intake:
        answer, closed = await asyncio.to_thread(
            exchange, intake.address, head(length=len(body)) + body)
    assert status_of(answer) == 400 and says in answer and closed
    assert b"Traceback" not in answer and posted(events) == []
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


async def test_one_connection_carries_requests_one_after_another():
    """Keep-alive still works for well-framed requests (the framing is exact)."""
    events: list[Event] = []
    body = json.dumps(GENERIC).encode()
    async with running(events.append) as intake:
        answer, _ = await asyncio.to_thread(
            exchange, intake.address, (head(length=len(body)) + body) * 3, 3)
    assert answer.count(b"HTTP/1.1 202") == 3 and len(posted(events)) == 3


# -- Alertmanager ----------------------------------------------------------------------

async def test_a_late_firing_does_not_bring_a_resolved_alert_back():
    archive = SensoryArchive(":memory:")
    probe = WebhookIntake(settings(), [])
    pipeline = Pipeline(archive, [s.info for s in probe.sensors()])
    loop = asyncio.get_running_loop()
    firing, resolved = alert("firing"), alert("resolved")
    async with running(lambda e: pipeline.ingest(e, loop.time())) as intake, \
            httpx.AsyncClient() as client:
        for body in (firing, resolved, firing):  # the retried firing arrives last
            response = await client.post(url(intake, "/alertmanager"), json=body,
                                         headers=bearer(OUTSIDE))
            assert response.status_code == 202
        assert response.json()["stale"] == 1
        refired = alert("firing")
        refired["alerts"][0]["startsAt"] = "2026-11-30T11:00:00Z"  # after it resolved
        again = await client.post(url(intake, "/alertmanager"), json=refired,
                                  headers=bearer(OUTSIDE))
        late_resolved = await client.post(url(intake, "/alertmanager"), json=resolved,
                                          headers=bearer(OUTSIDE))
    assert again.json() == {"accepted": 1} and late_resolved.json()["stale"] == 1
    (value,) = pipeline.drain(loop.time(), force=True)
    assert isinstance(value, StateValue)
    assert value.value.text.startswith("FIRING") and "since 2026-11-30T11:00:00Z" in value.value.text


async def test_a_notification_of_300_alerts_reaches_the_model_condensed():
    archive = SensoryArchive(":memory:")
    probe = WebhookIntake(settings(), [])
    pipeline = Pipeline(archive, [s.info for s in probe.sensors()])
    loop = asyncio.get_running_loop()
    storm = alert("firing")
    template = storm["alerts"][0]
    storm["alerts"] = [
        {**template, "fingerprint": f"fp{n:04d}",
         "labels": {"alertname": "NodeDown" if n % 3 else "DiskFull", "instance": f"node{n}",
                    "team": "x" * 200},
         "annotations": {"summary": f"node{n} is down " + "padding " * 60}}
        for n in range(300)]
    async with running(lambda e: pipeline.ingest(e, loop.time()), max_body_bytes=1024 * 1024
                       ) as intake, httpx.AsyncClient() as client:
        response = await client.post(url(intake, "/alertmanager"), json=storm,
                                     headers=bearer(OUTSIDE))
    assert response.status_code == 202
    assert response.json() == {"accepted": 300, "condensed": True}
    items = pipeline.drain(loop.time(), force=True)
    delimiter = SessionDelimiter.new()
    delivered = render_pool_event(items, delimiter, now=0.0)
    assert len(delivered) < 6000
    delivered = delivered.replace(delimiter.marker, " ")
    assert "300 alerts" in delivered and "300 firing" in delivered
    assert "NodeDown ×200" in delivered and "DiskFull ×100" in delivered
    assert "node0 is down" in delivered and "the other 295 in this event's archived data" \
        in delivered and "node299" not in delivered
    (value,) = items
    assert len(value.value.payload["alerts"]) == 300  # the whole list kept in the archive


# -- the daemon with no usable token ----------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize(("secrets", "says"), [
    ("NOEMA_WEBHOOK_TOKEN = ''\n", "NOEMA_WEBHOOK_TOKEN is set but empty"),
    ("", "none of its tokens is set (NOEMA_WEBHOOK_TOKEN)"),
])
def test_the_daemon_refuses_to_start_without_a_usable_token(tmp_path, secrets, says):
    import subprocess

    from tests.foundation.test_cli import NOEMA, env_for

    agent = tmp_path / "agents" / "default"
    agent.mkdir(parents=True)
    (agent / "config.toml").write_text(
        "[models.reasoning]\nprovider = 'openai-compatible'\nmodel = 'm'\n"
        "base_url = 'http://127.0.0.1:9/v1'\n\n[webhook]\nenabled = true\nlisten = '127.0.0.1:0'\n")
    (agent / "secrets.toml").write_text(secrets)
    done = subprocess.run([*NOEMA, "run"], capture_output=True, text=True,
                          env=env_for(tmp_path), timeout=60)
    assert done.returncode != 0
    assert says in done.stderr + done.stdout and "Traceback" not in done.stderr
