"""With no model configured, the page says what to set, offers the settings and
runs the offline demo live."""

from __future__ import annotations

from playwright.sync_api import expect

from noema.config import Config
from noema.paths import AgentPaths
from noema.security.settings import FilesSettings, RootSettings

from .conftest import WAIT, own_ui, screenshot


def test_with_no_model_the_page_says_what_to_set(browser, tmp_path):
    paths = AgentPaths.for_agent("new", tmp_path / "home")
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)))
    with own_ui(browser, paths, config, "first-run") as (_, page, _address):
        card = page.locator(".first-run")
        expect(card).to_contain_text("no reasoning model is configured")
        expect(card).to_contain_text("models.reasoning.provider")
        screenshot(page, "first-run")

        # The offline demo runs here, its transcript shown as it is written.
        card.get_by_role("button", name="Run the offline demo here").click()
        output = card.locator("#demo-output")
        # The demo's process starts Python and imports the stack first: allow for a busy machine.
        expect(output.locator("h2").first).to_have_text("1. A conversation with tools",
                                                        timeout=WAIT * 1000)
        expect(output).to_contain_text("person> Good morning! What time is it in Madrid")
        expect(output).to_contain_text("· get_current_time")
        expect(card.locator("#demo-state")).to_have_text("The demo is running…")  # live
        expect(output.locator("h2").nth(1)).to_contain_text("2. The process is killed",
                                                            timeout=WAIT * 1000)
        screenshot(page, "first-run-demo")
        card.get_by_role("button", name="Stop the demo").click()
        expect(card.locator("#demo-state")).to_contain_text("The demo ended early",
                                                            timeout=WAIT * 1000)
        expect(card.get_by_role("button", name="Run the offline demo here")).to_be_enabled()
        card.get_by_role("link", name="settings page").click()
        expect(page.locator('.field[data-key="models.reasoning.provider"]')).to_be_visible()
