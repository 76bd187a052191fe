"""A server's failure is said in words: its HTML body (a traceback, a proxy's
page) is never shown on the page."""

from __future__ import annotations

from playwright.sync_api import expect

from .conftest import screenshot

BROKEN = ("<html><head><title>500 Internal Server Error</title></head><body><h1>Internal "
          "Server Error</h1><pre>Traceback (most recent call last): File \"/srv/app.py\"</pre>"
          "</body></html>")


def test_a_server_error_page_is_said_in_words_never_echoed(sized, live):
    name, page = sized
    page.route("**/api/settings", lambda route: route.fulfill(
        status=500, body=BROKEN, headers={"content-type": "text/html"}))
    page.goto(f"{live.base}/settings")
    section = page.locator("#section-shell")
    section.get_by_role("button", name="Save commands").click()
    outcome = section.locator(".outcome.error")
    expect(outcome).to_have_text("The server failed (error 500); its log says why.")
    for raw in ("<html", "Traceback", "Internal Server Error", "/srv/app.py"):
        expect(section).not_to_contain_text(raw)
    outcome.scroll_into_view_if_needed()
    screenshot(page, f"error-500-{name}", full_page=False)
