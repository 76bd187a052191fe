"""The gate with nobody at the machine: the call returns at once as waiting,
and the person's yes runs that very call, past that question only."""

from __future__ import annotations

from typing import Any

import pytest

from noema.memory.turns import Source, SourceKind
from noema.security.approvals import (ApprovalGate, ApprovalRequest, AskAway, AwayTicket,
                                      RunApproved)
from noema.security.settings import AutonomySettings
from noema.tools.registry import ToolContext, ToolError, ToolRegistry, tool


class Away:
    """Nobody at the machine: every question goes to the person's channels."""

    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []
        self.approver_calls = 0
        self.posted: list[tuple[ApprovalRequest, ToolContext, RunApproved]] = []

    async def approver(self, request: ApprovalRequest) -> bool:
        self.approver_calls += 1
        self.asked.append(request)
        raise AskAway()

    async def post(self, request: ApprovalRequest, ctx: ToolContext, run: RunApproved, *,
                   number: int | None = None, expires_at: float | None = None) -> AwayTicket:
        self.posted.append((request, ctx, run))
        return AwayTicket(len(self.posted), "on Telegram", "2026-01-01 10:15 UTC (in 15 minutes)")


def ctx(outside: str = "") -> ToolContext:
    lead = (Source(SourceKind.MAIL, outside),) if outside else ()
    return ToolContext(call_id="call_9", turn_id=12, cycle_id=3, lead=lead)


def write_tool(ran: list[tuple[ToolContext, dict[str, Any]]], gate: ApprovalGate | None = None,
               extra: ApprovalRequest | None = None):
    @tool(side_effects=True)
    async def note_write(ctx: ToolContext, path: str, text: str) -> str:
        """Write a note.

        Args:
            path: Where.
            text: What.
        """
        if gate is not None and extra is not None:
            await gate.ask(extra, ctx)  # a second question, asked from inside the tool
        ran.append((ctx, {"path": path, "text": text}))
        return f"wrote {len(text)} characters to {path}"

    return note_write


async def test_the_call_returns_at_once_as_waiting_and_runs_on_the_yes_with_its_arguments():
    away = Away()
    gate = ApprovalGate(AutonomySettings(tools={"note_write": "ask"}), away.approver, away)
    ran: list = []
    registry = ToolRegistry([gate.wrap(write_tool(ran))])
    context = ctx(outside="bob@example.org")
    result = await registry.run(registry.get("note_write"), {"path": "a.txt", "text": "milk"},
                                context)
    assert not result.is_error and ran == []
    assert "approval 1" in result.content and "on Telegram" in result.content
    assert "10:15" in result.content and "`approvals`" in result.content
    [(request, posted_ctx, run)] = away.posted
    assert request.tool == "note_write" and "milk" in request.arguments
    assert posted_ctx is context
    outcome = await run()
    assert outcome.content == "wrote 4 characters to a.txt" and not outcome.is_error
    # The very call: its arguments, its context (provenance kept), asked once.
    assert ran == [(context, {"path": "a.txt", "text": "milk"})]
    assert away.approver_calls == 1
    # The yes was for that question only: the same call asked again asks again.
    again = await registry.run(registry.get("note_write"), {"path": "a.txt", "text": "milk"},
                               context)
    assert "approval 2" in again.content and len(ran) == 1


async def test_a_second_question_inside_the_approved_call_is_asked_in_its_turn():
    away = Away()
    gate = ApprovalGate(AutonomySettings(tools={"note_write": "ask"}), away.approver, away)
    ran: list = []
    extra = ApprovalRequest("note_write", "to: elsewhere", "a place the person never used",
                            "call_9", 12)
    registry = ToolRegistry([gate.wrap(write_tool(ran, gate, extra))])
    first = await registry.run(registry.get("note_write"), {"path": "b", "text": "x"}, ctx())
    assert "approval 1" in first.content
    second = await away.posted[0][2]()  # the first yes: the inner question goes out now
    assert "approval 2" in second.content and ran == []
    assert away.posted[1][0] == extra
    done = await away.posted[1][2]()  # both answered: it runs, asking neither again
    assert done.content == "wrote 1 characters to b" and len(ran) == 1
    assert away.approver_calls == 2


async def test_a_refusal_by_the_configuration_meanwhile_is_the_outcome():
    away = Away()
    settings = AutonomySettings(tools={"note_write": "ask"})
    gate = ApprovalGate(settings, away.approver, away)
    ran: list = []
    registry = ToolRegistry([gate.wrap(write_tool(ran))])
    await registry.run(registry.get("note_write"), {"path": "c", "text": "y"}, ctx())
    gate.settings = AutonomySettings(tools={"note_write": "deny"})  # changed in the GUI
    outcome = await away.posted[0][2]()
    assert outcome.is_error and "denied by the person's configuration" in outcome.content
    assert ran == []


async def test_without_a_place_to_wait_the_call_is_refused_and_says_why():
    away = Away()
    gate = ApprovalGate(AutonomySettings(tools={"note_write": "ask"}), away.approver)
    ran: list = []
    registry = ToolRegistry([gate.wrap(write_tool(ran))])
    result = await registry.run(registry.get("note_write"), {"path": "d", "text": "z"}, ctx())
    assert result.is_error and "cannot wait" in result.content and ran == []
    # Asked outside any guarded call, the same holds.
    with pytest.raises(ToolError, match="not run"):
        await ApprovalGate(AutonomySettings(), away.approver, away).ask(
            ApprovalRequest("x", "", "why"), ctx())
