"""The terminal and a call whose question went to the person's channels: its
one line says it waits for their answer (not that it ran), and the approval
prompt says where it was asked and when, unanswered, it is refused."""

from __future__ import annotations

import io
import time
from datetime import datetime

from noema.interfaces.host.protocol import ApprovalAsked, ToolFinished
from noema.interfaces.terminal.chat import TerminalListener
from noema.interfaces.terminal.client import deadline_text
from noema.memory.turns import Flag, Role, Turn, TurnKind

from .test_client import chat, turn  # noqa: F401  (the fixture)

WAITING = ("Not run yet: schedule_alarm waits for the person's answer to approval 1, asked on "
           "Telegram; unanswered, it expires as a refusal at 2026-12-02 01:30 UTC.")


async def test_a_waiting_result_reads_as_waiting_and_a_run_one_as_run(chat):  # noqa: F811
    await chat.hear(
        ToolFinished(call=turn("tool_call", tool_name="schedule_alarm"),
                     result=turn("tool_result", WAITING, tool_name="schedule_alarm",
                                 call_id="c1", waiting=True)),
        ToolFinished(call=turn("tool_call", tool_name="schedule_alarm"),
                     result=turn("tool_result", "Alarm #1 set", tool_name="schedule_alarm",
                                 call_id="c2")))
    lines = chat.shown.splitlines()
    assert lines[0].startswith("    ◷ not run yet: waiting for your answer")
    assert "→" not in lines[0] and "Not run yet" not in lines[0]
    assert lines[1] == "    → Alarm #1 set"


def test_the_in_process_listener_marks_a_waiting_result_the_same():
    out = io.StringIO()
    listener = TerminalListener(out)

    def result(flags: Flag, content: str) -> Turn:
        return Turn(id=2, ts=0.0, kind=TurnKind.TOOL_RESULT, role=Role.TOOL, content=content,
                    tool_name="schedule_alarm", call_id="c1", flags=flags)

    call = Turn(id=1, ts=0.0, kind=TurnKind.TOOL_CALL, role=Role.ASSISTANT, content="",
                tool_name="schedule_alarm", call_id="c1", arguments="{}")
    listener.on_tool_end(call, result(Flag.WAITING, WAITING))
    listener.on_tool_end(call, result(Flag.ERROR, "Error: the person declined"))
    first, second = out.getvalue().splitlines()
    assert first.startswith("    ◷ not run yet: waiting for your answer")
    assert second == "    ✗ Error: the person declined"


async def test_a_question_asked_away_says_where_and_until_when(chat):  # noqa: F811
    expires = time.time() + 3600
    await chat.hear(ApprovalAsked(approval=1, tool="schedule_alarm",
                                  arguments='{"reason": "call the plumber"}',
                                  reason="because alarms are set to ask first",
                                  where="on Telegram", expires_at=expires))
    clock = datetime.fromtimestamp(expires).strftime("%H:%M")
    assert ("* schedule_alarm needs your approval:\n"
            '    {"reason": "call the plumber"}\n'
            "  Asked because alarms are set to ask first.\n"
            "  (asked on Telegram while you were away: answer here or there, the first answer "
            f"counts; unanswered, it is refused at {clock}, in 60 minutes)\n") in chat.shown


async def test_a_question_at_the_machine_says_only_its_deadline(chat):  # noqa: F811
    await chat.hear(ApprovalAsked(approval=2, tool="shell_execute", arguments="{}", reason="",
                                  expires_at=time.time() + 60))
    assert "(unanswered, it is refused at " in chat.shown and ", in 1 minute)" in chat.shown
    assert "away" not in chat.shown


def test_the_deadline_wording():
    now = 1_700_000_000.0
    assert deadline_text("", None, now) == ""
    assert deadline_text("by mail to ana@example.org", None, now) == (
        "asked by mail to ana@example.org while you were away: answer here or there, the "
        "first answer counts")
    clock = datetime.fromtimestamp(now + 90).strftime("%H:%M")
    assert deadline_text("", now + 90, now) == f"unanswered, it is refused at {clock}, in 2 minutes"
    assert deadline_text("", now - 5, now).endswith(", in 0 minutes")  # already past: no negative
