"""The workspaces' state at start is recorded as the person's by a child
process, so the agent loads pygit2 only when it first writes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from noema.security.snapshot import record_at_start
from tests.security.world import World


def test_prepare_records_the_start_without_loading_pygit2_in_the_agent(tmp_path: Path):
    probe = textwrap.dedent(f"""
        import asyncio, sys
        from pathlib import Path
        from tests.security.world import World
        world = World.make(Path({str(tmp_path)!r}))
        hands = world.build()
        asyncio.run(hands.prepare())
        print("pygit2" in sys.modules)
        print(world.git("log", "--format=%an|%s").strip())
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    loaded, log = done.stdout.splitlines()
    assert loaded == "False"
    assert log.endswith("|Initial state of the workspace: notes.txt")
    assert not log.startswith("Noema")  # the person's state, not the agent's


async def test_the_agent_writes_after_the_child_and_sees_its_version(world: World):
    hands = world.build()
    (world.ws / "mine.txt").write_text("the person's\n")
    await hands.prepare()
    written = await world.call("file_write", path="a.txt", content="agent\n")
    assert not written.is_error
    subjects = world.git("log", "--format=%s").splitlines()
    assert len(subjects) == 2 and subjects[1].startswith("Initial state of the workspace")
    assert "mine.txt" in world.git("show", "--stat", "HEAD~1")


async def test_a_store_already_open_is_recorded_in_this_process(world: World):
    hands = world.build()
    await world.call("file_write", path="a.txt", content="agent\n")
    (world.ws / "notes.txt").write_text("changed by the person\n")
    assert hands.versions.opened(hands.policy.writable_roots[0])
    await hands.prepare()
    newest = world.git("log", "-1", "--format=%s").strip()
    assert "notes.txt" in newest


async def test_a_workspace_that_cannot_be_recorded_is_reported_and_the_others_are(
        world: World, tmp_path: Path):
    hands = world.build()
    good = hands.versions.spec_for(hands.policy.writable_roots[0])
    broken_git = tmp_path / "broken.git"
    broken_git.mkdir()
    (broken_git / "HEAD").write_text("not a ref at all\n")
    broken = type(good)(tmp_path / "ws", broken_git, good.authors)
    found = await record_at_start([broken, good])
    assert [r.workdir for r in found] == [str(broken.workdir), str(good.workdir)]
    assert found[0].problem and found[0].version is None
    assert found[1].problem is None and found[1].version


def _snapshot_children() -> list[int]:
    mine = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if stat[1] == mine and b"noema.security.snapshot" in cmdline:
            found.append(int(entry.name))
    return found


async def test_a_stop_during_the_snapshot_ends_the_child(world: World):
    hands = world.build()
    task = asyncio.create_task(hands.prepare())
    for _ in range(3000):  # until the child exists (a busy machine starts it slowly)
        if _snapshot_children():
            break
        await asyncio.sleep(0.01)
    assert _snapshot_children()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _snapshot_children() == []
