"""A question asked on Telegram while nobody is at the machine: the agent goes
on with other events while it waits, the person's button runs the call, and
the outcome reaches the model as an event.

The whole app runs against the fake Bot API on loopback with the real
library and a scripted model; the verdicts come from the schedules store
(the alarm is set or not), from what the bot sent, edited and answered, and
from the requests the model received.
"""

from __future__ import annotations

import asyncio

from noema.providers.scripted import call, say

from .conftest import PERSON, STRANGER, question, seen_by_model, telegram_app, until

ALARM = call("schedule_alarm", reason="water the plants", when="in 2 hours")


def alarms(app) -> list[str]:
    return [s.reason for s in app.schedules.active()]


def result_of(app, tool: str) -> str | None:
    for turn in app.session.turns:
        if turn.tool_name == tool and turn.kind.value == "tool_result":
            return turn.content
    return None


async def test_the_agent_answers_another_message_while_a_question_waits_then_the_press_runs_it(
        tmp_path, server):
    app = telegram_app(tmp_path / "home", server, [
        say("", ALARM), say("I asked you on Telegram."), say("It is noon."),
        say("The alarm is set."),
    ])
    try:
        await app.start()
        server.inject_text(PERSON, "remind me to water the plants in two hours")
        asked = await question(server)
        assert "schedule_alarm" in asked.plain and "water the plants" in asked.plain
        # The call did not wait in the cycle: the model was told at once.
        await until(lambda: result_of(app, "schedule_alarm") is not None, "the waiting result")
        waiting = result_of(app, "schedule_alarm")
        assert "approval 1" in waiting and "on Telegram" in waiting and "expires" in waiting
        await app.agent.idle()
        assert alarms(app) == []
        # A second message starts and finishes a cycle while the question waits.
        server.inject_text(PERSON, "what time is it?")
        await asyncio.to_thread(server.wait_for,
                                lambda: any(m.plain == "It is noon." for m in server.sent), 30)
        assert alarms(app) == [] and app.away.is_waiting(1)
        server.inject_press(PERSON, PERSON, asked.message_id, dict(asked.buttons)["Allow"])
        await until(lambda: alarms(app) == ["water the plants"], "the alarm set")
        # The outcome came to the model as an event, with the call's result in it.
        await until(lambda: len(app.provider.requests) >= 4, "the outcome's cycle")
        told = seen_by_model(app)
        outcome = next(text for text in told if "Approval 1" in text)
        assert "allowed it on Telegram" in outcome and "it ran" in outcome
        assert "Alarm #1 set" in outcome
        await app.agent.idle()
        await asyncio.to_thread(server.wait_for, lambda: any(
            mid == asked.message_id and text.endswith("You allowed it.")
            for _, mid, text in server.edits), 30)
        assert any(text == "Allowed." for _, text in server.pressed)
    finally:
        await app.aclose()


async def test_a_strangers_press_is_refused_and_said_so_and_the_persons_refusal_is_reported(
        tmp_path, server):
    app = telegram_app(tmp_path / "home", server, [
        say("", ALARM), say("Waiting for you."), say("Understood, no alarm."),
    ])
    try:
        await app.start()
        server.inject_text(PERSON, "remind me to water the plants in two hours")
        asked = await question(server)
        buttons = dict(asked.buttons)
        # Someone who got hold of the button data, in their own chat and in the person's.
        server.inject_press(STRANGER, STRANGER, asked.message_id, buttons["Allow"])
        server.inject_press(PERSON, STRANGER, asked.message_id, buttons["Allow"])
        await asyncio.to_thread(server.wait_for, lambda: len(server.pressed) >= 2, 30)
        assert all("Only the person" in text for _, text in server.pressed)
        assert app.away.is_waiting(1) and alarms(app) == []
        server.inject_press(PERSON, PERSON, asked.message_id, buttons["Refuse"])
        await until(lambda: len(app.provider.requests) >= 3, "the refusal's cycle")
        outcome = next(text for text in seen_by_model(app) if "Approval 1" in text)
        assert "refused it on Telegram" in outcome and "not run" in outcome
        assert alarms(app) == []
        # A second press on the settled question is told so, and does nothing.
        server.inject_press(PERSON, PERSON, asked.message_id, buttons["Allow"])
        await asyncio.to_thread(server.wait_for, lambda: len(server.pressed) >= 4, 30)
        assert "closed" in server.pressed[-1][1]
        await app.agent.idle()
        assert alarms(app) == []
    finally:
        await app.aclose()


async def test_an_expired_question_is_reported_and_a_late_press_is_refused(tmp_path, server):
    app = telegram_app(tmp_path / "home", server, [
        say("", ALARM), say("Waiting for you."), say("It expired; I will ask later."),
    ], timeout_s=1.0)
    try:
        await app.start()
        server.inject_text(PERSON, "remind me to water the plants in two hours")
        asked = await question(server)
        await asyncio.to_thread(server.wait_for, lambda: any(
            mid == asked.message_id and "No answer came in time" in text
            for _, mid, text in server.edits), 30)
        await until(lambda: len(app.provider.requests) >= 3, "the expiry's cycle")
        outcome = next(text for text in seen_by_model(app) if "Approval 1" in text)
        assert "nobody answered within 1 minute" in outcome and "not run" in outcome
        server.inject_press(PERSON, PERSON, asked.message_id, dict(asked.buttons)["Allow"])
        await asyncio.to_thread(server.wait_for, lambda: len(server.pressed) >= 1, 30)
        assert "closed" in server.pressed[-1][1]
        await app.agent.idle()
        assert alarms(app) == []
    finally:
        await app.aclose()


async def test_a_question_pending_at_a_restart_expires_and_is_reported_once(tmp_path, server):
    home = tmp_path / "home"
    first = telegram_app(home, server, [say("", ALARM), say("Waiting for you.")])
    try:
        await first.start()
        server.inject_text(PERSON, "remind me to water the plants in two hours")
        asked = await question(server)
        await until(lambda: result_of(first, "schedule_alarm") is not None,
                    "the waiting result")
        await first.agent.idle()
    finally:
        await first.aclose()
    second = telegram_app(home, server, [say("It expired with the restart.")])
    try:
        await second.start()
        # Its buttons go, and the message says why.
        await asyncio.to_thread(server.wait_for, lambda: any(
            mid == asked.message_id and "restarted" in text for _, mid, text in server.edits),
            30)
        await until(lambda: len(second.provider.requests) >= 1, "the outcome's cycle")
        outcome = next(text for text in seen_by_model(second) if "Approval 1" in text)
        assert "restarted before the person answered" in outcome and "not run" in outcome
        # A press on the old question runs nothing and is told so.
        server.inject_press(PERSON, PERSON, asked.message_id, dict(asked.buttons)["Allow"])
        await asyncio.to_thread(server.wait_for, lambda: len(server.pressed) >= 1, 30)
        assert "closed" in server.pressed[-1][1]
        await second.agent.idle()
        assert alarms(second) == []
        # The archive holds the sensor's place with the event: not reported again.
        assert second.pipeline.archive.bookmark("sensor:approvals").load() == {"through": 1}
    finally:
        await second.aclose()
    third = telegram_app(home, server, [say("Nothing new.")])
    try:
        await third.start()
        await until(lambda: third.hub.running("approvals"), "the approvals sensor")
        await asyncio.sleep(0.5)
        await third.agent.idle()
        assert not any("Approval 1" in text for text in seen_by_model(third))
    finally:
        await third.aclose()
