"""Help on every page opens the user guide at the page's topic, served by the
page itself from the package (no site built, nothing fetched from elsewhere);
its links move between the guide's pages and land on their headings."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from .conftest import WAIT, own_ui, screenshot
from .test_first_run import new_agent

TOPICS = {"/": ("/guide/", "Noema user guide"), "/memory": ("/guide/memory", "Memory"),
          "/senses": ("/guide/senses", "Senses"),
          "/files": ("/guide/hands-and-safety", "Hands and safety"),
          "/settings": ("/guide/configuration", "Configuration")}


@pytest.mark.parametrize("where", TOPICS)
def test_help_opens_the_guide_at_the_topic_of_the_page(page, live, where):
    address, title = TOPICS[where]
    page.goto(live.base + where)
    page.locator("header nav a.help").click()
    expect(page).to_have_url(live.base + address)
    expect(page.locator("article.guide-page h1")).to_have_text(title)
    expect(page.locator("header nav a.help")).to_have_attribute("aria-current", "page")


def test_a_guide_page_links_to_another_and_to_its_heading(page, live):
    page.goto(live.base + "/guide/memory")
    screenshot(page, "guide-memory")
    page.locator('article.guide-page a[href="/guide/senses#the-archive"]').click()
    expect(page).to_have_url(live.base + "/guide/senses#the-archive")
    expect(page.locator("#the-archive")).to_be_in_viewport()
    page.locator(".guide-contents a", has_text="Troubleshooting").click()
    expect(page.locator("article.guide-page h1")).to_have_text("Troubleshooting")
    expect(page.locator(".guide-contents a[aria-current=page]")).to_have_text("Troubleshooting")


def test_a_page_the_guide_does_not_have_says_so(page, live):
    response = page.goto(live.base + "/guide/nothing-here")
    assert response is not None and response.status == 404
    expect(page.locator("article.guide-page")).to_contain_text(
        "The guide has no page called “nothing-here”")


def test_the_guide_fits_a_phone_screen(browser, live):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                  has_touch=True, device_scale_factor=2)
    phone = context.new_page()
    phone.set_default_timeout(WAIT * 1000)
    try:
        phone.goto(live.address)
        phone.goto(live.base + "/guide/senses")
        expect(phone.locator("article.guide-page h1")).to_have_text("Senses")
        overflow = phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the guide is {overflow}px wider than the screen"
        screenshot(phone, "guide-senses-phone", full_page=False)  # what the screen shows first
    finally:
        context.close()


def test_before_any_model_help_opens_the_guide_on_choosing_one(browser, tmp_path):
    paths, config = new_agent(tmp_path)
    with own_ui(browser, paths, config, "first-run") as (_, page, address):
        page.set_default_timeout(WAIT * 1000)
        page.locator("header nav a.help").click()
        expect(page).to_have_url(address.split("/?")[0] + "/guide/models")
        expect(page.locator("#local-servers")).to_have_text("Local servers")


def test_the_guide_is_behind_the_token_as_every_page_is(live):
    with httpx.Client(base_url=live.base, timeout=WAIT, follow_redirects=False) as client:
        for path in ("/guide", "/guide/memory", "/static/guide.css"):
            assert client.get(path).status_code == 401, path
