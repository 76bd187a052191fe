"""The sandbox runner: its command line, output cap, limits, and refusals."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from noema.security.root_files import root_only
from noema.security.sandbox import (
    Layout,
    Output,
    Sandbox,
    bwrap_argv,
    run_process,
    system_folders,
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
        timeout_s=3,  # the shell prints its first line well before, even on a loaded machine
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
    for _ in range(1500):  # a busy machine starts Python slowly
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


def test_command_line_forbids_nested_user_namespaces(tmp_path: Path):
    argv = bwrap_argv("bwrap", Layout(tmp_path, (tmp_path,)), ["true"])
    assert "--unshare-user" in argv and "--disable-userns" in argv


def test_command_line_maps_root_to_an_unprivileged_uid(tmp_path: Path):
    joined = " ".join(bwrap_argv("bwrap", Layout(tmp_path, (tmp_path,)), ["true"]))
    if os.geteuid() == 0:
        assert "--uid 1000 --gid 1000 --cap-drop ALL" in joined
    else:
        assert "--uid" not in joined  # bubblewrap keeps the person's own uid


def test_command_line_makes_the_kernel_knobs_read_only(tmp_path: Path):
    joined = " ".join(bwrap_argv("bwrap", Layout(tmp_path, (tmp_path,)), ["true"]))
    assert "--ro-bind /proc/sys /proc/sys" in joined
    assert joined.index("--proc /proc") < joined.index("--ro-bind /proc/sys /proc/sys")
    if os.geteuid() == 0 and os.path.exists("/proc/kcore"):
        assert "--ro-bind /dev/null /proc/kcore" in joined


def test_scratch_folders_are_sized_by_the_memory_limit(tmp_path: Path):
    joined = " ".join(bwrap_argv("bwrap", Layout(tmp_path, (tmp_path,)), ["true"], tmp_mb=128))
    size = 128 * 1024 * 1024
    assert f"--size {size} --tmpfs /tmp" in joined and f"--size {size} --tmpfs /var/tmp" in joined


@pytest.mark.skipif(os.geteuid() != 0, reason="root-only files are masked when the agent is root")
def test_command_line_masks_root_only_system_files(tmp_path: Path):
    shadow = Path("/etc/shadow")
    if not shadow.exists() or shadow.stat().st_mode & 0o004:
        pytest.skip("this system has no root-only /etc/shadow")
    joined = " ".join(bwrap_argv("bwrap", Layout(tmp_path, (tmp_path,)), ["true"]))
    assert "--ro-bind /dev/null /etc/shadow" in joined


def test_root_only_files_are_found_and_links_left_alone(tmp_path: Path):
    tree = tmp_path / "sys"
    (tree / "open" / "deeper").mkdir(parents=True)
    (tree / "closed").mkdir(mode=0o700)
    (tree / "closed").chmod(0o700)
    (tree / "listable-only").mkdir()
    (tree / "listable-only").chmod(0o751)
    files = {"shadow": 0o600, "public": 0o644, "open/deeper/key": 0o640, "open/deeper/ok": 0o444}
    for name, mode in files.items():
        (tree / name).write_text("x")
        (tree / name).chmod(mode)
    (tree / "link").symlink_to(tree / "shadow")
    found = set(root_only([str(tree)]))
    assert found == {
        tree / "shadow",
        tree / "closed",
        tree / "listable-only",
        tree / "open" / "deeper" / "key",
    }


async def test_the_child_takes_its_limits_before_it_runs(tmp_path: Path):
    import resource

    def enter() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (77, 77))

    finished = await run_process(
        ["sh", "-c", "ulimit -n"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout_s=10,
        output=Output(1000),
        preexec=enter,
    )
    assert finished.output.strip() == "77"


def test_root_only_files_are_walked_again_after_a_while(tmp_path: Path, monkeypatch):
    import noema.security.root_files as root_files

    tree = tmp_path / "sys"
    tree.mkdir()
    assert root_only([str(tree)]) == ()
    (tree / "new-key").write_text("x")
    (tree / "new-key").chmod(0o600)
    monkeypatch.setattr(root_files, "_REFRESH_S", 0.0)
    assert root_only([str(tree)]) == ()  # answered from the cache, a walk started
    for _ in range(3000):  # the walk runs in a thread of its own
        if root_only([str(tree)]) == (tree / "new-key",):
            break
        time.sleep(0.01)
    assert root_only([str(tree)]) == (tree / "new-key",)


@pytest.mark.skipif(os.geteuid() != 0, reason="root-only files are masked when the agent is root")
def test_a_root_inside_a_masked_system_folder_stays_visible():
    """The folder is masked all the same (its other entries stay hidden), the
    root mounted into the mask, and the mask made read-only after that."""
    masked = [p for p in root_only(system_folders()) if p.is_dir()]
    if not masked or os.geteuid() != 0:
        pytest.skip("this system has no root-only system folder, or this is not root")
    ws = masked[0] / "project"
    joined = " ".join(bwrap_argv("bwrap", Layout(ws, (ws,)), ["true"]))
    mask, bind = f"--tmpfs {masked[0]} ", f"--bind {ws} {ws}"
    sealed = f"--remount-ro {masked[0]} "
    assert joined.index(mask) < joined.index(bind) < joined.index(sealed)


async def test_a_bubblewrap_too_old_for_the_hardening_refuses(world: World, tmp_path: Path):
    fake = tmp_path / "old-bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: Unknown option --disable-userns' >&2\nexit 1\n")
    fake.chmod(0o755)
    world.build(shell=ShellSettings(bwrap_path=str(fake)))
    result = await world.call("shell_execute", command="echo ran > ran.txt")
    assert result.is_error and "too old" in result.content and "0.8" in result.content
    assert not (world.ws / "ran.txt").exists()
