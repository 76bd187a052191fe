"""Class 6: a command cannot allocate or fork without bound.

Each attack runs through `shell_execute` under small limits and a short
time limit. Processes are counted as descendants of this test process (the
sandbox's are among them, whatever namespace they live in): the host's total
moves with everything else running on the machine, ours only with the
command. Tests that read how a limit was reported need a cgroup (root here,
or a delegated cgroup v2); with rlimits the command sees the refusal itself
(MemoryError, "Cannot fork") but the agent cannot tell why it failed.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
from collections import defaultdict
from pathlib import Path

import pytest

from noema.config import ConfigError, validate
from noema.security.limits import capped_by, cgroup_bases
from noema.security.sandbox import Output, run_process
from noema.security.settings import ShellSettings

from ..world import BWRAP, World

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")

MARGIN = 4  # bubblewrap's own processes, outside the count of some mechanisms
MEMORY_BY_CGROUP = capped_by(sandboxed=True)["memory"] == "cgroup"
PROCESSES_BY_CGROUP = capped_by(sandboxed=True)["processes"] == "cgroup"
needs_memory_cgroup = pytest.mark.skipif(
    not MEMORY_BY_CGROUP, reason="only a memory cgroup caps a command as a whole and says so"
)
needs_pids_cgroup = pytest.mark.skipif(
    not PROCESSES_BY_CGROUP, reason="only a pids cgroup records that a fork was refused"
)
# The shell starts a reader of the bomb's errors, then the bomb, and then
# forks no more: it waits for the reader, which ends at the first refused
# fork. So the command ends when the bomb has met the limit, not on a clock.
BOMB = ("mkfifo /tmp/errors; grep -m1 'Cannot fork' /tmp/errors & seen=$!; "
        "bomb() { bomb | bomb & }; (bomb) 2>/tmp/errors & wait $seen")
# The same bomb, then a wait for a writer that never comes: only the time
# limit ends it.
ENDLESS_BOMB = "mkfifo /tmp/never; bomb() { bomb | bomb & }; (bomb) & read line < /tmp/never"
# Each child waits for its parent to exit (end of file on a pipe only the
# parent holds open), so all of them are alive while the loop meets the limit.
FORK_LOOP = (
    "python3 -c \"\n"
    "import os\n"
    "r, w = os.pipe()\n"
    "n = 0\n"
    "try:\n"
    "    while n < 10000:\n"
    "        if os.fork() == 0:\n"
    "            os.close(w)\n"
    "            os.read(r, 1)\n"
    "            os._exit(0)\n"
    "        n += 1\n"
    "except OSError as exc:\n"
    "    print('refused after', n, exc.errno)\n"
    "\""
)


def descendant_pids(pid: int) -> set[int]:
    """The processes that descend from `pid`, now."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        children[int(text.rsplit(")", 1)[1].split()[1])].append(int(entry.name))
    found: set[int] = set()
    todo = list(children[pid])
    while todo:
        child = todo.pop()
        found.add(child)
        todo += children[child]
    return found


# Servers that other tests started once for the whole session (a mail server,
# say) are descendants too; only processes born after this module began count.
_BEFORE: set[int] = set()


@pytest.fixture(autouse=True)
def _servers_already_running():
    _BEFORE.clear()
    _BEFORE.update(descendant_pids(os.getpid()))


def descendants(pid: int) -> int:
    """How many processes descend from `pid`, now, leaving out those that
    were already running when the test began."""
    return len(descendant_pids(pid) - _BEFORE)


async def peak_while(call) -> tuple[object, int]:
    """Run `call`, sampling our descendants; the result and the most seen."""
    peak = 0
    task = asyncio.create_task(call)
    while not task.done():
        peak = max(peak, descendants(os.getpid()))
        await asyncio.sleep(0.05)
    return await task, peak


async def all_gone() -> bool:
    for _ in range(400):  # the kernel reaps a PID namespace asynchronously
        if descendants(os.getpid()) == 0:
            return True
        await asyncio.sleep(0.05)
    return False


def our_cgroups() -> list[Path]:
    prefix = f"noema-{os.getpid()}-"
    return [e for b in cgroup_bases() for e in b.folder.iterdir() if e.name.startswith(prefix)]


