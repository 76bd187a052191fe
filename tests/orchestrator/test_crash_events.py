"""kill -9 at any moment loses no acknowledged event and delivers none twice.

A real agent process (crash_events_child.py) perceives bursts of events
while a scripted model answers, polls and is cancelled; it is killed at
random moments, restarted (delivering what its predecessor still owed),
killed again. A last run in this process delivers the rest. Then every
event the child acknowledged must be accounted for exactly once: dropped
at a closed gate, or delivered by one pool_event result that shows it whole
or names its batch in a gap, and the turn store must agree with the
archive about every delivery.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from noema.memory.store import TurnStore
from noema.memory.turns import Flag, TurnKind
from noema.orchestrator.ledger import delivered_by
from noema.providers.scripted import ScriptedProvider, say

from .crash_events_child import build

CHILD = Path(__file__).with_name("crash_events_child.py")
LABEL = re.compile(r"evt-\d+-\d+")
pytestmark = pytest.mark.slow


def run_child(folder: Path, round_: int, acks: int) -> list[tuple[str, str]]:
    """Start the child, let it acknowledge `acks` events (0: kill as soon as it has
    started), SIGKILL it; the (event ID, label) pairs it acknowledged."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(folder), str(round_)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    acked: list[tuple[str, str]] = []
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("ACK"):
            _, event_id, label = line.split()
            acked.append((event_id, label))
        if (line.startswith("STARTED") and acks == 0) or (acks and len(acked) >= acks):
            break
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    errors = child.stderr.read() if child.stderr else ""
    child.stdout.close()
    if child.stderr:
        child.stderr.close()
    assert "Traceback" not in errors, errors
    return acked


async def deliver_the_rest(folder: Path) -> None:
    """A last, clean run: start (delivering what is owed) until nothing is left."""
    provider = ScriptedProvider([say(f"ok {i}") for i in range(2000)])
    agent, store, pipeline = build(folder, provider)
    agent.start()
    for _ in range(500):
        await agent.idle()
        if not agent.busy and next(pipeline.archive.undelivered(), None) is None:
            break
        await asyncio.sleep(0.02)
    await agent.close()
    pipeline.archive.close()
    store.close()


def archive_rows(folder: Path) -> tuple[dict, dict, list]:
    """Events by ID with their coordinates and batch kind; delivered runs by batch;
    and every delivery with its state."""
    with sqlite3.connect(folder / "archive.db") as db:
        events = {
            row[0]: row[1:] for row in db.execute(
                "SELECT e.id, e.batch, e.seq, b.dropped FROM events e"
                " JOIN batches b ON b.id = e.batch")
        }
        runs: dict[int, list] = {}
        for delivery, batch, first, last in db.execute(
                "SELECT r.delivery, r.batch, r.first, r.last FROM delivery_runs r"
                " JOIN deliveries d ON d.id = r.delivery WHERE d.state = 'delivered'"):
            runs.setdefault(batch, []).append((first, last, delivery))
        deliveries = db.execute(
            "SELECT id, token, after_turn, state FROM deliveries").fetchall()
    return events, runs, deliveries


def result_text(store: TurnStore, token: str, after_turn: int) -> str:
    row = store.conn.execute(
        "SELECT id FROM turns WHERE call_id = ? AND id > ? AND kind IN (?, ?) ORDER BY id"
        " LIMIT 1", (token, after_turn, TurnKind.EVENT.value, TurnKind.TOOL_RESULT.value),
    ).fetchone()
    turn = store.get(row[0])
    assert turn is not None
    return turn.content


def test_killed_at_random_moments_loses_no_acknowledged_event(tmp_path):
    rng = random.Random(11)
    acked: list[tuple[str, str]] = []
    for round_ in range(6):
        wanted = 0 if round_ == 3 else rng.randrange(30, 900)
        got = run_child(tmp_path, round_, wanted)
        acked += got
        if wanted:
            assert got, "the child acknowledged nothing"
        events, _, _ = archive_rows(tmp_path)
        missing = [label for event_id, label in acked if event_id not in events]
        assert not missing, f"round {round_}: acknowledged events not in the archive"
    asyncio.run(deliver_the_rest(tmp_path))

    events, runs, deliveries = archive_rows(tmp_path)
    assert all(state in ("delivered", "void") for *_, state in deliveries)
    store = TurnStore(tmp_path / "turns.db")
    texts = {d: result_text(store, token, after) for d, token, after, state in deliveries
             if state == "delivered"}
    for event_id, label in acked:
        batch, seq, dropped = events[event_id]
        covering = [d for first, last, d in runs.get(batch, []) if first <= seq <= last]
        if dropped:
            assert covering == [], f"{label} was dropped at the gate, then delivered"
            continue
        assert len(covering) == 1, f"{label} delivered {len(covering)} times"
        text = texts[covering[0]]
        assert label in LABEL.findall(text) or f"batch b{batch} " in text, label

    # No archived event, acknowledged or not, went out twice; the turn store
    # agrees with the archive about every delivery, and about no other.
    seen: Counter = Counter()
    for batch, spans in runs.items():
        for first, last, _ in spans:
            seen.update((batch, seq) for seq in range(first, last + 1))
    assert max(seen.values()) == 1
    for delivery, token, after, state in deliveries:
        assert delivered_by(store, token, after) == (state == "delivered"), delivery
    tokens = {(token, after) for _, token, after, state in deliveries if state == "delivered"}
    shown = Counter()
    for turn in store.range(1, store.last_id()):
        if turn.tool_name != "pool_event" or not turn.is_result:
            continue
        labels = LABEL.findall(turn.content)
        if not labels or turn.flags & (Flag.DISCARDED | Flag.ERROR | Flag.INTERRUPTED):
            continue
        call = store.conn.execute(
            "SELECT MAX(id) FROM turns WHERE call_id = ? AND id < ? AND kind = ?",
            (turn.call_id, turn.id, TurnKind.TOOL_CALL.value)).fetchone()[0]
        assert (turn.call_id, 0) in tokens or (turn.call_id, call) in tokens, turn.id
        shown.update(set(labels))
    assert max(shown.values()) == 1  # no label shown whole in two deliveries
    store.close()
