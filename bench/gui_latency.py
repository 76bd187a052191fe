"""The web page's latency, in Debian's Chromium driven by Playwright.

1. Stop: the Stop button is clicked while the answer streams in from the fake
   Chat Completions server (its own process, the real OpenAI client, 50 tokens
   a second); measured from the click in the page (the browser's clock) to the
   moment the fake server sees the model stream closed (its clock; both read
   the machine's wall clock). Target: p99 ≤ 100 ms.
2. First load: the chat page opened with 10,000 turns and 50 save points
   stored, from navigation to its newest page of turns shown and the live
   stream attached (the Stop button wired, the status line filled): timed by
   the bench ("chat load", the driver's round trips included) and by the
   browser ("chat paint": from the navigation's start to the first frame
   showing them). Then, in the open page, from scrolling to the top to the
   next older page shown ("older page"); and the memory page with its 50 save
   points. Target: ≤ 1 s (the chat's first paint: ≤ 500 ms).
3. Approval shown: the agent asks the person about a call (the gate hands the
   question to the page's host, server clock) until the card is in the page
   (a mutation observer, the browser's clock; both read the wall clock).
   Target: p99 ≤ 300 ms.

Prints figures; asserts nothing.

    .venv/bin/python bench/gui_latency.py [--trials 50] [--loads 10] [--smoke]

`--smoke` runs 4 Stop trials and 2 loads: every figure once, on too few
samples to trust.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.fakes

from noema.app import build_app
from noema.config import Config
from noema.interfaces.web import UiServer
from noema.interfaces.web.chat_routes import HISTORY_PAGE
from noema.interfaces.web.render import markdown_html
from noema.memory import savepoints
from noema.memory.savepoints import Report, Status
from noema.memory.settings import MemorySettings
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind
from noema.paths import AgentPaths
from noema.perception.settings import PerceptionSettings
from noema.providers.catalog import build_provider
from noema.providers.scripted import ScriptedProvider, call, say
from noema.providers.settings import ModelSettings
from noema.security.settings import AutonomySettings, FilesSettings, RootSettings
from tests.fakes import FakeOpenAIServer, FakeReply

CHROMIUM = "/usr/bin/chromium"
STOP_TARGET_MS = 100.0
LOAD_TARGET_MS = 1000.0
PAINT_TARGET_MS = 500.0
ASK_TARGET_MS = 300.0
LONG = "word " * 3000
WAIT_S = 30.0


class RemoteServer:
    """The fake server in a child process: armed with a reply, it answers with
    the wall-clock time at which a client abandoned that reply's stream."""

    def __init__(self, tokens_per_second: float) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, tokens_per_second),
                                         daemon=True)
        self._process.start()
        self.base_url = self._pipe.recv()

    def arm(self, reply: FakeReply) -> None:
        self._pipe.send(reply)
        self._pipe.recv()

    def closed_at(self) -> float | None:
        """When the armed stream was closed by the client (seconds since the epoch)."""
        return self._pipe.recv() if self._pipe.poll(WAIT_S) else None

    def close(self) -> None:
        self._pipe.send(None)
        self._process.join(10)


def _serve(pipe, tokens_per_second: float) -> None:
    with FakeOpenAIServer(tokens_per_second=tokens_per_second) as server:
        pipe.send(server.base_url)
        while (reply := pipe.recv()) is not None:
            server.disconnected.clear()
            server.script(reply)
            pipe.send(True)
            pipe.send(time.time() if server.disconnected.wait(WAIT_S) else None)


class Served:
    """A UiServer in its own event loop thread."""

    def __init__(self, root: Path, provider, autonomy: AutonomySettings | None = None) -> None:
        paths = AgentPaths.for_agent("bench", root / "home")
        # No meaning model: with it, the agent's writer embeds all 10,000 turns in
        # the background for a minute or more, and the page is measured against
        # that work rather than alone (the search that uses it is not measured here).
        config = Config(files=FilesSettings(roots=(RootSettings(path=root / "ws"),)),
                        perception=PerceptionSettings(enabled=False),
                        memory=MemorySettings(embeddings="off"),
                        autonomy=autonomy or AutonomySettings())
        self.server = UiServer(paths, config, port=0,
                               build_app=functools.partial(build_app, provider=provider))
        self.paths = paths
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.address = self.call(self.server.start())
        self.base = self.address.split("/?", 1)[0]

    def call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(WAIT_S)

    def idle(self) -> None:
        async def settle() -> None:
            while self.server.agent_app.agent.status().busy:  # type: ignore[union-attr]
                await asyncio.sleep(0.01)

        self.call(settle())

    def close(self) -> None:
        self.call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_S)


