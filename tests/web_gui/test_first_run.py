"""With no model configured, the page says what to set and offers the settings."""

from __future__ import annotations

import asyncio
import threading

from playwright.sync_api import expect

from noema.config import Config
from noema.interfaces.web import UiServer
from noema.paths import AgentPaths
from noema.security.settings import FilesSettings, RootSettings

from .conftest import WAIT, screenshot


def test_with_no_model_the_page_says_what_to_set(browser, tmp_path):
    paths = AgentPaths.for_agent("new", tmp_path / "home")
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = UiServer(paths, config, port=0)
    try:
        address = asyncio.run_coroutine_threadsafe(server.start(), loop).result(WAIT)
        assert server.mode == "first-run"
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(address)
            card = page.locator(".first-run")
            expect(card).to_contain_text("no reasoning model is configured")
            expect(card).to_contain_text("models.reasoning.provider")
            screenshot(page, "first-run")
            card.get_by_role("link", name="settings page").click()
            expect(page.locator('form[data-key="models.reasoning.provider"]')).to_be_visible()
        finally:
            context.close()
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(WAIT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)
