"""The reflexes chapter of `noema demo`: a thought interrupted, safely and unsafely.

1. The person asks for a summary; while the model writes it, a colleague's
   chat message arrives (priority). Nothing with side effects has run, so the
   thought is cancelled safely: the half-written summary leaves the context
   (kept in the store, flagged discarded) and the cycle restarts as if the
   message had come just before.
2. The model writes a file with the real file tools (atomic, versioned) and
   then starts explaining; an urgent alert arrives. The write is real, so the
   cancellation is unsafe: the write stays, and the model is told at once that
   its operations were cancelled, and why.

After each, the history the model sees in its next request is printed.
The model is scripted; the store, session, perception pipeline, file tools
and reflexes are the real ones.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..interfaces.terminal.chat import call_line, one_line
from ..memory.session import Session
from ..memory.store import TurnStore
from ..memory.turns import Flag, Turn
from ..orchestrator.agent import Agent, AgentListener, Senses
from ..orchestrator.cycle import CycleSettings, ReasoningCycle
from ..orchestrator.decisions import (
    Decision,
    Deliver,
    KillTool,
    Queued,
    SafeCancel,
    StartCycle,
    UnsafeCancel,
)
from ..orchestrator.settings import ReflexSettings
from ..paths import AgentPaths
from ..perception.archive import SensoryArchive
from ..perception.events import Event, Nature, SensorInfo, TreatmentParams, Urgency
from ..perception.packing import render_pool_event
from ..perception.pipeline import Pipeline
from ..perception.untrusted import SessionDelimiter
from ..providers.base import Message, ModelRequest
from ..providers.scripted import ScriptedProvider, call, say
from ..security.settings import FilesSettings, HandsSettings, RootSettings
from ..tools.hands import build_hands
from ..tools.registry import ToolRegistry


class Writer(Protocol):
    def write(self, text: str) -> object: ...


SENSORS = (
    SensorInfo("chat", "messages from colleagues", Nature.MERGEABLE,
               treatment=TreatmentParams(quiet_gap=1.0, max_hold=5.0)),
    SensorInfo("pager", "the on-call pager", Nature.DISCRETE, default_urgency=Urgency.URGENT,
               can_silence=False),
)
REFLEXES = ReflexSettings(
    rules=({"channel": "chat", "authorised": True, "urgency": "priority"},),  # type: ignore[arg-type]
    idle_quiet_window_s=0.0,
    idle_max_wait_s=0.0,
)

SUMMARY = (
    "Here is the weekly summary. The storage migration moved forward: the new volumes are "
    "mounted and the first two services read from them. The backup job ran every night "
    "without errors, and the restore drill on Tuesday took eleven minutes. "
) * 3


class Narrator(AgentListener):
    """Prints the conversation and the reflexes' decisions as they happen."""

    def __init__(self, out: Writer) -> None:
        self.out = out
        self.streaming = False
        self.words = 0
        self.step = 0
        self.trigger: tuple[int, int, Callable[[], None]] | None = None

    def _line(self, text: str) -> None:
        if self.streaming:
            self.out.write("\n")
            self.streaming = False
        self.out.write(text + "\n")

    def on_model_request(self, step: int) -> None:
        self.step, self.words = step, 0

    def on_text(self, delta: str) -> None:
        if not self.streaming:
            self.out.write("  noema> ")
            self.streaming = True
        self.out.write(delta)
        self.words += 1
        if self.trigger and self.step == self.trigger[0] and self.words == self.trigger[1]:
            fire, self.trigger = self.trigger[2], None
            asyncio.get_running_loop().call_soon(fire)

    def on_turn(self, turn: Turn) -> None:
        if turn.is_call and not turn.has(Flag.SYNTHETIC):
            self._line(call_line(turn, 70))

    def on_tool_end(self, call: Turn, result: Turn) -> None:
        self._line(f"    → {one_line(result.content, 90)}")

    def on_decision(self, decision: Decision) -> None:
        said = _DECISION_TEXT.get(type(decision))
        if said is not None:
            self._line(f"  [reflexes] {said(decision)}")


_DECISION_TEXT: dict[type, Callable] = {
    SafeCancel: lambda d: f"{d.cause.describe()}; nothing with side effects has run: "
                          "SAFE cancellation (the half-written answer leaves the context)",
    UnsafeCancel: lambda d: f"{d.cause.describe()}; a side effect is real: UNSAFE cancellation "
                            "(what ran stays, the model is told)",
    KillTool: lambda d: f"stop the running tool {d.name}",
    Queued: lambda d: f"{d.urgency.value} entry waits: {d.reason.value}",
    Deliver: lambda d: "deliver "
    + ("haveCurrentOperationsBeenCancelled() → true, then " if d.notice else "")
    + f"{len(d.package.entries)} package entr{'y' if len(d.package.entries) == 1 else 'ies'}",
    StartCycle: lambda d: f"start cycle {d.run} ({d.origin.value})",
}


def print_history(out: Writer, request: ModelRequest) -> None:
    """The messages of a model request, one line each (the system prompt left out)."""
    out.write("  The history the model sees in its next request:\n")
    for message in request.messages[1:]:
        out.write("    " + _message_line(message) + "\n")


