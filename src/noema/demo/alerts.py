"""The alarms chapter of `noema demo`: an alert that fires and resolves, a log
burst seen as a count, and the searches that find what the count hid.

The agent runs with its webhook intake on a free loopback port and a log
sensor on a file of the chapter's own. Alertmanager's real JSON payload is
posted twice for one fingerprint, firing then resolved: the model is woken
once and reads one state value, the resolved one, with the firing value
named as replaced and kept in the archive. Then a few hundred declined
payments land in the log at once: the model reads a count, the first and
latest lines, and a gap with its batch. The person asks about one order;
the model finds its line, which was inside the gap, with
`lookup_sensory_archive` by words, and finds the alert again in its own
history with `search_full_history`, as `noema memory search` does.
Everything but the model is the real agent, built by `build_app`.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from ..app import App, build_app
from ..config import Config
from ..interfaces.commands.memory import search_memory
from ..memory.turns import Turn, TurnKind
from ..orchestrator.agent import AgentListener
from ..orchestrator.settings import ReflexSettings
from ..paths import AgentPaths
from ..perception.settings import ClockSettings, LogFileSettings, PerceptionSettings
from ..perception.untrusted import OPEN
from ..perception.webhook_settings import WebhookSettings
from ..providers.scripted import ScriptedProvider, ScriptedResponse, call, say

TOKEN_SECRET = "DEMO_ALERTMANAGER_TOKEN"
FINGERPRINT = "5f1c2a9e0b7d4431"
ALERT = "PaymentsErrorRate"
LOG_CHANNEL = "log.payments"
BURST = 240  # declined payments written to the log at once
ASKED_ORDER = 77031  # the one the person asks about, written in the middle of the burst
QUIET_S = 1.0  # an idle agent waits this long after the last event of a burst
WINDOW_S = 1.0  # the log's counting window
WAIT_S = 30.0  # far above what each step takes


@dataclass(frozen=True, slots=True)
class _Voice:
    """How the chapter speaks: a line of its own, and the person's words."""

    say: Callable[[str], None]
    person: Callable[[str], None]


def free_port() -> int:
    """A loopback port nobody listens on now (the system's choice)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def alerts_config(base: Config, log_file: Path, port: int) -> Config:
    """The demo's settings with the webhook on, the payments log followed, the
    clock sensor quiet, and a short wait before an idle agent is woken."""
    return base.model_copy(update={
        "webhook": WebhookSettings(enabled=True, listen=f"127.0.0.1:{port}",
                                   sources={"alertmanager": TOKEN_SECRET}),
        "perception": PerceptionSettings(
            clock=ClockSettings(enabled=False),
            logs=[LogFileSettings(path=log_file, channel=LOG_CHANNEL, window=WINDOW_S,
                                  from_start=True)]),
        "reflexes": ReflexSettings(idle_quiet_window_s=QUIET_S, idle_max_wait_s=4 * QUIET_S),
    })


@dataclass(frozen=True, slots=True)
class Incident:
    """When the chapter's alert fired and resolved."""

    fired: datetime
    resolved: datetime

    @classmethod
    def just_now(cls) -> Incident:
        """Fired three minutes ago, resolved at this minute."""
        end = datetime.now(UTC).replace(second=0, microsecond=0)
        return cls(end - timedelta(minutes=3), end)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def notification(status: str, incident: Incident) -> dict:
    """Alertmanager's webhook body (version 4) for the one alert of the chapter."""
    resolved = status == "resolved"
    return {
        "version": "4", "status": status, "receiver": "noema",
        "groupKey": '{}:{alertname="PaymentsErrorRate"}', "truncatedAlerts": 0,
        "groupLabels": {"alertname": ALERT},
        "commonLabels": {"alertname": ALERT, "service": "payments", "severity": "warning"},
        "commonAnnotations": {"runbook": "https://runbooks.example/payments-errors"},
        "externalURL": "http://alertmanager.example:9093",
        "alerts": [{
            "status": status,
            "labels": {"alertname": ALERT, "service": "payments", "severity": "warning",
                       "instance": "pay-2"},
            "annotations": {"summary": "more than 5% of card payments declined"},
            "startsAt": _iso(incident.fired),
            "endsAt": _iso(incident.resolved) if resolved else "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus.example:9090/graph?g0.expr=payment_errors",
            "fingerprint": FINGERPRINT,
        }],
    }


