"""Autonomy levels: allow, ask (approved or declined), deny."""

from __future__ import annotations

import pytest

from noema.security.approvals import ApprovalGate, ApprovalRequest, summarize
from noema.security.settings import AutonomySettings

from .world import World


class Person:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> bool:
        self.asked.append(request)
        return self.answer


def test_levels_resolve_per_tool_then_default():
    settings = AutonomySettings(default="ask", tools={"file_write": "allow", "file_read": "deny"})
    assert settings.level_for("file_write", True) == "allow"
    assert settings.level_for("file_patch", True) == "ask"
    assert settings.level_for("file_grep", False) == "allow"
    assert settings.level_for("file_read", False) == "deny"
    assert AutonomySettings().level_for("shell_execute", True) == "ask"
    # Naming another tool does not lose the shell's default.
    assert AutonomySettings(tools={"file_write": "ask"}).level_for("shell_execute", True) == "ask"
    assert (
        AutonomySettings(tools={"shell_execute": "allow"}).level_for("shell_execute", True)
        == "allow"
    )


async def test_ask_runs_the_call_when_the_person_approves(world: World):
    person = Person(True)
    world.build(person, autonomy=AutonomySettings(default="ask"))
    result = await world.call("file_write", path="a.txt", content="approved\n")
    assert not result.is_error and (world.ws / "a.txt").read_text() == "approved\n"
    (request,) = person.asked
    assert request.tool == "file_write" and "path: a.txt" in request.arguments
    assert request.call_id.startswith("call-") and request.turn_id is not None
    assert "set to ask first" in request.reason


async def test_ask_refuses_when_the_person_declines(world: World):
    world.build(Person(False), autonomy=AutonomySettings(default="ask"))
    result = await world.call("file_write", path="a.txt", content="declined\n")
    assert result.is_error and "declined" in result.content
    assert not (world.ws / "a.txt").exists()


async def test_deny_explains_and_does_not_ask(world: World):
    person = Person(True)
    world.build(person, autonomy=AutonomySettings(tools={"file_write": "deny"}))
    result = await world.call("file_write", path="a.txt", content="x")
    assert result.is_error and "denied by the person's configuration" in result.content
    assert person.asked == [] and not (world.ws / "a.txt").exists()


async def test_read_only_tools_are_not_asked_about(world: World):
    person = Person(False)
    world.build(person, autonomy=AutonomySettings(default="ask"))
    result = await world.call("file_read", path="notes.txt")
    assert not result.is_error and person.asked == []


async def test_failing_interface_means_not_run(world: World):
    async def broken(request: ApprovalRequest) -> bool:
        raise ConnectionError("the chat window closed")

    world.build(broken, autonomy=AutonomySettings(default="ask"))
    result = await world.call("file_write", path="a.txt", content="x")
    assert result.is_error and "could not be asked" in result.content
    assert not (world.ws / "a.txt").exists()


async def test_level_and_approver_change_at_run_time(world: World):
    hands = world.build(None, autonomy=AutonomySettings(default="ask"))
    assert (await world.call("file_write", path="a.txt", content="1")).is_error
    hands.gate.attach(Person(True))
    assert not (await world.call("file_write", path="a.txt", content="2")).is_error
    hands.gate.settings = AutonomySettings(default="deny")
    assert (await world.call("file_write", path="a.txt", content="3")).is_error
    assert (world.ws / "a.txt").read_text() == "2"


def test_summary_shows_a_command_whole_and_a_huge_value_by_its_ends():
    command = "echo " + "a" * 4000 + " && rm -rf ~/important"
    text = summarize({"command": command, "timeout": None})
    assert text == f"command: {command}"  # the dangerous tail is never cut off
    assert "timeout" not in text
    huge = "x" * 20_000 + "THE END"
    shown = summarize({"path": "a.txt", "content": huge})
    assert shown.startswith("path: a.txt\ncontent: xxx") and shown.endswith("THE END")
    assert "characters left out of 20007 in all" in shown


def test_gate_keeps_the_tool_schema(world: World):
    hands = world.build()
    names = {t.name: t for t in hands.tools}
    gate = ApprovalGate(AutonomySettings())
    wrapped = gate.wrap(names["file_write"])
    assert wrapped.spec == names["file_write"].spec and wrapped.side_effects


@pytest.mark.parametrize(
    "name,effects",
    [
        ("file_find", False),
        ("file_grep", False),
        ("file_read", False),
        ("file_history", False),
        ("file_write", True),
        ("file_search_and_replace", True),
        ("file_patch", True),
        ("file_mkdir", True),
        ("file_restore", True),
        ("shell_execute", True),
    ],
)
def test_side_effect_marks(world: World, name: str, effects: bool):
    tools = {t.name: t for t in world.build().tools}
    assert tools[name].side_effects is effects

