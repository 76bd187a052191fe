"""kill -9 at any moment loses no acknowledged turn; the next start repairs the rest."""

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.memory.turns import Flag, TurnKind
from noema.orchestrator.context import build_messages, check_history
from noema.orchestrator.repair import recover_crashed_cycles

CHILD = Path(__file__).with_name("crash_child.py")
pytestmark = pytest.mark.slow


def start(db: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(CHILD), str(db), mode], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def kill_after(child: subprocess.Popen, marker: str, extra_lines: int = 0) -> list[str]:
    seen = []
    for line in child.stdout:
        seen.append(line.strip())
        if line.startswith(marker):
            break
    for _ in range(extra_lines):
        seen.append(child.stdout.readline().strip())
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    return seen


def restart(db: Path):
    store = TurnStore(db)
    session = Session.load(store)
    told = recover_crashed_cycles(session)
    check_history(build_messages("system", session.turns))
    return store, session, told


def test_killed_inside_a_side_effect_tool(tmp_path):
    db = tmp_path / "turns.db"
    kill_after(start(db, "tool"), "IN-TOOL")
    store, session, told = restart(db)
    assert len(told) == 1 and "1 unfinished tool call" in told[0]
    results = [t for t in session.turns if t.kind is TurnKind.TOOL_RESULT]
    assert [r.tool_name for r in results] == ["remember", "slow_job"]
    assert results[0].content == "remembered a"  # a finished effect stays on record
    assert "Did not complete" in results[1].content and results[1].has(Flag.INTERRUPTED)
    assert session.turns[-1].kind is TurnKind.NOTE
    assert store.open_cycles() == []
    assert restart(db)[2] == []  # repairing twice does nothing more
    store.close()


def test_killed_while_the_answer_streams(tmp_path):
    db = tmp_path / "turns.db"
    kill_after(start(db, "stream"), "TEXT", extra_lines=20)
    store, session, told = restart(db)
    assert len(told) == 1
    # The half-written answer was never acknowledged: it is not anywhere.
    assert [t.kind for t in session.turns] == [
        TurnKind.USER, TurnKind.TOOL_CALL, TurnKind.TOOL_RESULT, TurnKind.NOTE]
    assert store.count() == 4
    store.close()


def test_killed_at_random_moments_loses_no_acknowledged_turn(tmp_path):
    rng = random.Random(7)
    db = tmp_path / "turns.db"
    acknowledged: list[int] = []
    for round_ in range(6):
        child = start(db, "loop")
        lines = kill_after(child, "ACK", extra_lines=rng.randrange(1, 120))
        acknowledged += [int(line.split()[1]) for line in lines if line.startswith("ACK")]
        store, session, _ = restart(db)
        stored = {t.id for t in store.get_many(acknowledged)}
        assert stored == set(acknowledged), f"round {round_} lost acknowledged turns"
        in_context = set(session.ids()) | {t.id for t in session.staged()}
        assert set(acknowledged) <= in_context
        assert store.open_cycles() == []
        store.close()
