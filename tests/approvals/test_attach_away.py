"""An interface that attaches while a question waits on Telegram sees it and
can answer it; the first answer from anywhere wins, the others are told.

The agent is served by its host on its unix socket, the interfaces attach
over it with the real protocol, and Telegram is the fake Bot API.
"""

from __future__ import annotations

import asyncio

from noema.interfaces.host.attach import attach
from noema.interfaces.host.host import Host
from noema.interfaces.host.protocol import (Answer, ApprovalAsked, ApprovalSettled, Hello, Notice,
                                            Welcome)
from noema.providers.scripted import call, say

from .conftest import PERSON, hosted, question, seen_by_model, telegram_app, until

ALARM = call("schedule_alarm", reason="call the plumber", when="in 3 hours")


async def read_until(attached, done, wait: float = 30.0) -> list:
    seen = []

    async def read() -> list:
        async for message in attached.connection.messages():
            seen.append(message)
            if done(message):
                return seen
        raise AssertionError(f"the connection ended first; saw {[m.type for m in seen]}")

    return await asyncio.wait_for(read(), wait)


async def test_a_page_that_attaches_sees_the_question_and_its_answer_settles_telegram(
        tmp_path, server):
    home = tmp_path / "home"
    # No interface is attached yet: the host asks away.
    script = [say("", ALARM), say("Asked on Telegram."), say("The plumber alarm is set.")]
    async with hosted(home, server, script) as (host, app):
        server.inject_text(PERSON, "remind me to call the plumber in three hours")
        asked = await question(server)
        await until(lambda: app.away.is_waiting(1), "the question waiting")
        await app.agent.idle()
        # The page attaches after the question was asked: its welcome holds it.
        web = await attach(app.paths, client="web")
        pending = (await read_until(web, lambda m: isinstance(m, ApprovalAsked)))[-1]
        assert pending.approval == 1 and pending.tool == "schedule_alarm"
        assert "call the plumber" in pending.arguments
        chat = await attach(app.paths, client="chat")
        assert (await read_until(chat, lambda m: isinstance(m, ApprovalAsked)))[-1].approval == 1
        await web.connection.send(Answer(approval=1, allow=True))
        settled = (await read_until(chat, lambda m: isinstance(m, ApprovalSettled)))[-1]
        assert (settled.approval, settled.allowed, settled.by) == (1, True, "web")
        await until(lambda: [s.reason for s in app.schedules.active()] == ["call the plumber"],
                    "the alarm set")
        # The Telegram message says where it was answered; its buttons take nothing more.
        await asyncio.to_thread(server.wait_for, lambda: any(
            mid == asked.message_id and "Answered on the web page: allowed." in text
            for _, mid, text in server.edits), 30)
        server.inject_press(PERSON, PERSON, asked.message_id, dict(asked.buttons)["Refuse"])
        await asyncio.to_thread(server.wait_for, lambda: len(server.pressed) >= 1, 30)
        assert "closed" in server.pressed[-1][1]
        # The terminal's answer after the page's is told it came too late.
        await chat.connection.send(Answer(approval=1, allow=False))
        late = (await read_until(chat, lambda m: isinstance(m, Notice)))[-1]
        assert "closed" in late.text and "on the web page" in late.text
        await until(lambda: any("Approval 1" in text and "on the web page" in text
                                for text in seen_by_model(app)), "the outcome's cycle")
        assert len(app.schedules.active()) == 1
        await web.connection.aclose()
        await chat.connection.aclose()


async def test_a_connection_that_only_sends_requests_is_not_someone_to_ask(tmp_path, server):
    """The web server's own connection (for the page's requests) watches
    nothing: with it alone attached, the question still goes to Telegram."""
    host = Host("ana")
    app = telegram_app(tmp_path / "home", server, [say("", ALARM), say("Asked on Telegram.")],
                       listener=host)
    host.bind(app)
    await app.start()
    try:
        control = host.connect("web")
        await control.send(Hello(client="web", watching=False))
        replies = control.messages()
        assert isinstance(await anext(replies), Welcome)
        server.inject_text(PERSON, "remind me to call the plumber in three hours")
        asked = await question(server)
        assert "call the plumber" in asked.plain
        await until(lambda: app.away.is_waiting(1), "the question waiting")
        await app.agent.idle()
        await control.aclose()
    finally:
        try:
            await host.aclose()
        finally:
            await app.aclose()
