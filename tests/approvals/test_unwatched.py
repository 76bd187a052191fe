"""A question asked at an interface whose watchers all leave goes to the
person's channels as itself, after a grace that a reconnect stays within.

The agent is served by its host on its unix socket, the terminal attaches
over it with the real protocol, and Telegram is the fake Bot API.
"""

from __future__ import annotations

import asyncio

from noema.interfaces.host.attach import attach, socket_path
from noema.interfaces.host.host import WATCHERS_GRACE, Host
from noema.interfaces.host.protocol import Answer, ApprovalAsked, ApprovalSettled
from noema.providers.scripted import say

from .conftest import PERSON, hosted, question, seen_by_model, telegram_app, until
from .test_attach_away import ALARM, read_until

PLUMBER = "remind me to call the plumber in three hours"


def buttons_sent(server) -> int:
    return sum(1 for m in server.sent if m.buttons)


def test_the_grace_is_a_few_seconds():
    """Long enough for a page reload, short enough that the agent is not held."""
    assert 2.0 <= WATCHERS_GRACE <= 10.0


async def test_a_question_whose_watchers_left_goes_to_telegram_as_itself(tmp_path, server):
    script = [say("", ALARM), say("Asked on Telegram."), say("The alarm is set.")]
    async with hosted(tmp_path / "home", server, script, watchers_grace=1.0) as (host, app):
        chat = await attach(app.paths, client="chat")
        server.inject_text(PERSON, PLUMBER)
        inline = (await read_until(chat, lambda m: isinstance(m, ApprovalAsked)))[-1]
        assert inline.where == "" and inline.expires_at is not None
        assert buttons_sent(server) == 0  # asked in the terminal, not on Telegram
        await chat.connection.aclose()  # the person closed the terminal

        asked = await question(server)
        assert "call the plumber" in asked.plain
        await until(lambda: app.away.is_waiting(inline.approval), "the question placed")
        waiting = app.away.store.get(inline.approval)
        assert waiting is not None and waiting.state == "waiting"
        assert waiting.place == "on Telegram"
        assert abs(waiting.expires_at - inline.expires_at) < 1e-6  # the expiry it was asked with
        assert waiting.request["arguments"] == inline.arguments
        # The call returned the away result: the agent went on to its next answer.
        await until(lambda: any(f"approval {inline.approval}, asked on Telegram" in text
                                and "Not run yet" in text for text in seen_by_model(app)),
                    "the waiting result")
        await app.agent.idle()
        assert app.schedules.active() == []

        # A terminal catching up from before the question is told of it once, as asked away.
        caught_up = await attach(app.paths, client="chat", since=inline.seq - 1)
        seen = await read_until(caught_up, lambda m: isinstance(m, ApprovalAsked))
        assert [(m.approval, m.where) for m in seen if isinstance(m, ApprovalAsked)] \
            == [(inline.approval, "on Telegram")]
        await caught_up.connection.aclose()
        # A terminal that comes back sees it as a question asked away, and can answer it.
        again = await attach(app.paths, client="chat")
        shown = (await read_until(again, lambda m: isinstance(m, ApprovalAsked)))[-1]
        assert (shown.approval, shown.where) == (inline.approval, "on Telegram")
        assert shown.expires_at == waiting.expires_at
        await again.connection.send(Answer(approval=inline.approval, allow=True))
        settled = (await read_until(again, lambda m: isinstance(m, ApprovalSettled)))[-1]
        assert (settled.approval, settled.allowed, settled.by) == (inline.approval, True, "chat")
        await until(lambda: [s.reason for s in app.schedules.active()] == ["call the plumber"],
                    "the alarm set")
        await asyncio.to_thread(server.wait_for, lambda: any(
            mid == asked.message_id and "Answered in the terminal: allowed." in text
            for _, mid, text in server.edits), 30)
        await until(lambda: any(f"Approval {inline.approval}" in text and "ran" in text
                                for text in seen_by_model(app)), "the outcome's cycle")
        await again.connection.aclose()


async def test_a_watcher_back_within_the_grace_keeps_the_question_here(tmp_path, server):
    grace = 3.0
    script = [say("", ALARM), say("The alarm is set.")]
    async with hosted(tmp_path / "home", server, script, watchers_grace=grace) as (host, app):
        page = await attach(app.paths, client="web")
        server.inject_text(PERSON, PLUMBER)
        inline = (await read_until(page, lambda m: isinstance(m, ApprovalAsked)))[-1]
        await page.connection.aclose()  # a reload: the page leaves and comes straight back
        reloaded = await attach(app.paths, client="web", since=inline.seq)
        # Past the grace, it is still asked here only.
        await asyncio.sleep(grace + 1.0)
        assert buttons_sent(server) == 0
        assert app.away.store.get(inline.approval) is None
        assert app.agent.status().busy  # the call still waits for this answer
        await reloaded.connection.send(Answer(approval=inline.approval, allow=True))
        settled = (await read_until(reloaded, lambda m: isinstance(m, ApprovalSettled)))[-1]
        assert (settled.approval, settled.allowed, settled.by) == (inline.approval, True, "web")
        await until(lambda: [s.reason for s in app.schedules.active()] == ["call the plumber"],
                    "the alarm set")
        await app.agent.idle()
        assert buttons_sent(server) == 0
        await reloaded.connection.aclose()


