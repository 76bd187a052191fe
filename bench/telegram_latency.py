"""Telegram to model: from the Bot API receiving a person's message to the
model's request carrying it.

Black box through the real agent (`build_app`): the Telegram channel long
polls a fake Bot API on 127.0.0.1 (in a thread of this process), the scripted
model records when each request reaches it. For each trial a message is
injected into the fake server (the moment Telegram's servers would have it)
and timed, on the monotonic clock, to:

- taken:   the channel hands it to the agent (`submit`; the quiet window is here);
- request: the model's request carrying it starts.

The quiet window (`[telegram] quiet_window_s`, default 0.6 s) holds a message
back so that a burst becomes one; runs are made with the default and with 0,
to show its share. Prints figures; asserts nothing.

    .venv/bin/python bench/telegram_latency.py [--trials 100] [--smoke]

`--smoke` runs 4 trials per window: every figure once, too few to trust.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # for tests.fakes

from noema.app import build_app  # noqa: E402
from noema.channels.telegram.settings import TelegramSettings  # noqa: E402
from noema.config import Config  # noqa: E402
from noema.paths import AgentPaths  # noqa: E402
from noema.providers.base import ModelRequest  # noqa: E402
from noema.providers.scripted import ScriptedProvider, say  # noqa: E402
from noema.security.settings import FilesSettings, RootSettings  # noqa: E402
from tests.fakes.telegram_server import TOKEN, FakeTelegramServer  # noqa: E402

CHAT = 4242
SMOKE_TRIALS = 4


@dataclass
class Recording(ScriptedProvider):
    """The scripted model, noting when a request carrying a marker arrives."""

    seen: dict[str, float] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def stream(self, request: ModelRequest):
        now = time.perf_counter()
        last = request.messages[-1].content if request.messages else ""
        for word in last.split():
            if word.startswith("msg#"):
                self.seen.setdefault(word, now)
        self.arrived.set()
        return super().stream(request)


def figures(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return (f"{name:<8} p50 {q[49]:8.2f}  p90 {q[89]:8.2f}  p99 {q[98]:8.2f}  "
            f"max {ms[-1]:8.2f} ms")


async def run(server: FakeTelegramServer, quiet: float, trials: int) -> tuple[list, list]:
    folder = tempfile.TemporaryDirectory(prefix="noema-telegram-bench-")
    home = Path(folder.name)
    paths = AgentPaths.for_agent("bench", home / "home")
    paths.root.mkdir(parents=True)
    paths.secrets_file.write_text(f'TELEGRAM_BOT_TOKEN = "{TOKEN}"\n')
    os.chmod(paths.secrets_file, 0o600)
    config = Config(files=FilesSettings(roots=(RootSettings(path=home / "ws"),)),
                    telegram=TelegramSettings(chat_ids=(CHAT,), base_url=server.base_url,
                                              quiet_window_s=quiet))
    model = Recording([say(f"ok {n}") for n in range(trials)])
    app = build_app(paths, config, provider=model)
    taken_at: dict[str, float] = {}
    submit = app.agent.submit

    def timed_submit(text: str, **kwargs):
        now = time.perf_counter()
        for word in text.split():
            if word.startswith("msg#"):
                taken_at.setdefault(word, now)
        return submit(text, **kwargs)

    app.agent.submit = timed_submit  # type: ignore[method-assign]
    taken, requested = [], []
    try:
        await app.start()
        for n in range(trials):
            marker = f"msg#{n}"
            sent_before = len(server.sent)
            injected = time.perf_counter()
            server.inject_text(CHAT, f"{marker} what is the weather like?")
            while marker not in model.seen:
                model.arrived.clear()
                await asyncio.wait_for(model.arrived.wait(), 30)
            taken.append(taken_at[marker] - injected)
            requested.append(model.seen[marker] - injected)
            await app.agent.idle()
            await server.wait_sent_async(sent_before + 1, 30)  # answered: the next starts idle
    finally:
        await app.aclose()
        folder.cleanup()
    return taken, requested


async def main(trials: int) -> None:
    with FakeTelegramServer() as server:
        results = {}
        for quiet in (TelegramSettings.model_fields["quiet_window_s"].default, 0.0):
            server.reset()
            started = time.perf_counter()
            results[quiet] = (*await run(server, quiet, trials), time.perf_counter() - started)
    print(f"Telegram message to model request, {trials} trials per window, real agent "
          "(build_app), fake Bot API on loopback with long polling, scripted model\n")
    for quiet, (taken, requested, elapsed) in results.items():
        print(f"quiet window {quiet:g} s ({elapsed:.0f} s):")
        print("  " + figures("taken", taken))
        print("  " + figures("request", requested))
        p50 = statistics.median(requested)
        if quiet:
            print(f"  the quiet window is {quiet / p50:.1%} of the median")
        print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_TRIALS} trials")
    args = parser.parse_args()
    asyncio.run(main(SMOKE_TRIALS if args.smoke else args.trials))