async def shell(world: World, command: str, timeout: float = 10, **limits) -> str:
    if limits:
        world.build(shell=ShellSettings(**limits))
    result = await world.call("shell_execute", command=command, timeout=timeout)
    assert not result.is_error, result.content
    return result.content


# -- processes -------------------------------------------------------------------------


async def test_a_fork_bomb_stays_within_the_process_limit(world: World):
    assert descendants(os.getpid()) == 0
    out, peak = await peak_while(shell(world, BOMB, timeout=5, max_processes=32))
    assert "Cannot fork" in out  # it did meet the limit
    assert peak <= 32 + MARGIN, f"{peak} processes under a limit of 32"
    assert await all_gone()


async def test_a_fork_bomb_that_outlives_its_time_limit_is_gone_after(world: World):
    out, peak = await peak_while(shell(world, ENDLESS_BOMB,
                                       timeout=2, max_processes=32))
    assert "timed out" in out
    assert peak <= 32 + MARGIN
    assert await all_gone()


async def test_a_fork_loop_is_refused_at_the_limit(world: World):
    out = await shell(world, FORK_LOOP, max_processes=32)
    found = re.search(r"refused after (\d+) 11", out)
    assert found, out
    assert int(found[1]) < 32


async def test_threads_count_against_the_limit(world: World):
    script = (
        "import threading\n"
        "started = 0\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
        "        started += 1\n"
        "except RuntimeError:\n"
        "    pass\n"
        "print('threads', started)\n"
    )
    out = await shell(world, f"python3 -c \"{script}\"", max_processes=32)
    assert int(re.search(r"threads (\d+)", out)[1]) < 32


async def test_processes_below_the_limit_run(world: World):
    # Twenty children alive at once: each waits for the parent to close a pipe.
    twenty = (
        "python3 -c \"\n"
        "import os\n"
        "r, w = os.pipe()\n"
        "for _ in range(20):\n"
        "    if os.fork() == 0:\n"
        "        os.close(w)\n"
        "        os.read(r, 1)\n"
        "        os._exit(0)\n"
        "os.close(w)\n"
        "for _ in range(20):\n"
        "    os.wait()\n"
        "print('all-done')\n"
        "\""
    )
    out = await shell(world, twenty, max_processes=32)
    assert "all-done" in out and "Cannot fork" not in out


@needs_pids_cgroup
async def test_the_process_limit_is_reported(world: World):
    out = await shell(world, FORK_LOOP, max_processes=32)
    assert "could not start more than 32 processes" in out and "max_processes" in out


# -- memory ----------------------------------------------------------------------------


async def test_allocating_1_gib_under_128_mb_fails(world: World):
    out = await shell(world, "python3 -c \"b = bytearray(1 << 30); print('allocated')\"",
                      memory_mb=128)
    assert "allocated" not in out
    assert not out.startswith("Exit code 0.")


async def test_an_allocation_within_the_limit_works(world: World):
    out = await shell(world, "python3 -c \"b = bytearray(64 << 20); print('allocated', len(b))\"",
                      memory_mb=256)
    assert out.startswith("Exit code 0.") and "allocated 67108864" in out


async def test_each_command_has_its_own_budget(world: World):
    world.build(shell=ShellSettings(memory_mb=128))
    for _ in range(3):
        out = await shell(world, "python3 -c \"b = bytearray(80 << 20); print('ok')\"")
        assert out.startswith("Exit code 0.") and "ok" in out


async def test_after_a_memory_kill_the_next_command_runs(world: World):
    world.build(shell=ShellSettings(memory_mb=128))
    await shell(world, "python3 -c \"b = bytearray(1 << 30)\"")
    out = await shell(world, "echo still-here")
    assert out.startswith("Exit code 0.") and "still-here" in out


@needs_memory_cgroup
async def test_the_memory_limit_is_reported(world: World):
    out = await shell(world, "python3 -c \"b = bytearray(1 << 30)\"", memory_mb=128)
    assert "hit the memory limit of 128 MB" in out and "memory_mb" in out


