"""Where exactly a cancellation lands in a tool call, and what the model is told.

A write either completed (its true result is kept) or did not start (no
effect): the two edges of a tool's run are driven here one loop step apart.
"""

from __future__ import annotations

import asyncio

import pytest

from noema.memory.turns import NewTurn, TurnKind
from noema.orchestrator.cycle import CycleListener, CycleProgress, ReasoningCycle
from noema.orchestrator.repair import answer_unfinished
from noema.providers.scripted import ScriptedProvider, call, say
from noema.tools.registry import ToolContext, ToolRegistry, tool

from .rig import check_both_protocols

done: list[str] = []


def cycle_with(session, tools, provider) -> ReasoningCycle:
    return ReasoningCycle(session, provider, ToolRegistry(tools), lambda: "test")


async def test_a_write_that_returned_as_the_cancellation_came_keeps_its_result(session):
    done.clear()

    @tool(side_effects=True)
    def write(ctx: ToolContext) -> str:
        """Write."""
        # The cancellation is queued before the write's completion wakes the cycle.
        asyncio.get_running_loop().call_soon(task.cancel)
        done.append("written")
        return "written"

    session.append(NewTurn(TurnKind.USER, "write"))
    cycle = cycle_with(session, [write], ScriptedProvider([say("", call("write"))]))
    progress = CycleProgress(session.store.open_cycle("person"))
    task = asyncio.ensure_future(cycle.run(progress, CycleListener()))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert done == ["written"]
    result = session.turns[-1]
    assert result.kind is TurnKind.TOOL_RESULT and result.content == "written"
    assert progress.unanswered == [] and progress.last_confirmed_action == "write (turn 2)"
    check_both_protocols(session.turns)


async def test_a_write_cancelled_before_it_began_is_told_it_had_no_effect(session):
    done.clear()

    @tool(side_effects=True)
    def write(ctx: ToolContext) -> str:
        """Write."""
        done.append("written")
        return "written"

    class CancelAtStart(CycleListener):
        def on_tool_start(self, call, side_effects):
            # Runs before the tool's own task gets its first step.
            asyncio.get_running_loop().call_soon(task.cancel)

    session.append(NewTurn(TurnKind.USER, "write"))
    cycle = cycle_with(session, [write], ScriptedProvider([say("", call("write"))]))
    progress = CycleProgress(session.store.open_cycle("person"))
    task = asyncio.ensure_future(cycle.run(progress, CancelAtStart()))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert done == []
    assert progress.side_effects_started == 1  # counted as started: the cycle is unsafe
    (result,) = answer_unfinished(session, progress, "an urgent event arrived")
    assert result.content.startswith("Not run") and "no effect" in result.content
    check_both_protocols(session.turns)


async def test_a_tool_that_swallows_its_cancellation_does_not_keep_the_cycle_going(session):
    @tool(side_effects=True)
    async def stubborn(ctx: ToolContext) -> str:
        """Ignores cancellation."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "finished anyway"
        return "finished"

    class Started(CycleListener):
        def on_tool_start(self, call, side_effects):
            started.set()

    started = asyncio.Event()
    session.append(NewTurn(TurnKind.USER, "go"))
    provider = ScriptedProvider([say("", call("stubborn")), say("never asked")])
    cycle = cycle_with(session, [stubborn], provider)
    progress = CycleProgress(session.store.open_cycle("person"))
    task = asyncio.ensure_future(cycle.run(progress, Started()))
    await started.wait()
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert session.turns[-1].content == "finished anyway"
    assert len(provider.requests) == 1  # no second model call after the cancellation
