"""The open guard's threads live exactly as long as the command.

A command's open of a pipe waits for its other end: the guard opens it in a
thread of its own, which must end with the command whatever happens to the
other end, leaving no descriptor behind and no thread without the agent's
capabilities (the C library would abort the agent at its next change of
user id). The thread that started the command, which the kernel counts as
bubblewrap's parent, must live as long as the command."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from noema.security.open_guard import Secrets, spawn
from noema.security.sandbox import Layout, Output, Sandbox
from noema.security.settings import ShellSettings

from .world import BWRAP

pytestmark = [
    pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here"),
    pytest.mark.slow,
]

NOTHING_SECRET = Secrets(named=lambda path: False, known=lambda fd, info: False)


def _layout(ws: Path) -> Layout:
    return Layout(ws, (ws,), secrets=NOTHING_SECRET)


def _descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _left_open(before: set[str]) -> set[str]:
    """Descriptors opened since `before` and still open. One-sided: the test
    process's other parts (a server of another test) may close theirs meanwhile."""
    return _descriptors() - before


def _threads() -> set[threading.Thread]:
    # The event loop's workers (asyncio.to_thread) are kept for later calls.
    return {t for t in threading.enumerate() if not t.name.startswith("asyncio_")}


async def _settled(sandbox: Sandbox, ws: Path) -> tuple[set[threading.Thread], set[str]]:
    """What the process holds once a first command made the sandbox ready."""
    finished = await sandbox.run(_layout(ws), "true", 20, Output(1000))
    assert finished.exit_code == 0, finished.output
    return _threads(), _descriptors()


def _waiting_on_a_pipe() -> bool:
    return any(t.name == "open-guard-pipe" for t in threading.enumerate())


@pytest.mark.parametrize("command", ["cat never.fifo", "echo x > never.fifo"])
async def test_a_timed_out_command_waiting_on_a_pipe_leaves_nothing_behind(tmp_path, command):
    os.mkfifo(tmp_path / "never.fifo")
    sandbox = Sandbox(ShellSettings())
    threads, descriptors = await _settled(sandbox, tmp_path)
    run = asyncio.ensure_future(sandbox.run(_layout(tmp_path), command, 5, Output(1000)))
    seen = False
    while not run.done():
        seen = seen or _waiting_on_a_pipe()
        await asyncio.sleep(0.02)
    assert seen, "the command never reached its open of the pipe"
    assert run.result().timed_out
    assert _threads() - threads == set()
    assert _left_open(descriptors) == set()


async def test_a_cancelled_command_waiting_on_a_pipe_leaves_nothing_behind(tmp_path):
    os.mkfifo(tmp_path / "never.fifo")
    sandbox = Sandbox(ShellSettings())
    threads, descriptors = await _settled(sandbox, tmp_path)
    run = asyncio.ensure_future(sandbox.run(_layout(tmp_path), "cat never.fifo", 60, Output(1000)))
    while not _waiting_on_a_pipe():  # its open, which the guard makes in a thread
        assert not run.done(), run.result()
        await asyncio.sleep(0.02)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert _threads() - threads == set()
    assert _left_open(descriptors) == set()


async def test_a_pipe_whose_other_end_comes_is_opened_as_asked(tmp_path):
    os.mkfifo(tmp_path / "go.fifo")
    sandbox = Sandbox(ShellSettings())
    threads, descriptors = await _settled(sandbox, tmp_path)

    def write_once() -> None:
        with open(tmp_path / "go.fifo", "w") as pipe:  # waits for the command's open
            pipe.write("through the pipe\n")

    writer = asyncio.ensure_future(asyncio.to_thread(write_once))
    finished = await sandbox.run(_layout(tmp_path), "cat go.fifo", 30, Output(1000))
    await writer
    assert finished.exit_code == 0 and finished.output == "through the pipe\n"
    assert _threads() - threads == set()
    assert _left_open(descriptors) == set()