@needs_memory_cgroup
async def test_memory_is_capped_for_the_command_as_a_whole(world: World):
    # Four processes of 60 MB each: every one is within the limit, all
    # together are not. Per-process rlimits would let this through.
    # Each child says when it holds its memory and then waits for the parent,
    # which lets them go once all are ready or gone (killed for memory).
    hogs = (
        "python3 -c \"\n"
        "import os\n"
        "ready_r, ready_w = os.pipe()\n"
        "go_r, go_w = os.pipe()\n"
        "for _ in range(4):\n"
        "    if os.fork() == 0:\n"
        "        os.close(ready_r)\n"
        "        os.close(go_w)\n"
        "        b = bytearray(60 << 20)\n"
        "        b[::4096] = b'x' * len(b[::4096])\n"
        "        os.write(ready_w, b'x')\n"
        "        os.close(ready_w)\n"
        "        os.read(go_r, 1)\n"
        "        os._exit(0)\n"
        "os.close(ready_w)\n"
        "os.close(go_r)\n"
        "while os.read(ready_r, 1):\n"
        "    pass\n"
        "os.close(go_w)\n"
        "for _ in range(4):\n"
        "    os.wait()\n"
        "\""
    )
    out = await shell(world, hogs, memory_mb=128)
    assert "hit the memory limit" in out


async def test_tmp_cannot_hold_more_than_the_memory_limit(world: World):
    # /tmp is memory: with rlimits alone it would be unbounded. Its size is
    # capped (the write fails), and a memory cgroup may kill the writer first.
    out = await shell(world, "head -c 300M /dev/zero > /tmp/fill; echo rc=$?", memory_mb=128)
    assert "rc=0" not in out
    assert "No space left on device" in out or "hit the memory limit" in out, out


async def test_dev_cannot_hold_more_than_the_memory_limit(world: World):
    # /dev and its shared memory are tmpfs as well.
    out = await shell(world, "head -c 300M /dev/zero > /dev/shm/fill; echo shm=$?; "
                      "echo x > /dev/new-file; echo dev=$?", memory_mb=128)
    assert "shm=0" not in out and "dev=0" not in out
    assert "No space left on device" in out or "hit the memory limit" in out, out


async def test_shared_memory_and_terminals_still_work(world: World):
    script = (
        "import os, pty\n"
        "from multiprocessing import shared_memory\n"
        "block = shared_memory.SharedMemory(create=True, size=4096)\n"
        "block.close(); block.unlink()\n"
        "main, side = pty.openpty()\n"
        "os.write(side, b'ok')\n"
        "print('works', os.read(main, 2).decode())\n"
    )
    out = await shell(world, f"python3 -c \"{script}\"")
    assert "works ok" in out, out


# -- files -------------------------------------------------------------------------------


async def test_a_file_beyond_the_size_limit_is_cut_and_reported(world: World):
    out = await shell(world, "head -c 3M /dev/zero > big.bin", max_file_mb=1)
    assert (world.ws / "big.bin").stat().st_size <= 1024 * 1024
    assert "file size limit of 1 MB" in out


async def test_open_files_are_capped(world: World):
    script = (
        "import os\n"
        "fds = []\n"
        "try:\n"
        "    for _ in range(500):\n"
        "        fds.append(os.open('/dev/null', os.O_RDONLY))\n"
        "except OSError as exc:\n"
        "    print('refused at', len(fds), exc.errno)\n"
    )
    out = await shell(world, f"python3 -c \"{script}\"", max_open_files=64)
    found = re.search(r"refused at (\d+) 24", out)
    assert found and int(found[1]) < 64, out


async def test_the_command_cannot_raise_its_limits(world: World):
    out = await shell(world, "ulimit -n 100000 2>&1; echo rc=$?; ulimit -n; "
                      "prlimit --pid $$ --nofile=100000:100000 2>&1; ulimit -n",
                      max_open_files=64)
    lines = out.splitlines()
    assert "rc=0" not in out
    assert lines[-1] == "64"


# -- without the sandbox, and the clean-up ----------------------------------------------


async def test_memory_is_capped_without_the_sandbox_too(world: World):
    out = await shell(world, "python3 -c \"b = bytearray(1 << 30); print('allocated')\"",
                      sandbox="none", memory_mb=128)
    assert "allocated" not in out


