"""The sandbox runner: its command line, output cap, limits, and refusals."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from noema.security.sandbox import (
    Layout,
    Output,
    Sandbox,
    bwrap_argv,
    run_process,
)
from noema.security.settings import AutonomySettings, ShellSettings

from .world import BWRAP, World


def test_command_line_isolates_by_default(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    layout = Layout(ws, (ws,), (tmp_path / "ro",), (tmp_path / "ws" / "hidden",))
    argv = bwrap_argv("bwrap", layout, ["sh", "-c", "true"])
    joined = " ".join(argv)
    assert "--unshare-all" in argv and "--die-with-parent" in argv and "--new-session" in argv
    assert "--share-net" not in argv
    assert f"--bind {ws} {ws}" in joined and f"--ro-bind {ws}/.git {ws}/.git" in joined
    assert f"--ro-bind {tmp_path}/ro {tmp_path}/ro" in joined
    # The workspace's .git is mounted read-only after (so over) the writable workspace.
    assert joined.index(f"--ro-bind {ws}/.git") > joined.index(f"--bind {ws} {ws}")
    assert argv[-3:] == ["sh", "-c", "true"]
    with_net = bwrap_argv("bwrap", Layout(ws, (ws,), network=True), ["true"])
    assert "--share-net" in with_net


def test_output_keeps_head_and_tail():
    out = Output(1000)
    for n in range(1000):
        out.feed(f"line {n:04d}\n".encode())
    text = out.render()
    assert text.startswith("line 0000\n") and text.endswith("line 0999\n")
    assert (
        out.omitted == out.total - 1000
        and f"[... {out.omitted} bytes of output omitted ...]" in text
    )


async def test_time_limit_returns_partial_output(tmp_path: Path):
    out = Output(10_000)
    finished = await run_process(
        ["sh", "-c", "echo before; sleep 30; echo after"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout_s=0.3,
        output=out,
    )
    assert finished.timed_out and finished.exit_code is None
    assert "before" in finished.output and "after" not in finished.output


async def test_missing_bubblewrap_refuses_and_runs_nothing(world: World):
    world.build(shell=ShellSettings(bwrap_path="/nonexistent/bwrap"))
    result = await world.call("shell_execute", command="echo ran > ran.txt")
    assert result.is_error
    assert "not installed" in result.content and 'sandbox = "none"' in result.content
    assert not (world.ws / "ran.txt").exists()


async def test_bubblewrap_that_cannot_start_refuses(world: World, tmp_path: Path):
    fake = tmp_path / "fake-bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    world.build(shell=ShellSettings(bwrap_path=str(fake)))
    result = await world.call("shell_execute", command="echo ran > ran.txt")
    assert result.is_error and "cannot create a sandbox" in result.content
    assert "No permissions" in result.content
    assert not (world.ws / "ran.txt").exists()


async def test_unsandboxed_only_when_chosen(world: World):
    world.build(shell=ShellSettings(sandbox="none", bwrap_path="/nonexistent/bwrap"))
    result = await world.call("shell_execute", command="echo ran > ran.txt; echo $NOEMA_SANDBOX")
    assert not result.is_error and (world.ws / "ran.txt").read_text() == "ran\n"


async def test_shell_asks_by_default_and_refuses_with_nobody_to_ask(world: World):
    world.build(autonomy=AutonomySettings())
    result = await world.call("shell_execute", command="echo ran > ran.txt")
    assert (
        result.is_error and "approval" in result.content and "nobody can be asked" in result.content
    )
    assert not (world.ws / "ran.txt").exists()


@pytest.mark.skipif(not BWRAP, reason="needs bubblewrap")
async def test_sandbox_sees_its_own_pid_namespace(world: World):
    sandbox = Sandbox(ShellSettings())
    layout = Layout(world.ws, (world.ws,))
    finished = await sandbox.run(layout, "echo $$; ls /proc | grep -c '^[0-9]'", 10, Output(4000))
    pid, count = finished.output.split()
    assert int(pid) < 10 and int(count) < 10
    assert finished.exit_code == 0


@pytest.mark.skipif(not BWRAP, reason="needs bubblewrap")
async def test_sandbox_check_runs_once(world: World, monkeypatch):
    sandbox = Sandbox(ShellSettings())
    layout = Layout(world.ws, (world.ws,))
    await sandbox.check(layout)
    monkeypatch.setattr("noema.security.sandbox.run_process", None)  # a second probe would fail
    await sandbox.check(layout)


async def test_cancelled_process_group_is_killed(tmp_path: Path):
    out = Output(10_000)
    task = asyncio.create_task(
        run_process(
            [
                sys.executable,
                "-c",
                "import os, signal\nprint('up', os.getpid(), flush=True)\nsignal.pause()",
            ],
            cwd=tmp_path,
            env={},
            timeout_s=60,
            output=out,
        )
    )
    for _ in range(200):
        if out.total:
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    text = out.render()
    assert text.startswith("up ")
    with pytest.raises(ProcessLookupError):
        os.kill(int(text.split()[1]), 0)


def test_nested_roots_are_mounted_outer_first(tmp_path: Path):
    outer, inner = tmp_path / "home", tmp_path / "home" / "project"
    argv = " ".join(bwrap_argv("bwrap", Layout(inner, (inner,), (outer,)), ["true"]))
    assert argv.index(f"--ro-bind {outer} {outer}") < argv.index(f"--bind {inner} {inner}")
    inverted = " ".join(bwrap_argv("bwrap", Layout(outer, (outer,), (inner,)), ["true"]))
    assert inverted.index(f"--bind {outer} {outer}") < inverted.index(f"--ro-bind {inner} {inner}")
