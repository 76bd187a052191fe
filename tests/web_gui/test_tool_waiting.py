"""A call whose question went to Telegram while no page watched: on the page
opened afterwards its one-line tool log reads as waiting for the person's
answer (never ✓), the same after a reload, on a laptop and on a phone; once
the person answers, the line says what they answered (live and after a
reload), and what the allowed call did is a turn of its own. Real server and agent, the fake Bot
API, Debian's Chromium."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import WAIT, screenshot
from .test_approval_away import PERSON, TelegramAgent, asked_on_telegram


@pytest.fixture
def agent(tmp_path, telegram_server: FakeTelegramServer) -> Iterator[TelegramAgent]:
    telegram_server.reset()
    running = TelegramAgent(tmp_path, telegram_server)
    try:
        yield running
    finally:
        running.close()


def expect_waiting(line) -> None:
    expect(line).to_have_attribute("data-state", "waiting")
    expect(line.locator(".outcome-mark")).to_have_text("◷")
    expect(line.locator("summary")).to_contain_text("Set an alarm")
    expect(line.locator(".waits")).to_have_text("— not run yet, waiting for your answer")
    expect(line.locator("summary")).not_to_contain_text("✓")


def expect_answered(line, state: str, mark: str, words: str) -> None:
    expect(line).to_have_attribute("data-state", state)
    expect(line.locator(".outcome-mark")).to_have_text(mark)
    expect(line.locator(".waits")).to_have_text(words)


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800},
                                      {"width": 390, "height": 844}],
                         ids=["laptop", "phone"])
def test_a_call_asked_away_reads_as_waiting_before_and_after_a_reload(
        browser, agent, telegram_server, viewport):
    asked_on_telegram(agent, telegram_server)
    context = browser.new_context(viewport=viewport)
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT * 1000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(agent.address)
        line = page.locator(".turn.tool", has_text="schedule_alarm")
        expect(line).to_have_count(1)
        expect_waiting(line)
        # The summary fits the window: the words are read, not cut off.
        box = line.locator(".waits").bounding_box()
        assert box is not None and box["x"] + box["width"] <= viewport["width"]
        line.locator("summary").click()
        expect(line.locator(".part").last).to_have_text("Result (not run yet)")
        expect(line.locator("pre.result")).to_contain_text("asked on Telegram")
        screenshot(page, f"tool-waiting-{viewport['width']}", full_page=False)

        page.reload()
        line = page.locator(".turn.tool", has_text="schedule_alarm")
        expect(line).to_have_count(1)
        expect_waiting(line)
        screenshot(page, f"tool-waiting-reloaded-{viewport['width']}", full_page=False)

        # The person allows it here: the line says so at once, and the outcome
        # is a turn of its own below.
        page.locator("#approvals .approval button.allow").click()
        expect_answered(line, "allowed", "✓", "— allowed later; its outcome is below")
        telegram_server.wait_for(lambda: agent.alarms() == ["call the plumber"], WAIT)
        expect(page.locator(".turn.assistant").last).to_contain_text(
            "The plumber alarm is set.")
        screenshot(page, f"tool-waiting-outcome-{viewport['width']}", full_page=False)
        page.reload()
        line = page.locator(".turn.tool", has_text="schedule_alarm")
        expect_answered(line, "allowed", "✓", "— allowed later; its outcome is below")
        assert not errors, f"the page's script failed: {errors}"
    finally:
        context.close()


def test_a_call_refused_on_telegram_reads_as_refused_on_the_page(
        browser, agent, telegram_server):
    asked = asked_on_telegram(agent, telegram_server)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT * 1000)
        page.goto(agent.address)
        line = page.locator(".turn.tool", has_text="schedule_alarm")
        expect_waiting(line)
        telegram_server.inject_press(PERSON, PERSON, asked.message_id,
                                     dict(asked.buttons)["Refuse"])
        expect_answered(line, "refused", "✗", "— refused, not run")  # live, from the host
        page.reload()
        line = page.locator(".turn.tool", has_text="schedule_alarm")
        expect_answered(line, "refused", "✗", "— refused, not run")
        screenshot(page, "tool-waiting-refused-1280", full_page=False)
        assert agent.alarms() == []
    finally:
        context.close()
