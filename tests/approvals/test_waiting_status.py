"""A call whose question went to the person's channels is marked as waiting
(a typed fact the gate sets, kept on the stored result), never as run; a call
that ran, was refused or was allowed at the machine is not marked. Once the
question is settled, the host adds the answer to that stored result."""

from __future__ import annotations

from noema.interfaces.host.attach import attach, socket_path
from noema.interfaces.host.host import Host, turn_view
from noema.interfaces.host.protocol import ApprovalSettled
from noema.interfaces.web.turns import turn_json
from noema.memory.turns import Flag, TurnKind
from noema.providers.scripted import call, say
from noema.security.approvals import ApprovalGate, ApprovalRequest
from noema.security.settings import AutonomySettings
from noema.tools.registry import ToolRegistry, ToolResult

from .conftest import PERSON, question, telegram_app, until
from .test_attach_away import read_until
from .test_gate_away import Away, ctx, write_tool

ARGUMENTS = {"path": "a.txt", "text": "milk"}


async def run_with(gate: ApprovalGate, level: str = "ask") -> tuple[ToolResult, list]:
    gate.settings = AutonomySettings(tools={"note_write": level})
    ran: list = []
    registry = ToolRegistry([gate.wrap(write_tool(ran))])
    return await registry.run(registry.get("note_write"), dict(ARGUMENTS), ctx()), ran


async def test_a_call_asked_away_is_waiting_and_its_approved_run_is_not():
    away = Away()
    gate = ApprovalGate(AutonomySettings(), away.approver, away)
    result, ran = await run_with(gate)
    assert result.waiting and not result.is_error and ran == []
    [(_, _, run)] = away.posted
    outcome = await run()  # the person's yes: the call runs, and that result is not waiting
    assert outcome == ToolResult("wrote 4 characters to a.txt") and not outcome.waiting
    assert len(ran) == 1


async def test_a_call_that_runs_or_is_refused_is_not_waiting():
    async def yes(request: ApprovalRequest) -> bool:
        return True

    async def no(request: ApprovalRequest) -> bool:
        return False

    ran_at_once, ran = await run_with(ApprovalGate(AutonomySettings(), None, Away()), "allow")
    assert not ran_at_once.waiting and len(ran) == 1
    allowed, ran = await run_with(ApprovalGate(AutonomySettings(), yes, Away()))
    assert not allowed.waiting and not allowed.is_error and len(ran) == 1
    declined, ran = await run_with(ApprovalGate(AutonomySettings(), no, Away()))
    assert not declined.waiting and declined.is_error and ran == []
    denied, ran = await run_with(ApprovalGate(AutonomySettings(), yes, Away()), "deny")
    assert not denied.waiting and denied.is_error and ran == []


async def test_the_stored_result_keeps_the_waiting_mark_for_every_interface(tmp_path, server):
    app = telegram_app(tmp_path / "home", server, [
        say("", call("schedule_alarm", reason="water the plants", when="in 2 hours")),
        say("I asked you on Telegram."), say("The alarm is set.")])
    try:
        await app.start()
        server.inject_text(PERSON, "remind me to water the plants in two hours")
        asked = await question(server)

        def results():
            return [t for t in app.session.turns
                    if t.kind is TurnKind.TOOL_RESULT and t.tool_name == "schedule_alarm"]

        await until(lambda: bool(results()), "the waiting result")
        [waiting] = results()
        assert waiting.has(Flag.WAITING) and not waiting.has(Flag.ERROR)
        # Read back from the file, as a page reloaded or a new client reads it.
        [stored] = [t for t in app.store.range(waiting.id, waiting.id)]
        assert stored.has(Flag.WAITING)
        assert turn_view(stored).waiting and turn_json(stored)["waiting"] is True
        await app.agent.idle()
        server.inject_press(PERSON, PERSON, asked.message_id, dict(asked.buttons)["Allow"])
        await until(lambda: [s.reason for s in app.schedules.active()] == ["water the plants"],
                    "the alarm set")
        # The outcome is a turn of its own, not marked waiting.
        await until(lambda: any("Approval 1" in t.content.replace("ˆ", " ")
                                for t in app.session.turns if t.id > waiting.id),
                    "the outcome's turn")
        later = [t for t in app.session.turns if t.id > waiting.id]
        assert not any(t.has(Flag.WAITING) for t in later)
    finally:
        await app.aclose()


async def test_an_expired_question_marks_its_waiting_result_and_tells_the_clients_its_call(
        tmp_path, server):
    host = Host("ana")
    app = telegram_app(tmp_path / "home", server, [
        say("", call("schedule_alarm", reason="water the plants", when="in 2 hours")),
        say("I asked you on Telegram."), say("It expired.")], timeout_s=8.0, listener=host)
    # The chat below must attach before the question expires (it is told of the
    # expiry only while attached): eight seconds, for a loaded machine.
    host.bind(app)
    await app.start()
    await host.serve(socket_path(app.paths))
    try:
        server.inject_text(PERSON, "remind me to water the plants in two hours")
        await question(server)  # nobody watched: asked on Telegram at once
        await until(lambda: app.away.is_waiting(1), "the question placed")
        chat = await attach(app.paths, client="chat")
        settled = [m for m in await read_until(chat, lambda m: isinstance(m, ApprovalSettled))
                   if isinstance(m, ApprovalSettled)][-1]
        [waiting] = [t for t in app.session.turns
                     if t.kind is TurnKind.TOOL_RESULT and t.tool_name == "schedule_alarm"]
        assert (settled.allowed, settled.by, settled.call_id) == (False, "timeout",
                                                                  waiting.call_id)
        [stored] = app.store.range(waiting.id, waiting.id)
        assert stored.has(Flag.WAITING) and stored.has(Flag.EXPIRED)
        assert not stored.has(Flag.ALLOWED) and not stored.has(Flag.REFUSED)
        assert turn_view(stored).answered == turn_json(stored)["answered"] == "expired"
        await chat.connection.aclose()
    finally:
        await host.aclose()
        await app.aclose()