def figures(name: str, ms: list[float], target: float) -> str:
    ms = sorted(ms)
    q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else [ms[0]] * 99
    return (f"{name:<12} n={len(ms):<4} p50 {q[49]:7.1f}  p90 {q[89]:7.1f}  p99 {q[98]:7.1f}  "
            f"max {ms[-1]:7.1f} ms  (target {target:g} ms: "
            f"{'met' if q[98] <= target else 'NOT met'})")


def stop_trials(browser, trials: int, tokens_per_second: float) -> list[float]:
    fake = RemoteServer(tokens_per_second)
    try:
        settings = ModelSettings(provider="openai-compatible", model="fake",
                                 base_url=fake.base_url, max_retries=0)
        with tempfile.TemporaryDirectory() as folder:
            served = Served(Path(folder), build_provider(settings, {}))
            try:
                # Playwright's waiting predicates are evaluated strings, which the page's
                # own CSP forbids; the bench lifts it for its instrumentation only.
                page = browser.new_context(bypass_csp=True).new_page()
                page.set_default_timeout(WAIT_S * 1000)
                page.goto(served.address)
                page.wait_for_function("document.getElementById('context').textContent !== ''")
                page.evaluate("""() => document.getElementById('stop').addEventListener('click',
                    () => { window.stopAt = performance.timeOrigin + performance.now(); },
                    {capture: true})""")
                samples = []
                for n in range(trials):
                    fake.arm(FakeReply(text=LONG))
                    page.fill("#message", f"trial {n}: tell me everything")
                    page.press("#message", "Enter")
                    page.wait_for_selector(".turn.streaming")
                    page.wait_for_function(
                        "document.querySelector('.turn.streaming').textContent.length > 40")
                    page.click("#stop")
                    closed = fake.closed_at()
                    clicked = page.evaluate("window.stopAt")
                    if closed is None:
                        raise RuntimeError(f"trial {n}: the model stream was not closed")
                    samples.append(closed * 1000 - clicked)
                    page.wait_for_selector("#stop:disabled")
                    served.idle()
                page.close()
                return samples
            finally:
                served.close()
    finally:
        fake.close()


def ask_trials(browser, trials: int) -> list[float]:
    """From the gate asking to the approval card in the page, `trials` times."""
    model = ScriptedProvider([])
    with tempfile.TemporaryDirectory() as folder:
        served = Served(Path(folder), model, AutonomySettings(tools={"file_write": "ask"}))
        try:
            page = browser.new_context(bypass_csp=True).new_page()
            page.set_default_timeout(WAIT_S * 1000)
            page.goto(served.address)
            page.wait_for_function("document.getElementById('context').textContent !== ''")
            page.evaluate("""() => { window.shownAt = [];
                new MutationObserver(() => {
                  if (document.querySelector('#approvals .approval'))
                    window.shownAt.push(performance.timeOrigin + performance.now());
                }).observe(document.getElementById('approvals'), {childList: true}); }""")
            gate = served.server.agent_app.hands.gate  # type: ignore[union-attr]
            asked: list[float] = []
            inner = gate._approver  # the host's, attached when the page's host bound the app

            async def timed(request):
                asked.append(time.time())
                return await inner(request)

            served.call(_attach(gate, timed))
            samples = []
            for n in range(trials):
                async def script(n: int = n) -> None:
                    model.extend([say("", call("file_write", path=f"t{n}.txt", content="x")),
                                  say("Not written.")])

                served.call(script())
                before = page.evaluate("window.shownAt.length")
                page.fill("#message", f"trial {n}: write a file")
                page.press("#message", "Enter")
                page.wait_for_function(f"window.shownAt.length > {before}")
                shown = page.evaluate(f"window.shownAt[{before}]")
                samples.append(shown - asked[-1] * 1000)
                page.locator("#approvals .approval button.refuse").click()
                page.wait_for_selector("#approvals .approval", state="detached")
                served.idle()
            page.close()
            return samples
        finally:
            served.close()


async def _attach(gate, approver) -> None:
    gate.attach(approver)