def burst_lines() -> list[str]:
    """The declined payments: one shape, so the log sensor counts them as one."""
    lines = []
    for n in range(BURST):
        order = ASKED_ORDER if n == BURST // 2 else 51000 + 7 * n
        lines.append(f"payment declined for order {order}: card ending {1000 + (n * 37) % 9000}, "
                     f"gateway answered 402 after {80 + n % 50} ms\n")
    return lines


def script(incident: Incident) -> list[ScriptedResponse]:
    """The model's side, in order."""
    return [
        say("Alertmanager paged about the payments error rate, and the same alert has "
            "already resolved: one alert, now calm. I will keep an eye on payments."),
        say("A burst of declined payments, all one shape, in about a second. I saw the first "
            "and the latest; the rest are in the archive."),
        say("Let me search every archived log line for that order.",
            call("lookup_sensory_archive", query=str(ASKED_ORDER), channel="log.*")),
        say(f"Yes: order {ASKED_ORDER} was declined, in the middle of that burst (the gateway "
            "answered 402). It reached me only as part of the count."),
        say("Let me find it in our history.",
            call("search_full_history", query=ALERT, roles=["event"])),
        say("It came in as one alert that had already resolved when I read it; the archive "
            "keeps the firing notice it replaced.",
            call("lookup_sensory_archive", query=ALERT, channel="alertmanager")),
        say(f"Fired at {incident.fired:%H:%M} UTC, resolved at {incident.resolved:%H:%M}: "
            "instance pay-2, more than 5% of card "
            "payments declined."),
    ]


async def alerts_chapter(home: Path, base: Config, listener: AgentListener,
                         say_line: Callable[[str], None], person: Callable[[str], None],
                         pace: float) -> None:
    """Play the chapter with an agent of its own under `home`."""
    voice = _Voice(say_line, person)
    paths = AgentPaths.for_agent("alerts", home).ensure()
    token = secrets.token_urlsafe(24)
    paths.secrets_file.write_text(f'{TOKEN_SECRET} = "{token}"\n', encoding="utf-8")
    paths.secrets_file.chmod(0o600)
    log_file = home / "payments.log"
    log_file.touch()
    port = free_port()
    incident = Incident.just_now()
    provider = ScriptedProvider(script(incident), token_delay_s=pace)
    app = build_app(paths, alerts_config(base, log_file, port), provider=provider,
                    listener=listener)
    try:
        await app.start()
        await _alert(app, voice, f"http://127.0.0.1:{port}/alertmanager", token, incident)
        await _burst(app, voice, log_file)
        await _searches(app, voice)
    finally:
        await app.aclose()


async def _alert(app: App, voice: _Voice, url: str, token: str, incident: Incident) -> None:
    seen = len(app.session.turns)
    async with httpx.AsyncClient(timeout=10, trust_env=False) as client:  # loopback, no proxy
        await _listening(client, url)
        for status in ("firing", "resolved"):
            answer = await client.post(url, json=notification(status, incident),
                                       headers={"Authorization": f"Bearer {token}"})
            voice.say(f"Alertmanager → POST /alertmanager ({status}, fingerprint "
                      f"{FINGERPRINT}): {answer.status_code} {answer.json()}")
    delivered = await _delivered(app, seen, "channel=alertmanager")
    block = _block(delivered, "channel=alertmanager")
    wakes = sum(t.kind is TurnKind.EVENT and "channel=alertmanager" in t.content
                for t in app.session.turns[seen:])
    shown = sum(line.startswith("[") for line in block.splitlines())
    voice.say(f"the model was woken {'once' if wakes == 1 else f'{wakes} times'}; its "
              f"pool_event showed {shown} alert value{'s' if shown != 1 else ''}:")
    for line in block.splitlines():
        voice.say(f"  {_short(line)}")
    fired = "FIRING:" in delivered
    replaced = re.search(r"… (\d+) older values? replaced by this one", block)
    voice.say("One state value for the alert's fingerprint: "
              + (f"the resolved one, {replaced.group(1)} older value replaced (firing, kept in "
                 "the archive)" if replaced and not fired else "NOT replaced as it should be")
              + ".")


