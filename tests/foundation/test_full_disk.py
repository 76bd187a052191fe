"""A full disk while the agent runs: messages are refused with the reason, nothing
acknowledged is lost, and the agent carries on by itself once there is room.

The agent's folder lives on a real, small tmpfs filled with a ballast file
(mounting needs root; the tests skip with the reason otherwise).
"""

from __future__ import annotations

import asyncio
import errno
import io
import logging
import os
import re
import subprocess
from pathlib import Path

import pexpect
import pytest

from noema import logs
from noema.memory.session import Session, StorageFull
from noema.memory.store import TurnStore
from noema.memory.turns import TurnKind
from noema.orchestrator.agent import Senses
from noema.perception.archive import SensoryArchive
from noema.perception.packing import render_pool_event
from noema.perception.pipeline import Pipeline
from noema.providers.scripted import ScriptedProvider, call, say
from noema.tools.registry import ToolContext, tool
from tests.orchestrator.conftest import CATALOGUE, event
from tests.orchestrator.rig import DELIMITER, check_both_protocols, event_ids, make_agent

from .test_cli import chat_with

REFUSED = re.compile(r"the disk holding (\S+) is full \((\d+) bytes free\); nothing was lost")


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 16 MiB tmpfs, unmounted afterwards whatever happens."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        # Lazy: a child that is still closing its files must not keep the mount.
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30)


def fill(folder: Path) -> Path:
    """Write a ballast file until the disk refuses even one more byte."""
    ballast = folder / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 1 << 12, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return ballast


async def test_a_message_on_a_full_disk_is_refused_and_the_next_one_answered(small_disk):
    store = TurnStore(small_disk / "turns.db")
    session = Session.load(store)
    agent, rec = make_agent(session, ScriptedProvider([say("First answer.")]))
    agent.submit("hello")
    await asyncio.wait_for(agent.idle(), 10)
    ballast = fill(small_disk)
    taken: list[int] = []
    big = "a long paste " * 5_000  # past whatever room the WAL kept
    with pytest.raises(StorageFull) as refused:
        for _ in range(50):
            taken.append(agent.submit(big).id)
            await asyncio.wait_for(agent.idle(), 10)
    message = str(refused.value)
    found = REFUSED.fullmatch(message)
    assert found and found.group(1) == str(small_disk), message
    assert agent.core.phase.value == "idle" and not agent.busy
    ballast.unlink()
    answered = agent.submit("are you there?")
    await asyncio.wait_for(agent.idle(), 10)
    assert session.turns[-2].id == answered.id and session.turns[-1].kind is TurnKind.ASSISTANT
    check_both_protocols(session.turns)
    await agent.close()
    store.close()
    again = TurnStore(small_disk / "turns.db")  # what was acknowledged is on disk
    try:
        assert [again.get(i) is not None for i in [*taken, answered.id]] == [True] * (
            len(taken) + 1)
    finally:
        again.close()


@tool(side_effects=True)
def fill_the_disk(ctx: ToolContext, folder: str) -> str:
    """Fill a folder's disk (what another program might do meanwhile).

    Args:
        folder: Where to put the ballast.
    """
    fill(Path(folder))
    return "x" * 300_000  # a result that needs room to be stored


async def test_a_disk_that_fills_mid_cycle_is_told_and_survived(small_disk):
    store = TurnStore(small_disk / "turns.db")
    session = Session.load(store)
    provider = ScriptedProvider([say("Filling.", call("fill_the_disk", folder=str(small_disk))),
                                 say("Never stored."), say("Room again.")])
    agent, rec = make_agent(session, provider, (fill_the_disk,))
    agent.submit("fill it")
    await asyncio.wait_for(agent.idle(), 10)
    told = [n for n in rec.notices if REFUSED.search(n)]
    assert told, rec.notices
    assert agent.core.phase.value == "idle"
    (small_disk / "ballast").unlink()
    agent.submit("and now?")
    await asyncio.wait_for(agent.idle(), 10)
    assert session.turns[-1].kind is TurnKind.ASSISTANT
    check_both_protocols(session.turns)
    await agent.close()
    store.close()


