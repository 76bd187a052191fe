"""`ApprovalGate.ask`: the one way any part of the agent asks the person about a call."""

from __future__ import annotations

import asyncio

import pytest

from noema.security.approvals import ApprovalGate, ApprovalRequest
from noema.security.settings import AutonomySettings
from noema.tools.registry import ToolContext, ToolError

from .test_approvals import Person

REQUEST = ApprovalRequest("email_send", "to: stranger@example.org",
                          "stranger@example.org: the person never wrote with this address",
                          "call_1", 41)


def ctx() -> ToolContext:
    return ToolContext(call_id="call_1", turn_id=41, cycle_id=1)



async def test_with_nobody_to_ask_the_call_is_refused_and_says_why():
    gate = ApprovalGate(AutonomySettings(default="allow"))
    with pytest.raises(ToolError, match="nobody can be asked") as refused:
        await gate.ask(REQUEST, ctx())
    assert "email_send" in str(refused.value) and "never wrote" in str(refused.value)


async def test_the_person_is_asked_the_request_and_a_yes_lets_it_run():
    person = Person(True)
    gate = ApprovalGate(AutonomySettings(default="allow"), person)
    assert await gate.ask(REQUEST, ctx()) is None
    assert person.asked == [REQUEST]


async def test_a_no_refuses_the_call():
    person = Person(False)
    gate = ApprovalGate(AutonomySettings(default="allow"), person)
    with pytest.raises(ToolError, match="declined this email_send call.*not run"):
        await gate.ask(REQUEST, ctx())
    assert person.asked == [REQUEST]


async def test_the_approver_attached_later_is_the_one_asked():
    gate = ApprovalGate(AutonomySettings(default="allow"))
    person = Person(True)
    gate.attach(person)
    await gate.ask(REQUEST)
    gate.attach(None)
    with pytest.raises(ToolError, match="nobody can be asked"):
        await gate.ask(REQUEST)
    assert len(person.asked) == 1


async def test_a_failing_approver_counts_as_a_refusal_with_a_clear_message():
    async def broken(request: ApprovalRequest) -> bool:
        raise OSError("the terminal is gone")

    gate = ApprovalGate(AutonomySettings(default="allow"), broken)
    with pytest.raises(ToolError, match=r"could not be asked to approve email_send "
                                        r"\(the terminal is gone\); it was not run"):
        await gate.ask(REQUEST, ctx())


async def test_an_approver_that_says_why_it_cannot_ask_is_quoted_as_it_is():
    async def headless(request: ApprovalRequest) -> bool:
        raise ToolError("no interface is attached to ask them")

    gate = ApprovalGate(AutonomySettings(default="allow"), headless)
    with pytest.raises(ToolError, match="^no interface is attached to ask them$"):
        await gate.ask(REQUEST, ctx())


async def test_cancelled_while_waiting_the_call_is_recorded_as_never_run():
    waiting = asyncio.Event()

    async def slow(request: ApprovalRequest) -> bool:
        waiting.set()
        await asyncio.Event().wait()
        return True

    gate = ApprovalGate(AutonomySettings(default="allow"), slow)
    context = ctx()
    task = asyncio.create_task(gate.ask(REQUEST, context))
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert context.interruption and "never ran" in context.interruption[0]