async def test_a_question_left_unwatched_with_no_channel_to_ask_stays_here(tmp_path, server):
    """Telegram cannot ask (no chat configured): the question waits for a
    watcher to come back rather than being refused."""
    host = Host("ana", watchers_grace=0.5)
    app = telegram_app(tmp_path / "home", server, [say("", ALARM), say("The alarm is set.")],
                       listener=host)
    app.away.channels = []  # nobody of the person's can be asked away
    host.bind(app)
    await app.start()
    await host.serve(socket_path(app.paths))
    try:
        chat = await attach(app.paths, client="chat")
        server.inject_text(PERSON, PLUMBER)
        inline = (await read_until(chat, lambda m: isinstance(m, ApprovalAsked)))[-1]
        await chat.connection.aclose()
        await asyncio.sleep(1.5)
        assert app.agent.status().busy and buttons_sent(server) == 0
        back = await attach(app.paths, client="chat")
        shown = (await read_until(back, lambda m: isinstance(m, ApprovalAsked)))[-1]
        assert (shown.approval, shown.where) == (inline.approval, "")
        await back.connection.send(Answer(approval=inline.approval, allow=True))
        await until(lambda: [s.reason for s in app.schedules.active()] == ["call the plumber"],
                    "the alarm set")
        await back.connection.aclose()
    finally:
        try:
            await host.aclose()
        finally:
            await app.aclose()


async def test_a_host_that_stops_during_the_grace_sends_nothing_away(tmp_path, server):
    host = Host("ana", watchers_grace=1.0)
    app = telegram_app(tmp_path / "home", server, [say("", ALARM), say("Stopped.")],
                       listener=host)
    host.bind(app)
    await app.start()
    await host.serve(socket_path(app.paths))
    try:
        chat = await attach(app.paths, client="chat")
        server.inject_text(PERSON, PLUMBER)
        await read_until(chat, lambda m: isinstance(m, ApprovalAsked))
        await chat.connection.aclose()
        await host.aclose()  # the agent stops within the grace
        await asyncio.sleep(2.0)
        assert buttons_sent(server) == 0
        assert app.away.store.get(1) is None and not app.away.is_waiting(1)
        await app.agent.idle()
        assert any("the agent stopped while schedule_alarm waited" in text
                   for text in seen_by_model(app))
    finally:
        await app.aclose()


async def test_a_question_asked_while_the_page_reloads_waits_for_it(tmp_path, server):
    """The page left a moment before the agent asked (a reload): the question
    is asked here as if it were there, and the page back within the grace
    answers it; nothing goes to Telegram."""
    grace = 3.0
    script = [say("", ALARM), say("The alarm is set.")]
    async with hosted(tmp_path / "home", server, script, watchers_grace=grace) as (host, app):
        page = await attach(app.paths, client="web")
        before = host._seq
        await page.connection.aclose()  # the reload's leave
        await until(lambda: host.clients == 0, "the page gone")
        server.inject_text(PERSON, PLUMBER)
        await until(lambda: host._approvals, "the question asked")
        reloaded = await attach(app.paths, client="web", since=before)
        shown = (await read_until(reloaded, lambda m: isinstance(m, ApprovalAsked)))[-1]
        assert shown.where == ""  # asked here, not away
        await asyncio.sleep(grace + 1.0)  # past the grace: the page is back, so it stays
        assert buttons_sent(server) == 0
        assert app.away.store.get(shown.approval) is None
        await reloaded.connection.send(Answer(approval=shown.approval, allow=True))
        settled = (await read_until(reloaded, lambda m: isinstance(m, ApprovalSettled)))[-1]
        assert (settled.approval, settled.allowed, settled.by) == (shown.approval, True, "web")
        await until(lambda: [s.reason for s in app.schedules.active()] == ["call the plumber"],
                    "the alarm set")
        await reloaded.connection.aclose()


async def test_a_question_asked_just_after_the_page_left_goes_away_if_it_does_not_return(
        tmp_path, server):
    script = [say("", ALARM), say("Asked on Telegram.")]
    async with hosted(tmp_path / "home", server, script, watchers_grace=1.0) as (host, app):
        page = await attach(app.paths, client="web")
        await page.connection.aclose()
        await until(lambda: host.clients == 0, "the page gone")
        server.inject_text(PERSON, PLUMBER)
        asked = await question(server)  # after the grace, on Telegram
        assert "call the plumber" in asked.plain
        await until(lambda: any("asked on Telegram" in text and "Not run yet" in text
                                for text in seen_by_model(app)), "the waiting result")
        await app.agent.idle()
        assert app.schedules.active() == []
