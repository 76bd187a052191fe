"""A cancelled command's clean-up does not freeze the agent.

A command plants hundreds of repositories with hooks and a configuration
that runs a program, then blocks; the call is cancelled. The git check that
neutralises them must run while the event loop goes on serving the agent:
a concurrent task counts its turns, and the count is read from inside the
check, at its start and at its end. On the loop's own thread the check
would leave no room for a single turn.
"""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from noema.security import gitguard

from ..world import BWRAP

pytestmark = [
    pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

REPOSITORIES = 600
PLANT = (
    f"for i in $(seq {REPOSITORIES}); do mkdir -p r$i/.git/hooks && "
    "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > r$i/.git/config && "
    "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > r$i/.git/hooks/pre-commit; done; "
    ": > planted; cat block.fifo"  # no writer ever comes: it waits to be cancelled
)


async def test_the_loop_keeps_turning_while_a_cancelled_command_is_cleaned_up(
    world, monkeypatch
):
    os.mkfifo(world.ws / "block.fifo")
    turns = 0
    seen: list[tuple[str, int]] = []
    original = gitguard.GitGuard.check

    def watched_check(self, *args, **kwargs):
        seen.append(("start", turns))
        try:
            return original(self, *args, **kwargs)
        finally:
            seen.append(("end", turns))

    monkeypatch.setattr(gitguard.GitGuard, "check", watched_check)

    async def ticker(stop: asyncio.Event) -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0.001)

    call = asyncio.ensure_future(world.call("shell_execute", command=PLANT, timeout=500))
    planted = world.ws / "planted"
    while not planted.exists():  # the command's own sign that it is done planting
        assert not call.done(), call.result().content
        await asyncio.sleep(0.05)
    seen.clear()  # only the check after the cancellation counts
    stop = asyncio.Event()
    counting = asyncio.ensure_future(ticker(stop))
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    stop.set()
    await counting

    assert [what for what, _ in seen] == ["start", "end"]
    (_, at_start), (_, at_end) = seen
    assert at_end > at_start, "the event loop did not turn once during the clean-up"
    # And the clean-up did its work: every planted hook moved aside, every
    # configuration stripped of what would run.
    for i in range(1, REPOSITORIES + 1):
        git = world.ws / f"r{i}" / ".git"
        assert not (git / "hooks").exists(), git
        assert "fsmonitor" not in (git / "config").read_text()
    account = " ".join(world.contexts[-1].interruption)
    assert "cancelled while running" in account and "neutralised" in account


async def test_a_second_cancellation_does_not_cut_the_account_short(world, monkeypatch):
    """Cancelled again while its clean-up runs, the call still ends with its
    account told and its repositories neutralised."""
    os.mkfifo(world.ws / "block.fifo")
    call = asyncio.ensure_future(world.call(
        "shell_execute", command=PLANT.replace(str(REPOSITORIES), "40"), timeout=500))
    while not (world.ws / "planted").exists():
        assert not call.done()
        await asyncio.sleep(0.05)
    entered = threading.Event()
    original = gitguard.GitGuard.check

    def noting_check(self, *args, **kwargs):
        entered.set()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(gitguard.GitGuard, "check", noting_check)
    call.cancel()
    while not entered.is_set():
        await asyncio.sleep(0.01)
    call.cancel()  # again, while the clean-up runs in its thread
    with pytest.raises(asyncio.CancelledError):
        await call
    assert not (world.ws / "r40" / ".git" / "hooks").exists()
    assert "neutralised" in " ".join(world.contexts[-1].interruption)
