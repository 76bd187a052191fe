"""`shell_execute` as the model uses it."""

from __future__ import annotations

import pytest

from noema.security.settings import ShellSettings
from tests.security.world import BWRAP, World

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")


async def test_result_has_exit_code_output_and_changed_files(world: World):
    result = await world.call(
        "shell_execute", command="echo out; echo err >&2; echo data > made.txt; exit 3"
    )
    first, *rest = result.content.splitlines()
    assert first.startswith("Exit code 3. Files changed: made.txt (version ")
    assert rest == ["out", "err"]
    subject = world.git("log", "-1", "--format=%an|%s|%b")
    assert subject.startswith("Noema (t)|shell_execute: echo out;")
    assert "Noema-Tool: shell_execute" in subject and "Noema-Turn:" in subject


async def test_person_edits_before_a_command_stay_theirs(world: World):
    await world.call("shell_execute", command="true")
    (world.ws / "notes.txt").write_text("by hand\n")
    await world.call("shell_execute", command="echo x > y.txt")
    newest, before = world.git("log", "-2", "--format=%an|%s").splitlines()
    assert newest == "Noema (t)|shell_execute: echo x > y.txt"
    assert before.endswith("|Changes by the person: notes.txt")
    assert world.git("show", "--name-only", "--format=", "HEAD").split() == ["y.txt"]


async def test_no_changes_make_no_version(world: World):
    result = await world.call("shell_execute", command="ls")
    assert result.content.startswith("Exit code 0.\n") and "Files changed" not in result.content


async def test_timeout_is_clamped_and_reported(world: World):
    world.build(shell=ShellSettings(timeout_s=0.2, max_timeout_s=0.3))
    result = await world.call("shell_execute", command="sleep 20", timeout=100)
    assert result.content.startswith("The command timed out after 0.3 s")
    bad = await world.call("shell_execute", command="true", timeout=0)
    assert bad.is_error and "positive" in bad.content


async def test_workspace_is_the_working_folder_and_tmp_is_private(world: World):
    result = await world.call("shell_execute", command="pwd; echo scratch > /tmp/t && cat /tmp/t")
    lines = result.content.splitlines()
    assert lines[1] == str(world.ws.resolve()) and lines[2] == "scratch"
