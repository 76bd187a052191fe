"""The web page served for real, with an in-process agent over a scripted
model, in a thread of its own; Debian's Chromium driven by Playwright.

One server per test session and one browser per test module (the machine is
shared); each test gets a fresh browser context, so a fresh cookie jar.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from noema.app import App, build_app
from noema.config import AgentSection, Config
from noema.interfaces.web import UiServer
from noema.paths import AgentPaths
from noema.perception.settings import LogFileSettings, PerceptionSettings
from noema.providers.scripted import ScriptedProvider, ScriptedResponse
from noema.security.settings import AutonomySettings, FilesSettings, RootSettings

CHROMIUM = os.environ.get("NOEMA_CHROMIUM", "/usr/bin/chromium")
SCREENS = Path(__file__).resolve().parents[1] / "artifacts" / "screens"
WAIT = 20.0  # seconds: generous, the machine is shared
ZONE = "Asia/Tokyo"  # the person's zone: not the machine's, so the pages must use it
TOKEN_DELAY = 0.02  # seconds per scripted word: streaming is visible, Stop has time to land


def sign_in(credentials) -> tuple[dict[str, str], dict[str, str]]:
    """A session of its own for a test's HTTP client: its cookies, and the
    headers that carry its CSRF token for actions."""
    value, session = credentials.sessions.open("a test client")
    return {credentials.cookie: value}, {"x-csrf-token": session.csrf}


class LiveServer:
    """`UiServer` running in its own event loop thread; calls cross over safely."""

    def __init__(self, root: Path) -> None:
        self.workspace = root / "ws"
        self.log = root / "app.log"  # a sensor's source: channel "applog"
        self.log.write_text("")
        self.paths = AgentPaths.for_agent("ana", root / "home")
        self.model = ScriptedProvider([], token_delay_s=TOKEN_DELAY)
        config = Config(
            agent=AgentSection(timezone=ZONE),
            files=FilesSettings(roots=(RootSettings(path=self.workspace),)),
            autonomy=AutonomySettings(tools={"file_write": "ask"}),
            perception=PerceptionSettings(logs=[LogFileSettings(path=self.log, channel="applog",
                                                                poll_interval=0.2, window=1.0)]),
        )
        self.server = UiServer(self.paths, config, port=0,
                               build_app=functools.partial(build_app, provider=self.model))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="web-test", daemon=True)
        self.thread.start()
        self.address = self.call(self.server.start())
        self.base = self.address.split("/?", 1)[0]

    @property
    def app(self) -> App:
        return self.server.agent_app  # type: ignore[return-value]

    def call(self, coroutine, timeout: float = WAIT):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def script(self, *responses: ScriptedResponse) -> None:
        """Queue the model's next answers (in the server's loop, where it reads them)."""
        async def extend() -> None:
            self.model.extend(responses)

        self.call(extend())

    def idle(self) -> None:
        """Wait until the agent runs no cycle."""
        async def settle() -> None:
            while self.app.agent.status().busy:
                await asyncio.sleep(0.01)

        self.call(settle())

    def close(self) -> None:
        try:
            self.call(self.server.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(WAIT)
            self.loop.close()


@pytest.fixture(scope="session")
def live(tmp_path_factory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("web"))
    try:
        yield server
    finally:
        server.close()


# Per module, not per session: Playwright's synchronous API keeps an event
# loop running in this thread while it is open, and the asyncio tests that a
# test worker runs after this module need the thread without one.
@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (scripts/setup --tests installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser, live):
    """A fresh browser context that opened the printed address (so holds the cookie)."""
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    page = context.new_page()
    page.set_default_timeout(WAIT * 1000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(live.address)
    page.wait_for_selector("body[data-page]")
    try:
        yield page
    finally:
        context.close()
    assert not errors, f"the page's script failed: {errors}"


SIZES = {"desk": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(params=list(SIZES))
def sized(request, browser, live):
    """A fresh page of the session's server at a desk's or a phone's size: (name, page)."""
    phone = request.param == "phone"
    context = browser.new_context(viewport=SIZES[request.param], is_mobile=phone, has_touch=phone)
    page = context.new_page()
    page.set_default_timeout(WAIT * 1000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(live.address)
    page.wait_for_selector("body[data-page]")
    try:
        yield request.param, page
    finally:
        context.close()
    assert not errors, f"the page's script failed: {errors}"


def screenshot(page, name: str, *, full_page: bool = True) -> Path:
    """Save the page (or what the window shows) as a PNG under tests/artifacts/screens/."""
    SCREENS.mkdir(parents=True, exist_ok=True)
    path = SCREENS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


@contextlib.contextmanager
def own_ui(browser, paths: AgentPaths, config: Config, mode: str, viewport=None):
    """A `noema ui` server of the test's own, in a loop of its own, and a fresh
    page (of `viewport`'s size, if given) that opened its address: (server, page, address)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = UiServer(paths, config, port=0)
    try:
        address = asyncio.run_coroutine_threadsafe(server.start(), loop).result(WAIT)
        assert server.mode == mode
        context = browser.new_context(**({"viewport": viewport} if viewport else {}))
        try:
            page = context.new_page()
            page.goto(address)
            yield server, page, address
        finally:
            context.close()
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(WAIT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)
