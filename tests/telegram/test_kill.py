"""kill -9 at any moment: every message the Bot API delivered is taken by the
agent exactly once, over many kills and restarts of a real agent process."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from noema.memory.store import TurnStore
from noema.memory.turns import TurnKind
from tests.fakes.telegram_server import FakeTelegramServer

CHILD = Path(__file__).with_name("kill_child.py")
CHAT = 4242
ROUNDS = 4
PER_ROUND = 6
# Each start of an agent process takes seconds (more on a loaded machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def start(home: Path, server: FakeTelegramServer) -> subprocess.Popen:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(root), str(root / "src")])}
    child = subprocess.Popen([sys.executable, str(CHILD), str(home), server.base_url],
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("READY"):
            return child
    raise AssertionError(f"the agent did not start (exit {child.wait(10)})")


def taken_markers(home: Path) -> list[str]:
    """Every marker in the person's Telegram turns, in order (repeats kept)."""
    store = TurnStore(home / "agents" / "ana" / "turns.db")
    try:
        turns = store.range(1, store.last_id()) if store.last_id() else []
    finally:
        store.close()
    return [word for t in turns if t.kind is TurnKind.USER and t.channel == "telegram"
            for word in t.content.split() if word.startswith("m#")]


def test_killed_at_random_moments_the_agent_takes_each_message_once(tmp_path, server):
    rng = random.Random(11)
    home = tmp_path / "home"
    sent: list[str] = []
    for round_ in range(ROUNDS):
        child = start(home, server)
        try:
            for n in range(PER_ROUND):
                marker = f"m#{round_}.{n}"
                sent.append(marker)
                server.inject_text(CHAT, f"{marker} note")
            wanted = rng.randrange(0, PER_ROUND)  # kill once this many were taken…
            assert child.stdout is not None
            while wanted > 0:
                line = child.stdout.readline()
                if not line.startswith("TAKEN"):
                    break
                wanted -= sum(word.startswith("m#") for word in line.split())
            time.sleep(rng.uniform(0, 0.03))  # …and a moment more: anywhere in the work
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(10)
    missing = set(sent) - set(taken_markers(home))
    child = start(home, server)  # a last run, left to take what is still owed
    try:
        assert child.stdout is not None
        while missing:
            line = child.stdout.readline()
            assert line, "the agent ended before taking every message"
            missing -= set(line.split())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    taken = taken_markers(home)
    assert sorted(taken) == sorted(sent)  # each once: none lost, none doubled
    assert taken == sent  # and in the order they were sent
