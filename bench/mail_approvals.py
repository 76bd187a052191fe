"""Approvals by mail: from the agent asking to the question at the SMTP relay,
and from the person's reply accepted by Dovecot to the question settled.

The tests' own Dovecot and SMTP relay on 127.0.0.1 and the whole agent built
by `build_app`; each round asks what the gate would ask with no interface
attached (`App.away.post`, as the gate does when `App.ask_away` finds
nobody at the machine), waits for the question's envelope at the relay,
delivers the person's "Yes." in its thread with dovecot-lda (DKIM-signed as a
provider signs a reply, the question quoted, so its key is bound) and
stops the clock when the approved call starts. The first figure holds a
run of dovecot-lda (the relay delivers into the person's mailbox before it
answers); the second, Dovecot's own wait before its IDLE push (about 0.5 s;
see mail_latency.py).

Prints figures; asserts nothing.

    .venv/bin/python bench/mail_approvals.py [--questions 20] [--smoke]

`--smoke` asks 3 questions: every figure once, on too few samples to trust.
"""

from __future__ import annotations

import argparse
import asyncio
import email
import email.policy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for mailroom
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.mail

from mailroom import mail_agent  # noqa: E402

from noema.providers.scripted import ScriptedProvider  # noqa: E402
from noema.security.approvals import ApprovalRequest  # noqa: E402
from noema.tools.registry import ToolContext, ToolResult  # noqa: E402
from tests.mail.conftest import mail  # noqa: E402
from tests.mail.servers import available  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def measure(count: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"asked": [], "answered": []}
    async with mail_agent(ScriptedProvider([]), mail={"authserv_id": "127.0.0.1"}) as room:
        app, relay, person_address = room.app, room.relay, room.person_address
        for n in range(count):
            seen = len(relay.envelopes)
            request = ApprovalRequest("shell_execute", f"command: make round-{n}",
                                      "the autonomy level of shell_execute is 'ask'")
            ran: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

            async def run(ran: asyncio.Future[bool] = ran) -> ToolResult:
                ran.set_result(True)
                return ToolResult("ran")

            start = time.perf_counter()
            asking = asyncio.create_task(app.away.post(request, ToolContext(f"c{n}", 0, 0), run))
            envelopes = await asyncio.to_thread(
                relay.wait_for, lambda found: len(found) > seen, 60)
            figures["asked"].append(time.perf_counter() - start)
            question = email.message_from_bytes(envelopes[seen].data,
                                                policy=email.policy.default)
            # As a provider signs a reply (From, To, Subject, Date; not In-Reply-To):
            # the question's key counts from the signed subject and the quoted text.
            quoted = "\n".join("> " + line for line in question.get_content().splitlines())
            reply = mail(person_address, room.settings.own_address,
                         f"Re: {question['Subject']}", f"Yes.\n\nOn Mon, Noema wrote:\n{quoted}\n",
                         auth=f"127.0.0.1; dkim=pass header.d={person_address.split('@')[1]}",
                         In_Reply_To=question["Message-ID"])
            reply["DKIM-Signature"] = (f"v=1; d={person_address.split('@')[1]}; s=sel; "
                                       "h=from:to:subject:date; bh=x; b=AbCd")
            raw = reply.as_bytes()

            def deliver(data: bytes = raw) -> float:
                room.dovecot.deliver(room.agent_user, data)
                return time.perf_counter()  # Dovecot has accepted the reply

            accepted = await asyncio.to_thread(deliver)
            await asking
            assert await asyncio.wait_for(ran, 60) is True
            figures["answered"].append(time.perf_counter() - accepted)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    problem = available()
    if problem:
        sys.exit(problem)
    count = 3 if args.smoke else args.questions
    figures = asyncio.run(measure(count))
    print(f"approvals by mail, {count} questions (IMAP IDLE)")
    labels = {"asked": "asked → question accepted by the relay",
              "answered": "reply accepted by Dovecot → question settled"}
    for name, label in labels.items():
        ms = [1000 * v for v in figures[name]]
        print(f"  {label}: p50 {percentile(ms, 50):.1f} ms, p99 {percentile(ms, 99):.1f} ms, "
              f"max {max(ms):.1f} ms ({len(ms)} samples)")


if __name__ == "__main__":
    main()
