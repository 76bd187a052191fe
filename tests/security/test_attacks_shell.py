"""Escapes through `shell_execute`. Each test runs the escape in the sandbox
and checks the outside world (files, processes, the network) is unchanged
and that no secret came back in the output."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from noema.security.settings import RootSettings, ShellSettings

from .world import AGENT_SECRET, BWRAP, OUTSIDE_SECRET, PERSON_GIT, World, tree_snapshot

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")


async def run(world: World, command: str, **extra):
    result = await world.call("shell_execute", command=command, **extra)
    assert OUTSIDE_SECRET not in result.content
    assert AGENT_SECRET not in result.content
    return result


def processes_with(marker: str) -> list[int]:
    """PIDs (host view) of `sleep <marker>` processes, wherever they run."""
    wanted = b"sleep\0" + marker.encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline == wanted:
            found.append(int(entry.name))
    return found


async def gone(marker: str) -> bool:
    # The kernel tears a PID namespace down asynchronously; give it a moment
    # (long on a busy machine).
    for _ in range(400):
        if not processes_with(marker):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_write_outside_by_parent_path(world: World):
    before = tree_snapshot(world.outside)
    await run(world, "echo pwned > ../outside/secret.txt; echo pwned > ../outside/new.txt")
    assert tree_snapshot(world.outside) == before


async def test_write_outside_by_absolute_path(world: World):
    before = tree_snapshot(world.outside)
    await run(
        world, f"mkdir -p {world.outside}; echo pwned > {world.secret}; echo x > {world.outside}/n"
    )
    assert tree_snapshot(world.outside) == before


async def test_write_into_system_folders(world: World):
    result = await run(
        world, "echo pwned > /etc/noema-pwned; echo pwned > /usr/noema-pwned; echo done"
    )
    assert "Read-only file system" in result.content
    assert not Path("/etc/noema-pwned").exists() and not Path("/usr/noema-pwned").exists()


async def test_write_into_the_real_home(world: World):
    marker = Path.home() / ".noema-sandbox-pwned"
    await run(
        world,
        f"echo pwned > {marker}; mkdir -p {Path.home()}/.ssh && echo k > {Path.home()}/.ssh/x",
    )
    assert not marker.exists()
    assert not (Path.home() / ".ssh" / "x").exists()


async def test_remount_read_write(world: World):
    result = await run(
        world,
        "mount -o remount,rw /usr 2>&1; mount -t tmpfs none /usr 2>&1; "
        "touch /usr/noema-pwned 2>&1; echo end",
    )
    assert "end" in result.content
    assert not Path("/usr/noema-pwned").exists()


async def test_write_into_workspace_git(world: World):
    before = tree_snapshot(world.ws / ".git")
    await run(world, "echo pwned > .git/config; mkdir .git/hooks; rm -rf .git; ln -s /tmp .git/x")
    assert tree_snapshot(world.ws / ".git") == before
    assert (world.ws / ".git" / "config").read_text() == PERSON_GIT


async def test_write_into_git_through_a_link(world: World):
    before = tree_snapshot(world.ws / ".git")
    await run(world, "ln -s .git g && echo pwned > g/config")
    assert tree_snapshot(world.ws / ".git") == before


async def test_read_outside_secret(world: World):
    result = await run(world, f"cat {world.secret}; cat ../outside/secret.txt; ls {world.outside}")
    assert "No such file" in result.content


async def test_read_through_proc_1_root(world: World):
    await run(world, f"cat /proc/1/root{world.secret}; cat /proc/self/root{world.secret}")


async def test_read_agent_data_outside_workspace(world: World):
    await run(world, f"cat {world.paths.root}/secrets.toml; ls -R {world.paths.root}")


async def test_read_agent_data_inside_workspace(inner_world: World):
    secrets = inner_world.paths.root / "secrets.toml"
    before = secrets.read_bytes()
    result = await run(
        inner_world,
        "cat .noema/agents/t/secrets.toml; echo LISTED=$(ls -A .noema/agents/t | wc -l); "
        "echo x > .noema/agents/t/secrets.toml",
    )
    assert "LISTED=0" in result.content
    assert secrets.read_bytes() == before
    # ...and the agent's data never enters the workspace's history.
    assert ".noema" not in inner_world.git("log", "--name-only", "--format=")


async def test_read_agent_history(world: World):
    await world.call("file_write", path="a.txt", content=OUTSIDE_SECRET[:3] + "\n")
    gitdir = world.gitdir()
    before = tree_snapshot(gitdir)
    result = await run(world, f"ls {gitdir} && echo pwned > {gitdir}/HEAD")
    assert "No such file" in result.content
    assert (gitdir / "HEAD").read_text().startswith("ref:")
    assert {k: v for k, v in tree_snapshot(gitdir).items() if "HEAD" in k} == {
        k: v for k, v in before.items() if "HEAD" in k
    }


async def test_secret_at_the_top_of_the_workspace_is_hidden(world: World):
    (world.ws / ".env").write_text(f"KEY={OUTSIDE_SECRET}\n")
    await run(world, "cat .env; grep -r TOP-SECRET . 2>/dev/null")
    assert (world.ws / ".env").read_text() == f"KEY={OUTSIDE_SECRET}\n"


async def test_agent_environment_does_not_leak(world: World, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-LEAK-0123456789")
    result = await run(world, "env; cat /proc/self/environ | tr '\\0' '\\n'")
    assert "sk-LEAK" not in result.content


async def test_network_to_the_host_is_cut(world: World):
    contacts = []

    async def on_connect(reader, writer):
        contacts.append(await reader.read(100))
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    probe = (
        f"python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', {port}), "
        "timeout=2); s.sendall(b'leak'); print('CONNECTED')\""
    )
    try:
        result = await run(world, probe)
        assert "CONNECTED" not in result.content
        assert "refused" in result.content.lower() or "unreachable" in result.content.lower()
        # Positive control: with the network allowed, the same probe does connect.
        world.build(shell=ShellSettings(network=True))
        allowed = await run(world, probe)
        assert "CONNECTED" in allowed.content
        for _ in range(400):  # the server's side reads it on this loop
            if contacts:
                break
            await asyncio.sleep(0.05)
        assert contacts == [b"leak"]
    finally:
        server.close()
        await server.wait_closed()


async def test_host_processes_cannot_be_signalled(world: World):
    victim = subprocess.Popen(["sleep", "30"])
    try:
        result = await run(world, f"kill -9 {victim.pid} 2>&1; ps ax 2>/dev/null | wc -l")
        assert victim.poll() is None
        assert "No such process" in result.content or "kill" in result.content
    finally:
        victim.kill()
        victim.wait()


async def test_background_process_dies_with_the_command(world: World):
    marker = "31.41592"
    await run(world, f"(sleep {marker} >/dev/null 2>&1 &); echo started")
    assert await gone(marker)


async def test_timeout_kills_the_whole_tree(world: World):
    marker = "31.41593"
    result = await run(world, f"sleep {marker} & sleep 30", timeout=0.4)
    assert "timed out" in result.content
    assert await gone(marker)


async def test_huge_output_is_capped(world: World):
    result = await run(world, "yes 0123456789 | head -c 20000000")
    assert len(result.content) < 30_000 + 1_000
    assert "bytes of output omitted" in result.content
    assert "Exit code 0" in result.content


async def test_cancellation_kills_the_command(world: World):
    command = "i=0; while true; do i=$((i+1)); echo tick $i; echo $i > ticks.txt; sleep 0.05; done"
    task = asyncio.create_task(world.call("shell_execute", command=command))
    ticks = world.ws / "ticks.txt"
    deadline = time.monotonic() + 30  # the sandbox starts slowly on a busy machine
    while not (ticks.exists() and ticks.read_text().strip() not in ("", "1")):
        assert time.monotonic() < deadline, "the command never ticked twice"
        assert not task.done(), task.result().content
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    settled = ticks.read_text()
    await asyncio.sleep(0.3)
    assert ticks.read_text() == settled  # nothing is running any more
    told = world.contexts[-1].interruption  # what the model will read
    assert len(told) == 1 and "killed with all its processes" in told[0]
    assert "tick" in told[0]
    assert "recorded as version" in told[0]  # the file it had made is versioned


async def test_link_to_outside_made_in_the_shell_is_refused_by_file_tools(world: World):
    await run(world, f"ln -s {world.secret} leak.txt; ln -s {world.outside} leakdir")
    assert (world.ws / "leak.txt").is_symlink()
    for path in ("leak.txt", "leakdir/secret.txt"):
        result = await world.call("file_read", path=path)
        assert result.is_error and OUTSIDE_SECRET not in result.content


async def test_hard_link_to_outside_cannot_be_made(world: World):
    await run(world, f"ln {world.secret} hard.txt; ln /etc/hostname host.txt")
    assert not (world.ws / "hard.txt").exists()
    result = await world.call("file_read", path="hard.txt")
    assert result.is_error and OUTSIDE_SECRET not in result.content


async def test_read_only_root_stays_read_only(world: World):
    world.extra_roots = (RootSettings(path=world.outside, mode="read-only"),)
    world.build()
    before = tree_snapshot(world.outside)
    result = await world.call(
        "shell_execute", command=f"cat {world.secret}; echo pwned > {world.secret}"
    )
    assert OUTSIDE_SECRET in result.content  # visible, as configured
    assert "Read-only file system" in result.content
    assert tree_snapshot(world.outside) == before


async def test_sandbox_dies_with_the_agent(world: World):
    """kill -9 of the agent process takes the sandboxed command with it."""
    marker = "31.41594"
    repo = Path(__file__).parents[2]
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.security.shell_child",
            str(world.ws),
            str(world.paths.root),
            f"sleep {marker}",
        ],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, (str(repo), os.environ.get("PYTHONPATH")))
        )},
    )
    try:
        deadline = time.monotonic() + 30
        while not processes_with(marker) and time.monotonic() < deadline and agent.poll() is None:
            await asyncio.sleep(0.05)
        assert processes_with(marker), "the sandboxed command never started"
    finally:
        agent.kill()
        agent.wait()
    assert await gone(marker)
