"""Mail latency: from Dovecot accepting a mail to the model's request carrying it.

A real Dovecot on 127.0.0.1 (the tests' own instance: passwd-file users,
maildirs in a temporary folder) and the whole agent built by `build_app`
with a scripted model that notes when each request starts. For each mail
from the person: dovecot-lda delivers it (the clock starts when Dovecot has
accepted it: lda has returned), the inbox sensor is woken by IMAP IDLE,
fetches it, judges who sent it, submits it as the person's message, and the
agent starts a cycle; the clock stops when the model's request holding the
mail's text begins. The answer goes back by SMTP (aiosmtpd delivering into
the person's mailbox), as in use; the next mail waits until the agent is idle.

The figures are split: Dovecot's own delay before its IDLE push (about
0.5 s: Dovecot waits that long after a change to the maildir before it
notifies, so a burst is one notification), the sensor (the push to the
person's message stored), and the agent (stored to the request).

Target: p99 within 1 s with IDLE. Prints figures; asserts nothing.

    .venv/bin/python bench/mail_latency.py [--mails 100] [--smoke]

`--smoke` sends 5 mails: every figure once, on too few samples to trust.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for mailroom
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.mail

from mailroom import mail_agent  # noqa: E402

from noema.channels.mail.imap import ImapConnection  # noqa: E402
from noema.providers.scripted import ScriptedProvider, say  # noqa: E402
from tests.mail.conftest import mail  # noqa: E402
from tests.mail.servers import available  # noqa: E402


class TimedModel(ScriptedProvider):
    """The scripted model, noting when a request carrying a token begins."""

    def __init__(self, answers: int) -> None:
        super().__init__([say(f"Answer {n}.") for n in range(answers)])
        self.seen: dict[str, float] = {}
        self.arrived = asyncio.Event()

    async def stream(self, request):
        now = time.perf_counter()
        for message in request.messages:
            for token in message.content.split():
                if token.startswith("mail-token-") and token not in self.seen:
                    self.seen[token] = now
        self.arrived.set()
        async for event in super().stream(request):
            yield event


class Marks:
    """When the inbox sensor was woken by the server and when it submitted a mail."""

    def __init__(self) -> None:
        self.pushes: list[float] = []
        self.submits: dict[str, float] = {}

    def watch(self, channel) -> None:
        original_wait = ImapConnection.wait_for_change

        async def wait_for_change(connection, timeout):
            changed = await original_wait(connection, timeout)
            self.pushes.append(time.perf_counter())
            return changed

        ImapConnection.wait_for_change = wait_for_change  # the benchmark's own probe
        desk = channel.intake.desk

        def submit(text, **where):
            turn = desk.submit(text, **where)
            for token in text.split():
                if token.startswith("mail-token-"):
                    self.submits[token] = time.perf_counter()
            return turn

        channel.intake.desk = dataclasses.replace(desk, submit=submit)

    def push_after(self, moment: float) -> float | None:
        return next((p for p in self.pushes if p >= moment), None)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def measure(count: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"total": [], "server": [], "sensor": [], "agent": []}
    marks = Marks()
    model = TimedModel(count)
    async with mail_agent(model) as room:
        [channel] = room.app.channels
        marks.watch(channel)
        for n in range(count):
            token = f"mail-token-{n}"
            raw = mail(room.person_address, room.settings.address or "", f"Question {n}",
                       f"Please answer {token} today.").as_bytes()

            def deliver(data: bytes = raw) -> float:
                room.dovecot.deliver(room.agent_user, data)
                return time.perf_counter()  # Dovecot has accepted the mail

            accepted = await asyncio.to_thread(deliver)
            while token not in model.seen:
                model.arrived.clear()
                await asyncio.wait_for(model.arrived.wait(), 60)
            pushed = marks.push_after(accepted)
            submitted = marks.submits[token]
            figures["total"].append(model.seen[token] - accepted)
            if pushed is not None and pushed <= submitted:
                figures["server"].append(pushed - accepted)
                figures["sensor"].append(submitted - pushed)
            figures["agent"].append(model.seen[token] - submitted)
            await room.app.agent.idle()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mails", type=int, default=100)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    problem = available()
    if problem:
        sys.exit(problem)
    count = 5 if args.smoke else args.mails
    figures = asyncio.run(measure(count))
    print(f"mail accepted by Dovecot → model request carrying it, {count} mails (IMAP IDLE)")
    labels = {
        "total": "accepted → request (target p99 ≤ 1000 ms)",
        "server": "accepted → Dovecot's IDLE push",
        "sensor": "push → submitted as the person's message",
        "agent": "submitted → the model's request",
    }
    for name, label in labels.items():
        ms = [1000 * v for v in figures[name]]
        if not ms:
            continue
        print(f"  {label}: p50 {percentile(ms, 50):.1f} ms, p99 {percentile(ms, 99):.1f} ms, "
              f"max {max(ms):.1f} ms ({len(ms)} samples)")


if __name__ == "__main__":
    main()
