"""`noema ui` beside a running agent: the page attaches over the agent's
socket instead of starting a second agent."""

from __future__ import annotations

import asyncio
import threading

import pytest
from playwright.sync_api import expect

from noema.app import build_app
from noema.config import Config
from noema.interfaces.host.attach import socket_path
from noema.interfaces.host.host import Host
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider, say
from noema.security.settings import FilesSettings, RootSettings

from .conftest import WAIT, own_ui


@pytest.fixture
def running_agent(tmp_path):
    """An agent served on its socket, as `noema run` serves it, in a loop of its own."""
    paths = AgentPaths.for_agent("bo", tmp_path / "home")
    model = ScriptedProvider([say("Hello from the **running** agent.")], token_delay_s=0.01)
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start():
        host = Host(paths.name)
        app = build_app(paths, config, provider=model, listener=host)
        host.bind(app)
        await app.start()
        await host.serve(socket_path(paths))
        return host, app

    host, app = asyncio.run_coroutine_threadsafe(start(), loop).result(WAIT)
    try:
        yield paths, config
    finally:
        async def stop():
            await host.aclose()
            await app.aclose()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(WAIT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)


def test_the_page_attaches_to_a_running_agent(browser, running_agent):
    paths, config = running_agent
    with own_ui(browser, paths, config, "attached") as (server, page, _):
        assert server.agent_app is None
        page.fill("#message", "Are you there?")
        page.press("#message", "Enter")
        expect(page.locator(".turn.assistant strong")).to_have_text("running")
        expect(page.locator("#context")).to_contain_text("tokens")


def test_a_sense_is_silenced_and_started_from_the_page_beside_a_running_agent(
        browser, running_agent):
    """Silence and start travel over the agent's socket, as `noema run` serves it."""
    paths, config = running_agent
    with own_ui(browser, paths, config, "attached") as (_, page, address):
        page.goto(address.split("/?", 1)[0] + "/senses")
        row = page.locator('tr[data-channel="clock"]')
        expect(row.locator(".state")).to_have_text("active")
        row.locator("select").select_option("1h")
        row.get_by_role("button", name="Silence").click()
        expect(page.locator("#outcome")).to_contain_text("clock is silenced until")
        page.reload()
        expect(row.locator(".state")).to_contain_text("silenced until")
        row.get_by_role("button", name="Start").click()
        expect(page.locator("#outcome")).to_have_text("clock is active again.")
        page.reload()
        expect(row.locator(".state")).to_have_text("active")
        fixed = page.locator('tr[data-channel="scheduler.urgent"]')
        expect(fixed.get_by_role("button", name="Silence")).to_have_count(0)  # not offered…
        expect(fixed.locator(".control")).to_have_text("always heard")
        answer = page.evaluate("""() => noema.post("/api/senses/silence",
            {channel: "scheduler.urgent", duration: "1h"})""")  # …and refused if asked anyway
        assert answer["status"] == 400 and "cannot be silenced" in answer["body"]["error"]