async def test_events_arriving_on_a_full_disk_neither_kill_the_agent_nor_flood_the_person(
    small_disk,
):
    store = TurnStore(small_disk / "turns.db")
    session = Session.load(store)
    archive = SensoryArchive(small_disk / "archive.db")
    senses = Senses(Pipeline(archive, CATALOGUE.values()),
                    lambda items, now: render_pool_event(items, DELIMITER, now=now),
                    commit_delay=0.01)
    agent, rec = make_agent(session, ScriptedProvider([]), senses=senses,
                            reflexes={"idle_quiet_window_s": 0, "idle_max_wait_s": 0,
                                      "world_tokens_per_hour": None})
    agent.submit("hi")
    await asyncio.wait_for(agent.idle(), 10)
    ballast = fill(small_disk)
    for number in range(40):
        agent.perceive(event("alerts", f"evt-{number} " + "x" * 2_000))
        await asyncio.sleep(0.02)  # let the archive try its group commit
        await asyncio.wait_for(agent.idle(), 10)
    told = [n for n in rec.notices if REFUSED.search(n)]
    assert len(told) == 1, rec.notices  # said once, not once per event
    assert agent.core.phase.value == "idle"
    ballast.unlink()
    agent.perceive(event("alerts", "evt-1000 after the room came back"))
    await asyncio.sleep(0.05)
    await asyncio.wait_for(agent.idle(), 10)
    assert "evt-1000" in event_ids(session.turns)
    answered = agent.submit("are you there?")
    await asyncio.wait_for(agent.idle(), 10)
    assert session.turns[-2].id == answered.id and session.turns[-1].kind is TurnKind.ASSISTANT
    check_both_protocols(session.turns)
    await agent.close()
    archive.close()
    store.close()


SCRIPT = '[[responses]]\ntext = "Answer one."\n'


def test_the_chat_refuses_on_a_full_disk_and_recovers_without_a_restart(small_disk):
    # No embeddings written in the background: which write meets the full disk
    # first must be the person's message, for the count below to mean anything.
    config = ("[models.reasoning]\nprovider = 'scripted'\nmodel = 'script'\n"
              "script = 'script.toml'\n[memory]\nembeddings = 'off'\n")
    with chat_with(small_disk, config, **{"script.toml": SCRIPT}) as chat:
        chat.expect("you> ")
        chat.sendline("hello")
        chat.expect("Answer one.")
        chat.expect("you> ")
        ballast = fill(small_disk)
        line = "a long line to paste " * 180  # under the terminal's 4 KiB line limit
        for attempt in range(60):
            chat.sendline(f"{attempt} {line}")
            seen = chat.expect([REFUSED.pattern, r"\(The scripted model has no more"])
            if seen == 0:
                break
            # The answer may be drawn more than once as it streams: wait for
            # the prompt, or the next attempt would match this answer again.
            chat.expect("you> ")
        else:
            pytest.fail("the disk never filled")
        chat.expect("you> ")
        ballast.unlink()
        chat.sendline("are you there?")
        chat.expect(r"\(The scripted model has no more responses")
        chat.expect("you> ")
        chat.sendline("/quit")
        chat.expect(pexpect.EOF)
        shown = chat.before or ""
    assert "Traceback" not in shown
    store = TurnStore(small_disk / "agents" / "default" / "turns.db")
    try:
        users = [t.content for t in store.range(1, 10_000) if t.kind is TurnKind.USER]
    finally:
        store.close()
    assert users[0] == "hello" and users[-1] == "are you there?"
    assert f"{attempt} {line}" not in users  # the refused one, and only it, is missing
    assert len(users) == attempt + 2, [u[:16] for u in users]  # short, to read a failure


def test_logging_on_a_full_disk_never_prints_a_traceback(small_disk, capsys):
    log_file = small_disk / "logs" / "noema.log"
    log_file.parent.mkdir()
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    terminal = io.StringIO()
    ballast = fill(small_disk)
    try:
        logs.setup(log_file, terminal=terminal)
        log = logging.getLogger("noema.test")
        try:
            raise ValueError("the first line\nand a second")
        except ValueError:
            log.exception("it broke:\n%s", "twice")
        log.error("the person was told already", extra=logs.SHOWN)
        log.info("for the file only")
        assert terminal.getvalue() == "noema: error: it broke: twice\n"
        stderr = capsys.readouterr().err
        assert "Traceback" not in stderr and "Logging error" not in stderr
        ballast.unlink()
        log.warning("room again")
        assert "room again" in log_file.read_text()  # the file came back by itself
    finally:
        root.handlers[:] = before[0]
        root.setLevel(before[1])
