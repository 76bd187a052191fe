"""Every page on a phone-sized screen, and the chat by keyboard alone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from noema.providers.scripted import say

from .conftest import WAIT, screenshot

PAGES = {"chat": "/", "memory": "/memory", "senses": "/senses", "files": "/files",
         "settings": "/settings"}


@pytest.fixture
def phone(browser, live):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                  has_touch=True, device_scale_factor=2)
    page = context.new_page()
    page.set_default_timeout(WAIT * 1000)
    page.goto(live.address)
    try:
        yield page
    finally:
        context.close()


@pytest.mark.parametrize("name", PAGES)
def test_every_page_fits_a_phone_screen(phone, live, name):
    phone.goto(live.base + PAGES[name])
    expect(phone.locator("nav a[aria-current=page]")).to_have_count(1)
    overflow = phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{name} is {overflow}px wider than the screen"
    screenshot(phone, f"{name}-phone")


def test_the_chat_works_by_keyboard_alone(page, live):
    live.script(say("Typed and sent without a mouse."))
    for _ in range(20):
        if page.evaluate("document.activeElement && document.activeElement.id") == "message":
            break
        page.keyboard.press("Tab")
    else:
        raise AssertionError("the message box cannot be reached with Tab")
    page.keyboard.type("Hello by keyboard")
    page.keyboard.press("Enter")
    expect(page.locator(".turn.assistant .body").last).to_have_text("Typed and sent without a mouse.")
    live.idle()