async def _listening(client: httpx.AsyncClient, url: str) -> None:
    """Wait until the intake answers (it starts with the agent's senses)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            try:
                await client.get(url)  # a GET is refused with 405, once it listens
                return
            except httpx.TransportError:
                await asyncio.sleep(0.02)


async def _burst(app: App, voice: _Voice, log_file: Path) -> None:
    seen = len(app.session.turns)
    with log_file.open("a", encoding="utf-8") as log:
        log.writelines(burst_lines())
    voice.say(f"{BURST} declined payments appended to {log_file.name} at once; order "
              f"{ASKED_ORDER} is line {BURST // 2 + 1}.")
    delivered = await _delivered(app, seen, f"channel={LOG_CHANNEL}")
    block = _block(delivered, f"channel={LOG_CHANNEL}")
    voice.say("the model read (a count, the first and latest lines, a gap):")
    for line in block.splitlines():
        voice.say(f"  {_short(line)}")
    voice.say(f"order {ASKED_ORDER} shown to the model: "
              f"{'yes' if str(ASKED_ORDER) in block else 'no, it is inside the gap'}.")


async def _searches(app: App, voice: _Voice) -> None:
    await _ask(app, voice, f"A customer says order {ASKED_ORDER} was declined a moment ago. "
                           "Did we see it?")
    found = _result_of(app, "lookup_sensory_archive")
    hit = next((line for line in found.splitlines()
                if str(ASKED_ORDER) in line and LOG_CHANNEL in line), None)
    voice.say(f"the archive search found: {_hit_line(hit) if hit else 'NOTHING'}")
    gap = re.search(r"… \d+ more: batch (\S+) offsets (\d+)–(\d+)",
                    _last_event(app, f"channel={LOG_CHANNEL}"))
    place = re.search(r"(\S+)#(\d+) " + re.escape(LOG_CHANNEL), hit or "")
    if gap and place and place.group(1) == gap.group(1):
        inside = int(gap.group(2)) <= int(place.group(2)) <= int(gap.group(3))
        voice.say(f"{place.group(1)}#{place.group(2)} is "
                  f"{'inside' if inside else 'OUTSIDE'} the gap the model was shown as a count "
                  f"(offsets {gap.group(2)}–{gap.group(3)}).")

    await _ask(app, voice, "And that payments alert earlier: when did it fire?")
    voice.say("search_full_history found: "
              + _short(_result_of(app, "search_full_history"), 240))
    archived = [line for line in _result_of(app, "lookup_sensory_archive").splitlines()
                if " alertmanager [" in line]
    voice.say(f"the archive keeps {len(archived)} values of the alert:")
    for line in archived:
        voice.say(f"  {_short(_hit_line(line), 120)}")
    voice.say(f"$ noema memory search --role event {ALERT}")
    for line in search_memory(app.memory.search, ALERT, roles=["event"]).splitlines():
        if line.strip():
            voice.say(f"  {_short(line, 160)}")


async def _ask(app: App, voice: _Voice, text: str) -> None:
    voice.person(text)
    app.agent.submit(text)
    await app.agent.idle()


async def _delivered(app: App, seen: int, mark: str) -> str:
    """The first pool_event after the first `seen` turns holding `mark`, once the
    model has answered it."""
    async with asyncio.timeout(WAIT_S):
        while True:
            text = _event_after(app.session.turns[seen:], mark)
            if text is not None:
                await app.agent.idle()
                return text
            await asyncio.sleep(0.02)


def _event_after(turns: list[Turn], mark: str) -> str | None:
    return next((t.content for t in turns if t.kind is TurnKind.EVENT and mark in t.content),
                None)


def _last_event(app: App, mark: str) -> str:
    return _event_after(list(reversed(app.session.turns)), mark) or ""


def _block(delivered: str, mark: str) -> str:
    """The one package of a pool_event that holds `mark`, without its envelope lines."""
    lines = delivered.splitlines()
    start = next(i for i, line in enumerate(lines) if mark in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(OPEN + "/event"))
    return "\n".join(lines[start + 1:end])


def _result_of(app: App, tool: str) -> str:
    return next((t.content for t in reversed(app.session.turns)
                 if t.kind is TurnKind.TOOL_RESULT and t.tool_name == tool), "")


def _hit_line(line: str) -> str:
    """A search hit as place, time and text, without the sender (the log's long path)."""
    parts = re.match(r"(\S+#\d+ \S+) \[(.*?)\] .*? authorised=\w+: (.*)", line)
    return _short(f"{parts[1]} [{parts[2]}]: {parts[3]}" if parts else line)


def _short(text: str, width: int = 150) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"
