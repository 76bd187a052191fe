"""A question asked on Telegram while no page watched, answered on the page
opened afterwards: the card is pinned above the composer (its buttons in the
window, on a laptop and on a phone), says where it was asked and when it
expires, Allow runs the call, and the Telegram message says where it was
answered. The real server and agent, the fake Bot API, Debian's Chromium."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from noema.app import App, build_app
from noema.config import validate
from noema.interfaces.web import UiServer
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider, call, say
from tests.fakes.telegram_server import TOKEN, FakeTelegramServer

from .conftest import WAIT, screenshot

PERSON = 4242
ALARM = call("schedule_alarm", reason="call the plumber", when="in 3 hours")


class TelegramAgent:
    """`noema ui` with its agent in process, reachable on the fake Telegram,
    whose alarms need the person's yes; in a loop thread of its own."""

    def __init__(self, root: Path, telegram: FakeTelegramServer) -> None:
        self.paths = AgentPaths.for_agent("ana", root / "home")
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.paths.secrets_file.write_text(f'TELEGRAM_BOT_TOKEN = "{TOKEN}"\n')
        os.chmod(self.paths.secrets_file, 0o600)
        self.model = ScriptedProvider([say("", ALARM), say("I asked you on Telegram."),
                                       say("The plumber alarm is set.")])
        config = validate({
            "telegram": {"chat_ids": [PERSON], "base_url": telegram.base_url,
                         "quiet_window_s": 0.1, "poll_timeout_s": 1},
            "autonomy": {"tools": {"schedule_alarm": "ask"}, "approval_timeout_s": 3600},
        }, "t")
        self.server = UiServer(self.paths, config, port=0,
                               build_app=functools.partial(build_app, provider=self.model))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="web-away", daemon=True)
        self.thread.start()
        self.address = self.call(self.server.start())

    @property
    def app(self) -> App:
        return self.server.agent_app  # type: ignore[return-value]

    def call(self, coroutine, timeout: float = WAIT):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def idle(self) -> None:
        self.call(self.app.agent.idle())

    def alarms(self) -> list[str]:
        """The alarms set, read in the agent's thread (where its store lives)."""
        async def read() -> list[str]:
            return [s.reason for s in self.app.schedules.active()]

        return self.call(read())

    def close(self) -> None:
        try:
            self.call(self.server.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(WAIT)
            self.loop.close()


@pytest.fixture
def agent(tmp_path, telegram_server) -> Iterator[TelegramAgent]:
    telegram_server.reset()
    running = TelegramAgent(tmp_path, telegram_server)
    try:
        yield running
    finally:
        running.close()


def asked_on_telegram(agent: TelegramAgent, telegram: FakeTelegramServer):
    """The person writes on Telegram with no page open: the question goes there."""
    telegram.inject_text(PERSON, "remind me to call the plumber in three hours")
    telegram.wait_for(lambda: any(m.buttons for m in telegram.sent), WAIT)
    asked = next(m for m in telegram.sent if m.buttons)
    telegram.wait_for(lambda: agent.app.away.is_waiting(1), WAIT)
    agent.idle()  # the agent went on: the call does not hold the cycle
    return asked


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800},
                                      {"width": 390, "height": 844}],
                         ids=["laptop", "phone"])
def test_a_question_asked_on_telegram_is_answered_on_the_page_opened_later(
        browser, agent, telegram_server, viewport):
    asked = asked_on_telegram(agent, telegram_server)
    assert "call the plumber" in asked.plain

    context = browser.new_context(viewport=viewport)
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT * 1000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(agent.address)
        card = page.locator("#approvals .approval")
        expect(card).to_have_count(1)
        expect(card.locator(".ask")).to_have_text("ana asks: Set an alarmschedule_alarm")
        expect(card.locator(".arguments")).to_contain_text("call the plumber")
        when = card.locator(".when")
        expect(when).to_contain_text("Asked on Telegram while you were away; answer here or there")
        expect(when).to_contain_text("Unanswered, it is refused at")
        expect(when).to_contain_text("(in 60 minutes)")

        # Pinned above the composer, its buttons inside the window.
        allow = card.locator("button.allow")
        box, composer = card.bounding_box(), page.locator("#composer").bounding_box()
        assert box is not None and composer is not None
        assert box["y"] + box["height"] <= composer["y"] + 1
        for button in (allow, card.locator("button.refuse")):
            shown = button.bounding_box()
            assert shown is not None
            assert 0 <= shown["x"] and shown["x"] + shown["width"] <= viewport["width"]
            assert 0 <= shown["y"] and shown["y"] + shown["height"] <= viewport["height"]
        screenshot(page, f"approval-away-{viewport['width']}", full_page=False)

        allow.click()
        expect(card).to_have_count(0)
        expect(page.locator(".line.approved")).to_contain_text("Allowed on this page.")
        telegram_server.wait_for(lambda: any(
            mid == asked.message_id and "Answered on the web page: allowed." in text
            for _, mid, text in telegram_server.edits), WAIT)
        telegram_server.wait_for(lambda: agent.alarms() == ["call the plumber"], WAIT)
        # The outcome reaches the agent as an event, and its answer the page.
        expect(page.locator(".turn.assistant").last).to_contain_text(
            "The plumber alarm is set.")
        assert not errors, f"the page's script failed: {errors}"
    finally:
        context.close()


def open_page(browser, address: str, viewport: dict):
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.set_default_timeout(WAIT * 1000)
    page.goto(address)
    page.wait_for_selector("body[data-page]")
    return context, page


def test_a_question_on_a_tab_that_was_closed_goes_to_telegram_and_waits_for_the_next_page(
        browser, agent, telegram_server):
    viewport = {"width": 1280, "height": 800}
    context, page = open_page(browser, agent.address, viewport)
    try:
        expect(page.locator("#composer")).to_be_visible()
        telegram_server.inject_text(PERSON, "remind me to call the plumber in three hours")
        card = page.locator("#approvals .approval")
        expect(card).to_have_count(1)  # asked on the page, which watches
        expect(card.locator(".when")).to_contain_text("Unanswered, it is refused at")
        expect(card.locator(".when")).not_to_contain_text("Telegram")
        assert not any(m.buttons for m in telegram_server.sent)
    finally:
        context.close()  # the person closed the tab

    # After the grace, the same question is on Telegram, and the agent went on.
    telegram_server.wait_for(lambda: any(m.buttons for m in telegram_server.sent), WAIT)
    asked = next(m for m in telegram_server.sent if m.buttons)
    assert "call the plumber" in asked.plain
    telegram_server.wait_for(lambda: agent.app.away.is_waiting(1), WAIT)
    agent.idle()

    context, page = open_page(browser, agent.address, viewport)
    try:
        card = page.locator("#approvals .approval")
        expect(card).to_have_count(1)
        expect(card.locator(".when")).to_contain_text("Asked on Telegram while you were away")
        screenshot(page, "approval-moved-away", full_page=False)
        card.locator("button.allow").click()
        expect(card).to_have_count(0)
        telegram_server.wait_for(lambda: any(
            mid == asked.message_id and "Answered on the web page: allowed." in text
            for _, mid, text in telegram_server.edits), WAIT)
        telegram_server.wait_for(lambda: agent.alarms() == ["call the plumber"], WAIT)
    finally:
        context.close()