def _message_line(message: Message) -> str:
    role = message.role.value
    if message.tool_calls:
        calls = ", ".join(f"{c.name}({one_line(c.arguments, 40) if c.arguments != '{}' else ''})"
                          for c in message.tool_calls)
        text = f" «{one_line(message.content, 40)}»" if message.content else ""
        return f"{role:<9}{text} calls {calls}"
    if message.tool_name == "pool_event":
        # The packed events whole (the envelope is the point), the preamble cut short.
        lines = [one_line(line, 100) for line in message.content.splitlines()]
        return f"{role:<9} " + "\n              ".join(lines)
    return f"{role:<9} {one_line(message.content, 110)}"


def _agent(
    paths: AgentPaths, provider: ScriptedProvider, tools: ToolRegistry, narrator: Narrator
) -> tuple[Agent, TurnStore, Pipeline]:
    store = TurnStore(paths.turns_db)
    session = Session.load(store)
    pipeline = Pipeline(SensoryArchive(paths.archive_db), SENSORS)
    delimiter = SessionDelimiter.new()
    senses = Senses(pipeline, lambda items, now: render_pool_event(items, delimiter, now=now))
    cycle = ReasoningCycle(session, provider, tools, lambda: "You are Noema, a careful assistant.",
                           CycleSettings(max_steps=6))
    agent = Agent(session, cycle, narrator, context_window=provider.context_window,
                  reflexes=REFLEXES, senses=senses)
    return agent, store, pipeline


async def safe_path(out: Writer, paths: AgentPaths, pace: float) -> None:
    out.write("\n--- A priority event during a thought with no side effects ---\n")
    provider = ScriptedProvider(
        [say(SUMMARY),
         say("Ana asks whether the migration can wait until Monday. Yes: the two services on "
             "the new volumes are stable, and the rest can move then. I'll add that to the "
             "summary.")],
        token_delay_s=pace,
    )
    narrator = Narrator(out)
    agent, store, pipeline = _agent(paths, provider, ToolRegistry(), narrator)
    message = Event.create("chat", "can the migration wait until Monday?", sender="@ana",
                           authorised=True, received_at=time.time())
    narrator.trigger = (0, 12, lambda: agent.perceive(message))
    try:
        out.write("  person> Draft the weekly summary for the team.\n")
        agent.submit("Draft the weekly summary for the team.")
        await agent.idle()
        narrator._line("")
        discarded = [t for t in store.range(1, store.last_id()) if t.has(Flag.DISCARDED)]
        for turn in discarded:
            out.write(f"  In the store, flagged discarded: turn {turn.id} ({turn.kind}, "
                      f"{len(turn.content.split())} words): «{one_line(turn.content, 60)}»\n")
        print_history(out, provider.requests[-1])
        out.write("  For the model, Ana's message simply arrived before it began to write.\n")
    finally:
        await agent.close()
        store.close()
        pipeline.archive.close()


async def unsafe_path(out: Writer, paths: AgentPaths, workspace: Path, pace: float) -> None:
    out.write("\n--- An urgent alert after a file write ---\n")
    hands = build_hands(
        HandsSettings(files=FilesSettings(roots=(RootSettings(path=workspace),))),
        paths, watch_changes=False,
    )
    tools = ToolRegistry(t for t in hands.tools if t.name in {"file_write", "file_read"})
    provider = ScriptedProvider(
        [say("I'll save the summary first.",
             call("file_write", path="notes/summary.md", content="# Weekly summary\n\n" + SUMMARY)),
         say("Saved. Now let me explain each point of the summary in detail, starting with the "
             "storage migration and why the order of the services matters " * 3),
         say("The summary is saved in notes/summary.md (that write happened). I stopped the "
             "explanation: the database server is down. Let me look at that first.")],
        token_delay_s=pace,
    )
    narrator = Narrator(out)
    agent, store, pipeline = _agent(paths, provider, tools, narrator)
    alert = Event.create("pager", "db-1 is not answering (3 failed health checks)",
                         sender="monitoring", received_at=time.time())
    narrator.trigger = (1, 10, lambda: agent.perceive(alert))
    try:
        out.write("  person> Save the summary to notes, then walk me through it.\n")
        agent.submit("Save the summary to notes, then walk me through it.")
        await agent.idle()
        narrator._line("")
        saved = workspace / "notes" / "summary.md"
        out.write(f"  On disk: {saved.name} exists ({saved.stat().st_size} bytes), versioned.\n")
        print_history(out, provider.requests[-1])
        out.write(
            "  The write stays in the history with its real result; the cancellation notice\n"
            "  and the alert come right after it, in one step: the model knows what it did,\n"
            "  that it was cancelled, and why.\n"
        )
    finally:
        await agent.close()
        store.close()
        pipeline.archive.close()
        hands.close()


async def run_reflexes_demo(out: Writer, home: Path, *, pace: float = 0.01) -> None:
    """Both paths, on agent data under `home` (a fresh temporary folder)."""
    out.write("\nReflexes: urgency decides when an event may interrupt a thought.\n")
    safe_paths = AgentPaths.for_agent("reflexes-safe", home).ensure()
    unsafe_paths = AgentPaths.for_agent("reflexes-unsafe", home).ensure()
    await safe_path(out, safe_paths, pace)
    await unsafe_path(out, unsafe_paths, home / "workspace", pace)


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="noema-reflexes-") as folder:
        asyncio.run(run_reflexes_demo(sys.stdout, Path(folder)))
