"""Browsers signed in, from the settings page: each browser listed as its own
session, another browser's ended with a click, this one's signed out."""

from __future__ import annotations

from playwright.sync_api import expect

from .conftest import WAIT, screenshot


def test_a_browser_ends_another_s_session_then_signs_out(browser, live, page):
    other = browser.new_context()
    elsewhere = other.new_page()
    elsewhere.set_default_timeout(WAIT * 1000)
    try:
        elsewhere.goto(live.address)  # a second browser, its own token exchange
        page.goto(f"{live.base}/settings#section-sessions")
        mine = page.locator("ul.sessions li", has_text="(this browser)")
        expect(mine).to_have_count(1)
        others = page.locator("ul.sessions li").filter(has_not_text="(this browser)")
        last = others.last
        expect(last.locator("button.end-session")).to_have_text("End")
        screenshot(page, "settings-sessions")
        last.locator("button.end-session").click()
        expect(page.locator(".sessions-outcome")).to_contain_text("has ended")
        answer = elsewhere.goto(f"{live.base}/")
        assert answer.status == 403 and "session has ended" in elsewhere.content()
        mine.locator("button.end-session").click()
        expect(page.locator("main")).to_contain_text("Signed out")
        assert page.goto(f"{live.base}/settings").status in (401, 403)
    finally:
        other.close()