def fill(paths: AgentPaths, turns: int, save_points: int) -> None:
    """`turns` turns of conversation and `save_points` accepted save points citing them."""
    store = TurnStore(paths.turns_db)
    try:
        with store.transaction():
            for n in range(turns // 2):
                store.append(NewTurn(TurnKind.USER, f"Question {n}: what about the boat's sail {n}?",
                                     channel="terminal"))
                store.append(NewTurn(TurnKind.ASSISTANT,
                                     f"Answer {n}: the **sail** needs *care*; see item {n}."))
        per = turns // save_points
        for n in range(save_points):
            first = n * per + 1
            ids = list(range(first, first + per))
            report = Report(cited=(first, first + 1), covered=2, coverable=2, chars=200,
                            words=40, tokens=60, retries=0, chronicler="bench/none",
                            language="en")
            savepoints.record(store, status=Status.ACCEPTED, previous=n or None, turn_ids=ids,
                              report=report,
                              text=f"## The Journey\nThe person asked about sail {n} "
                                   f"{{cite:{first}}} and heard about care {{cite:{first + 1}}}.")
    finally:
        store.close()


CHAT_SHOWN = (f"document.querySelectorAll('.turn').length >= {HISTORY_PAGE}"
              " && document.getElementById('context').textContent !== ''")
# Run in the page from its first moment: the browser's own clock at the first
# animation frame in which the chat shows its turns and its status line, from
# the start of the navigation (what a person sees, without the driver's trips).
PAINT_PROBE = f"""(() => {{
  if (location.pathname !== "/") return;
  const look = () => {{
    if (document.body && {CHAT_SHOWN}) {{ window.paintedAt = performance.now(); return; }}
    requestAnimationFrame(look);
  }};
  requestAnimationFrame(look);
}})();"""


def load_trials(browser, loads: int) -> tuple[list[float], list[float], list[float], list[float]]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        paths = AgentPaths.for_agent("bench", root / "home")
        paths.ensure()
        fill(paths, 10_000, 50)
        served = Served(root, ScriptedProvider([]))
        try:
            chat, paint, older, memory = [], [], [], []
            for _ in range(loads):
                context = browser.new_context(bypass_csp=True)
                context.add_init_script(PAINT_PROBE)
                page = context.new_page()
                page.set_default_timeout(WAIT_S * 1000)
                page.goto(served.address)  # signs in (cookie), then measure clean loads
                for url, wait, into in (
                    (served.base + "/", CHAT_SHOWN, chat),
                    (served.base + "/memory", "document.querySelectorAll('.savepoint').length"
                     " === 50 && document.querySelector('.journey a.cite') !== null", memory),
                ):
                    markdown_html.cache_clear()  # each load renders as the first one did
                    start = time.perf_counter()
                    page.goto(url)
                    page.wait_for_function(wait, polling="raf")
                    into.append((time.perf_counter() - start) * 1000)
                    if into is chat:
                        page.wait_for_function("window.paintedAt !== undefined")
                        paint.append(page.evaluate("window.paintedAt"))
                        older.append(_older_page(page))
                context.close()
            return chat, paint, older, memory
        finally:
            served.close()


def _older_page(page) -> float:
    """From scrolling to the top of the open chat to the next older page shown (ms)."""
    shown = page.evaluate("document.querySelectorAll('.turn').length")
    start = time.perf_counter()
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_function(f"document.querySelectorAll('.turn').length >= {shown + HISTORY_PAGE}",
                           polling="raf")
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--loads", type=int, default=10)
    parser.add_argument("--tokens-per-second", type=float, default=50.0)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    trials, loads = (4, 2) if args.smoke else (args.trials, args.loads)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            stops = stop_trials(browser, trials, args.tokens_per_second)
            chat, paint, older, memory = load_trials(browser, loads)
            asks = ask_trials(browser, trials)
        finally:
            browser.close()
    print(f"gui latency: Chromium, fake SSE server at {args.tokens_per_second:g} tokens/s; "
          "the agent's meaning model off (its background embedding would compete)")
    print(figures("stop→closed", stops, STOP_TARGET_MS))
    print(figures("chat load", chat, PAINT_TARGET_MS)
          + f"  (10,000 turns stored; the newest {HISTORY_PAGE} shown)")
    print(figures("chat paint", paint, PAINT_TARGET_MS)
          + "  (the same loads, the browser's clock: navigation to the frame showing them)")
    print(figures("older page", older, PAINT_TARGET_MS)
          + f"  (scrolled to the top: {HISTORY_PAGE} more shown)")
    print(figures("memory load", memory, LOAD_TARGET_MS) + "  (50 save points)")
    print(figures("asked→shown", asks, ASK_TARGET_MS) + "  (the approval card in the page)")


if __name__ == "__main__":
    main()
