"""A write that is cancelled or killed half-way leaves the old file or the new
one, never a mixture."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from noema.security import fsafe
from noema.security.approvals import ApprovalRequest
from noema.security.policy import AccessDenied

from .world import World
from .writer_child import SIZE, content

REPO = Path(__file__).parents[2]


async def test_killed_writer_never_leaves_a_torn_file(tmp_path: Path):
    (tmp_path / "big.bin").write_bytes(b"O" * SIZE)
    allowed = {b"O" * SIZE, content("A"), content("B")}
    rng = random.Random(7)
    for _ in range(4):
        (tmp_path / "started").unlink(missing_ok=True)
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.security.writer_child", str(tmp_path)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            for _ in range(400):
                if (tmp_path / "started").exists():
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(rng.uniform(0.02, 0.25))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        assert (tmp_path / "big.bin").read_bytes() in allowed
    # Leftover temporary files may exist after a kill; they never carry the name.
    names = {p.name for p in tmp_path.iterdir()}
    assert "big.bin" in names
    assert all(n.endswith(fsafe.TEMP_SUFFIX) for n in names - {"big.bin", "started"})


def test_failure_mid_write_keeps_the_old_file(tmp_path: Path, monkeypatch):
    (tmp_path / "f.txt").write_text("old")

    def broken_fsync(fd):
        raise OSError(5, "disk on fire")

    monkeypatch.setattr(fsafe.os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        fsafe.atomic_write(tmp_path, PurePosixPath("f.txt"), b"new content")
    assert (tmp_path / "f.txt").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]  # the temporary file is gone


def test_write_refuses_a_hard_linked_file_by_default(tmp_path: Path):
    target = tmp_path / "run.sh"
    target.write_text("old")
    os.link(target, tmp_path / "other-name")
    with pytest.raises(AccessDenied, match="2 hard links"):
        fsafe.atomic_write(tmp_path, PurePosixPath("run.sh"), b"new")
    assert target.read_text() == "old" and target.stat().st_nlink == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-name", "run.sh"]


def test_write_keeps_permissions_and_breaks_hard_links_when_allowed(tmp_path: Path):
    target = tmp_path / "run.sh"
    target.write_text("old")
    target.chmod(0o750)
    other = tmp_path / "other-name"
    os.link(target, other)
    fsafe.atomic_write(tmp_path, PurePosixPath("run.sh"), b"new", allow_hard_links=True)
    assert target.read_text() == "new" and other.read_text() == "old"
    assert target.stat().st_mode & 0o777 == 0o750


@pytest.mark.parametrize("yields_before_cancel", [0, 1, 2, 5, 20])
async def test_cancelled_write_call_is_all_or_nothing(world: World, yields_before_cancel: int):
    old, new = "old\n" * 1000, "new\n" * 200_000
    (world.ws / "doc.txt").write_text(old)
    world.build()
    task = asyncio.create_task(world.call("file_write", path="doc.txt", content=new))
    for _ in range(yields_before_cancel):
        await asyncio.sleep(0)
    task.cancel()
    try:
        result = await task
    except asyncio.CancelledError:
        result = None
    text = (world.ws / "doc.txt").read_text()
    assert text in (old, new)
    exists = (world.gitdir() / "HEAD").exists()
    history = world.git("log", "--format=%s", "--", "doc.txt") if exists else ""
    # The history agrees with the disk: an agent version exists iff the write happened.
    assert ("file_write doc.txt" in history) == (text == new)
    if result is not None:
        assert not result.is_error and text == new


async def test_cancel_while_awaiting_approval_writes_nothing(world: World):
    from noema.security.settings import AutonomySettings

    asked = asyncio.Event()

    async def slow_person(request: ApprovalRequest) -> bool:
        asked.set()
        await asyncio.sleep(30)
        return True

    world.build(slow_person, autonomy=AutonomySettings(default="ask"))
    task = asyncio.create_task(world.call("file_write", path="doc.txt", content="new"))
    await asyncio.wait_for(asked.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not (world.ws / "doc.txt").exists()
    assert "It never ran" in world.contexts[-1].interruption[0]  # and the model is told so