@pytest.mark.skipif(os.geteuid() != 0, reason="changing the user id needs root")
def test_the_agent_may_change_its_user_id_after_a_command_waited_on_a_pipe(tmp_path):
    """In a process of its own: without the fix the C library aborts it."""
    os.mkfifo(tmp_path / "never.fifo")
    script = textwrap.dedent(
        f"""
        import asyncio, os
        from pathlib import Path
        from noema.security.sandbox import Layout, Output, Sandbox
        from noema.security.settings import ShellSettings
        from tests.security.test_open_guard_pipes import NOTHING_SECRET

        ws = Path({str(tmp_path)!r})
        layout = Layout(ws, (ws,), secrets=NOTHING_SECRET)
        done = asyncio.run(Sandbox(ShellSettings()).run(layout, "cat never.fifo", 1.5, Output(100)))
        assert done.timed_out, done
        os.seteuid(65534)
        os.seteuid(0)
        print("changed and back")
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "changed and back"


def _interpreters() -> list[str]:
    """This Python, and the system's (older ones hold the GIL while they vfork)."""
    found = [sys.executable]
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if os.access(system, os.X_OK):
        found.append(system)
    return found


@pytest.mark.parametrize("python", _interpreters())
def test_a_guarded_start_with_neighbouring_descriptors_does_not_hang(python):
    """Descriptors passed side by side make some Pythons' child read
    /proc/self/fd before its exec: a guarded call, which must be answered."""
    script = textwrap.dedent(
        """
        import os
        from noema.security.open_guard import spawn
        from tests.security.test_open_guard_pipes import NOTHING_SECRET

        a = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        b = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        assert b == a + 1
        process, guard = spawn(NOTHING_SECRET, ["/bin/true"], pass_fds=(a, b))
        process.wait()
        guard.close()
        print("started", process.returncode)
        """
    )
    root = Path(__file__).resolve().parents[2]
    path = os.pathsep.join(
        filter(None, [str(root / "src"), str(root), *sys.path[1:], os.environ.get("PYTHONPATH")])
    )
    done = subprocess.run(
        [python, "-c", script], cwd=root, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "started 0"


def _die_with_parent() -> None:
    # What bubblewrap's --die-with-parent asks for (PR_SET_PDEATHSIG, SIGKILL).
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def test_a_command_bound_to_its_parent_lives_while_the_guard_is_open():
    """The kernel's parent of a started process is the thread that forked
    it: that thread ending early would kill bubblewrap, the command with it."""
    process, guard = spawn(NOTHING_SECRET, ["/bin/sleep", "1"], preexec_fn=_die_with_parent)
    try:
        assert process.wait(timeout=30) == 0
    finally:
        guard.close()
    assert not any(t.name.startswith("open-guard") for t in threading.enumerate())


async def test_the_event_loop_goes_on_while_a_guard_closes(tmp_path, monkeypatch):
    """Closing waits for the guard's threads; a slow one must not stop the loop."""
    from noema.security import open_guard

    sandbox = Sandbox(ShellSettings())
    await _settled(sandbox, tmp_path)
    closing = threading.Event()
    real_close = open_guard.OpenGuard.close

    def slow_close(guard: open_guard.OpenGuard) -> None:
        closing.set()
        threading.Event().wait(0.5)  # a guard thread slow to end
        real_close(guard)

    monkeypatch.setattr(open_guard.OpenGuard, "close", slow_close)
    ticks_while_closing = 0

    async def tick() -> None:
        nonlocal ticks_while_closing
        while True:
            await asyncio.sleep(0.01)
            ticks_while_closing += closing.is_set()

    ticker = asyncio.ensure_future(tick())
    try:
        finished = await sandbox.run(_layout(tmp_path), "true", 20, Output(1000))
    finally:
        ticker.cancel()
    assert finished.exit_code == 0, finished.output
    assert closing.is_set(), "the command ran without its guard"
    assert ticks_while_closing >= 5