@pytest.mark.skipif(
    capped_by(sandboxed=False)["processes"] != "cgroup",
    reason="outside a user namespace only a pids cgroup can count a command's processes",
)
async def test_processes_are_capped_without_the_sandbox_too(world: World):
    out = await shell(world, FORK_LOOP, sandbox="none", max_processes=32)
    found = re.search(r"refused after (\d+) 11", out)
    assert found and int(found[1]) < 32, out


async def test_the_agent_itself_stays_outside_the_commands_cgroups(world: World):
    before = Path("/proc/self/cgroup").read_text()
    await shell(world, "true", memory_mb=128, max_processes=32)
    assert Path("/proc/self/cgroup").read_text() == before


async def test_no_cgroup_is_left_behind(world: World):
    world.build(shell=ShellSettings(memory_mb=128, max_processes=32))
    await shell(world, "python3 -c \"b = bytearray(1 << 30)\"")
    await shell(world, FORK_LOOP)
    await shell(world, "true")
    assert our_cgroups() == []


async def test_no_cgroup_is_left_behind_a_cancelled_command(world: World):
    world.build(shell=ShellSettings(max_processes=32))
    # Two children waiting for a writer that never comes: only the cancel ends them.
    waiting = "mkfifo /tmp/never; read a < /tmp/never & read b < /tmp/never & wait"
    task = asyncio.create_task(world.call("shell_execute", command=waiting))
    for _ in range(100):
        if descendants(os.getpid()) >= 3:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await all_gone()
    for _ in range(400):  # removed in the background after a cancellation
        if not our_cgroups():
            break
        await asyncio.sleep(0.05)
    assert our_cgroups() == []


@pytest.mark.parametrize(
    "command, expected",
    [
        ("python3 -c \"print(sum(range(10**6)))\"", "499999500000"),
        ("git --version", "git version"),
        ("sh -c 'seq 1 1000 | sort | tail -1'", "999"),
        ("for i in 1 2 3; do (echo sub $i) & done; wait", "sub 3"),
    ],
)
async def test_ordinary_commands_work_under_the_default_limits(
    world: World, command: str, expected: str
):
    out = await shell(world, command)
    assert out.startswith("Exit code 0.") and expected in out


# -- the settings --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("timeout_s", math.nan, "finite number"),
        ("timeout_s", math.inf, "finite number"),
        ("timeout_s", -1, "greater than 0"),
        ("max_timeout_s", math.inf, "finite number"),
        ("max_timeout_s", 10**7, "less than or equal"),
        ("memory_mb", math.nan, "finite number"),
        ("memory_mb", -128, "greater than or equal to 64"),
        ("memory_mb", 10**9, "less than or equal"),
        ("max_processes", 0, "greater than or equal to 8"),
        ("max_processes", 2.5, "integer"),
        ("max_open_files", 10, "greater than or equal to 64"),
        ("max_file_mb", 0, "greater than or equal to 1"),
        ("output_cap_bytes", math.inf, "finite number"),
    ],
)
def test_a_bad_number_in_the_config_names_the_key_and_the_fix(key: str, value, words: str):
    with pytest.raises(ConfigError) as caught:
        validate({"shell": {key: value}}, "config.toml")
    message = str(caught.value)
    assert f"shell.{key}:" in message and words in message
    assert "Fix it in config.toml" in message and f"NOEMA__SHELL__{key.upper()}" in message


def test_the_default_limits_are_valid():
    shell = ShellSettings()
    assert (shell.memory_mb, shell.max_processes) == (2048, 256)
    assert shell.max_open_files >= 64 and shell.max_file_mb >= 1


@pytest.mark.parametrize("timeout", [math.nan, math.inf, 0, -1])
async def test_the_runner_refuses_a_time_limit_that_would_never_end(tmp_path: Path, timeout):
    with pytest.raises(ValueError, match="positive number of seconds"):
        await run_process(["true"], cwd=tmp_path, env={}, timeout_s=timeout, output=Output(1000))
    assert descendants(os.getpid()) == 0  # refused before anything started
