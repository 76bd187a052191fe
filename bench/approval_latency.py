"""Approvals on Telegram: from the agent asking to the question at the Bot API,
and from the person's button press to the approved call running.

The whole agent (`build_app`) with no interface attached, so that the gate
hands its questions to the person's channels (`App.ask_away`), and its
Telegram channel long polling the fake Bot API on 127.0.0.1 (in a thread of
this process). For each trial the person asks on Telegram, the scripted
model calls `file_write`, whose autonomy level is `ask`, and the clock (one
monotonic clock for the whole process) is read:

- asked:   when the gate calls its approver (the question starts);
- shown:   when the fake Bot API has taken the `sendMessage` that carries the
           question's inline keyboard (a thread waiting on the fake server
           wakes as it is stored);
- pressed: just before the person's press of Allow (a `callback_query`)
           is put in the fake server's queue of updates;
- running: when the approved call starts (the question's state becomes
           `running`, right before the call is awaited).

Target for asked → shown: p99 ≤ 300 ms. Prints figures; asserts nothing.

    .venv/bin/python bench/approval_latency.py [--trials 50] [--smoke]

`--smoke` runs 3 trials: every figure once, on too few samples to trust.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.fakes

from noema.app import App, build_app  # noqa: E402
from noema.config import validate  # noqa: E402
from noema.paths import AgentPaths  # noqa: E402
from noema.providers.base import ModelRequest  # noqa: E402
from noema.providers.scripted import ScriptedProvider, call, say  # noqa: E402
from noema.security.approvals import ApprovalRequest  # noqa: E402
from tests.fakes.telegram_server import TOKEN, FakeTelegramServer, SentMessage  # noqa: E402

PERSON = 4242
SMOKE_TRIALS = 3
SHOWN_TARGET_MS = 300.0
WAIT_S = 30.0


@dataclass
class Responder(ScriptedProvider):
    """The scripted model, answering by what it reads rather than in a fixed
    order: a person's `trial N` it has not served yet gets the `file_write`
    call; anything else (its own call's result, an outcome reported later,
    since the senses hold back a steady run of them) a short answer."""

    served: set[str] = field(default_factory=set)

    def stream(self, request: ModelRequest):
        asked = [word for m in request.messages for word in re.findall(r"trial#\d+", m.content)]
        fresh = [marker for marker in asked if marker not in self.served]
        if fresh:
            marker = fresh[0]
            self.served.add(marker)
            name = f"t{marker.removeprefix('trial#')}.txt"
            self.extend([say("", call("file_write", path=name, content=f"{marker}\n"))])
        else:
            self.extend([say("Noted.")])
        return super().stream(request)


class Clocks:
    """The moments of one run, by trial."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.running: list[float] = []


def make_app(home: Path, server: FakeTelegramServer, model: ScriptedProvider,
             clocks: Clocks) -> App:
    paths = AgentPaths.for_agent("bench", home / "home")
    paths.root.mkdir(parents=True)
    paths.secrets_file.write_text(f'TELEGRAM_BOT_TOKEN = "{TOKEN}"\n')
    os.chmod(paths.secrets_file, 0o600)
    config = validate({
        "telegram": {"chat_ids": [PERSON], "base_url": server.base_url, "quiet_window_s": 0},
        "files": {"roots": [{"path": str(home / "ws")}]},
        "autonomy": {"tools": {"file_write": "ask"}},
    }, "bench")
    # A chronicler of its own: a save point made during the run must not take
    # the answers scripted for the trials.
    app = build_app(paths, config, provider=model, chronicler=ScriptedProvider([]))

    async def asking(request: ApprovalRequest) -> bool:
        clocks.asked.append(time.perf_counter())
        return await app.ask_away(request)

    app.attach_approver(asking)  # what the host does with no client attached, timed
    assert app.away is not None, "no questions away: the Telegram channel was not built"
    store = app.away.store
    move = store.move

    def timed_move(number: int, state: str, **changes):
        if state == "running":
            clocks.running.append(time.perf_counter())
        return move(number, state, **changes)

    store.move = timed_move  # type: ignore[method-assign]
    return app


def question_after(server: FakeTelegramServer, count: int) -> tuple[float, SentMessage]:
    """Wait for the first message with buttons after the first `count` sent;
    when it was stored."""
    while True:
        sent = server.wait_sent(count + 1, WAIT_S)
        now = time.perf_counter()
        for message in sent[count:]:
            if message.buttons:
                return now, message
        count = len(sent)


async def measure(trials: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"shown": [], "running": []}
    clocks = Clocks()
    model = Responder([], context_window=1_000_000)  # no save point in a short run
    with FakeTelegramServer() as server, tempfile.TemporaryDirectory(
            prefix="noema-approval-bench-") as folder:
        home = Path(folder)
        app = make_app(home, server, model, clocks)
        try:
            await app.start()
            server.inject_text(PERSON, "hello")  # the chat is known; the first cycle is done
            await server.wait_sent_async(1, WAIT_S)
            await app.agent.idle()
            for n in range(trials):
                target = home / "ws" / f"t{n}.txt"
                count = len(server.sent)
                waiting = asyncio.create_task(asyncio.to_thread(question_after, server, count))
                await asyncio.sleep(0)  # the waiting thread is started before the ask
                server.inject_text(PERSON, f"trial#{n}: write {target.name}")
                shown, question = await waiting
                if len(clocks.asked) != n + 1:
                    raise RuntimeError(f"trial {n}: {len(clocks.asked)} questions asked")
                figures["shown"].append(shown - clocks.asked[-1])
                allow = dict(question.buttons)["Allow"]
                ran = len(clocks.running)
                await app.agent.idle()
                pressed = time.perf_counter()
                server.inject_press(PERSON, PERSON, question.message_id, allow)
                while len(clocks.running) == ran:
                    await asyncio.sleep(0.001)
                    if time.perf_counter() - pressed > WAIT_S:
                        raise RuntimeError(f"trial {n}: the allowed call never ran")
                figures["running"].append(clocks.running[-1] - pressed)
                while not target.exists():
                    await asyncio.sleep(0.01)
                    if time.perf_counter() - pressed > WAIT_S:
                        raise RuntimeError(f"trial {n}: the allowed call wrote nothing")
                await app.agent.idle()
        finally:
            await app.aclose()
    return figures


def line(label: str, samples: list[float], target: float | None = None) -> str:
    ms = sorted(1000 * s for s in samples)
    q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
    verdict = ""
    if target is not None:
        verdict = f"  (target p99 ≤ {target:g} ms: {'met' if q[98] <= target else 'NOT met'})"
    return (f"  {label:<42} p50 {q[49]:7.1f} ms  p99 {q[98]:7.1f} ms  max {ms[-1]:7.1f} ms"
            f"{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_TRIALS} trials")
    args = parser.parse_args()
    trials = SMOKE_TRIALS if args.smoke else args.trials
    started = time.perf_counter()
    figures = asyncio.run(measure(trials))
    print(f"approvals on Telegram, {trials} trials ({time.perf_counter() - started:.0f} s): real "
          "agent (build_app), no interface attached, fake Bot API on loopback with long "
          "polling, scripted model")
    print(line("asked → question with buttons at the API", figures["shown"], SHOWN_TARGET_MS))
    print(line("button press → approved call running", figures["running"]))


if __name__ == "__main__":
    main()
