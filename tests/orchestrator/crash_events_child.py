"""A real agent with senses, for the event crash test: it is killed with SIGKILL.

Usage: python crash_events_child.py FOLDER ROUND. Opens (or creates) the turn
store and the sensory archive in FOLDER, starts the agent (which delivers
what a killed predecessor still owed), prints STARTED, then perceives
events without end: bursts on every channel, the "noisy" channel silenced
now and then, while a scripted model answers, polls pool_event() itself and
runs a side-effect tool, so packages are delivered, handed over, cancelled
safely and unsafely. Prints "ACK <event id> <label>" once the archive has
committed an event: from then on it must never be lost.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path

from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.orchestrator.agent import Agent, Senses
from noema.orchestrator.cycle import CycleSettings, ReasoningCycle
from noema.orchestrator.settings import ReflexSettings
from noema.perception.archive import SensoryArchive
from noema.perception.events import Event, Nature, SensorInfo, TreatmentParams, Urgency
from noema.perception.packing import render_pool_event
from noema.perception.pipeline import Pipeline
from noema.perception.tools import pool_event_tool
from noema.perception.untrusted import SessionDelimiter
from noema.providers.scripted import ScriptedProvider, call, say
from noema.tools.registry import ToolContext, ToolRegistry, tool

FLUSH_EVERY = 40
COMMIT_DELAY = 0.02
DELIMITER = SessionDelimiter("c0ffeec0ffee")

SENSORS = (
    SensorInfo("alerts", "alerts", Nature.DISCRETE, treatment=TreatmentParams(hold=4)),
    SensorInfo("logs", "log lines", Nature.AGGREGATABLE, treatment=TreatmentParams(window=0.05)),
    SensorInfo("chat", "chat", Nature.MERGEABLE,
               treatment=TreatmentParams(quiet_gap=0.02, max_hold=0.1, hold=3)),
    SensorInfo("mail", "unread mail", Nature.STATE),
    SensorInfo("pager", "pager", Nature.DISCRETE, default_urgency=Urgency.URGENT),
    SensorInfo("noisy", "a noisy feed", Nature.DISCRETE, treatment=TreatmentParams(hold=3)),
)

REFLEXES = ReflexSettings.model_validate({
    "rules": [{"channel": "alerts", "text": "prio", "urgency": "priority"}],
    "idle_quiet_window_s": 0.01, "idle_max_wait_s": 0.05, "world_tokens_per_hour": None,
})


@tool(side_effects=True)
def remember(ctx: ToolContext, thing: str) -> str:
    """Remember a thing.

    Args:
        thing: What.
    """
    return f"remembered {thing}"


def script(rng: random.Random) -> list:
    out = []
    for i in range(20_000):
        roll = rng.random()
        if roll < 0.3:
            out.append(say("", call("pool_event")))
        elif roll < 0.5:
            out.append(say("saving", call("remember", thing=str(i))))
        elif roll < 0.7:
            out.append(say("word " * rng.randrange(5, 60)))
        else:
            out.append(say(f"noted {i}"))
    return out


def build(folder: Path, provider: ScriptedProvider, *, flush_every: int = FLUSH_EVERY
          ) -> tuple[Agent, TurnStore, Pipeline]:
    """The agent as a composition root would wire it (also used by the test's last run)."""
    store = TurnStore(folder / "turns.db")
    session = Session.load(store)
    pipeline = Pipeline(SensoryArchive(folder / "archive.db", flush_every=flush_every), SENSORS)
    senses = Senses(pipeline, lambda items, now: render_pool_event(items, DELIMITER, now=now),
                    commit_delay=COMMIT_DELAY)
    agent_ref: list[Agent] = []
    tools = ToolRegistry([remember, pool_event_tool(lambda: agent_ref[0].pending_events())])
    cycle = ReasoningCycle(session, provider, tools, lambda: "You are a test.",
                           CycleSettings(max_steps=4))
    agent = Agent(session, cycle, context_window=10**7, reflexes=REFLEXES, senses=senses)
    agent_ref.append(agent)
    return agent, store, pipeline


def stimulus(rng: random.Random, label: str, now: float) -> Event:
    roll = rng.random()
    if roll < 0.3:
        text = f"{label} prio" if rng.random() < 0.2 else label
        return Event.create("alerts", text, received_at=now, sender=f"mon{rng.randrange(2)}")
    if roll < 0.55:
        return Event.create("logs", f"{label} timeout", received_at=now, sender="/var/log/app",
                            key=f"timeout {rng.randrange(3)}")
    if roll < 0.7:
        return Event.create("chat", label, received_at=now, sender=f"@u{rng.randrange(2)}",
                            authorised=True)
    if roll < 0.8:
        return Event.create("mail", f"{label} unread", received_at=now, sender="imap",
                            key=f"box{rng.randrange(2)}")
    if roll < 0.83:
        return Event.create("pager", label, received_at=now, sender="oncall")
    return Event.create("noisy", label, received_at=now, sender="feed")


async def main(folder: Path, round_: int) -> None:
    rng = random.Random(round_)
    provider = ScriptedProvider(script(rng), token_delay_s=0.0005)
    agent, _, pipeline = build(folder, provider)
    archive = pipeline.archive
    agent.start()
    print("STARTED", flush=True)
    sent: list[tuple[str, str]] = []
    told = 0
    n = 0
    while True:
        for _ in range(rng.randrange(1, 25)):
            label = f"evt-{round_}-{n}"
            n += 1
            if rng.random() < 0.02:
                pipeline.stop(["noisy"], rng.choice([0.01, 0.05, 0.2]), time.time())
            event = stimulus(rng, label, time.time())
            agent.perceive(event)
            sent.append((event.id, label))
            if archive.appended != len(sent):
                raise SystemExit("every event must be archived once")
        while told < min(archive.committed, len(sent)):
            print(f"ACK {sent[told][0]} {sent[told][1]}", flush=True)
            told += 1
        await asyncio.sleep(rng.choice([0, 0, 0.001, 0.005, 0.02]))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
