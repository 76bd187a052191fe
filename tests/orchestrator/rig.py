"""An agent wired for tests: real session, real perception pipeline, scripted tools,
and the checks every history must pass."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence

from noema.memory.session import Session
from noema.memory.turns import Flag, Turn, TurnKind
from noema.orchestrator.agent import Agent, AgentListener, Senses
from noema.orchestrator.context import build_messages, check_history
from noema.orchestrator.cycle import CycleSettings, ReasoningCycle
from noema.orchestrator.repair import CANCELLED_TOOL
from noema.orchestrator.settings import ReflexSettings
from noema.perception.archive import SensoryArchive
from noema.perception.clock import Clock, wall_clock
from noema.perception.events import SensorInfo
from noema.perception.packing import render_pool_event
from noema.perception.pipeline import Pipeline
from noema.perception.untrusted import SessionDelimiter
from noema.providers.anthropic_native import to_anthropic
from noema.providers.base import Provider
from noema.tools.registry import Tool, ToolRegistry

from .conftest import CATALOGUE

DELIMITER = SessionDelimiter("5eed5eed5eed")


def make_senses(catalogue: dict[str, SensorInfo] = CATALOGUE) -> Senses:
    pipeline = Pipeline(SensoryArchive(":memory:"), catalogue.values())
    return Senses(pipeline, lambda items, now: render_pool_event(items, DELIMITER, now=now))


class Recorder(AgentListener):
    """Remembers what the agent did and signals the moments tests wait for."""

    def __init__(self) -> None:
        self.decisions: list = []
        self.ends: list[tuple[str, str | None]] = []
        self.notices: list[str] = []
        self.idles = 0
        self.steps = 0
        self.streaming = asyncio.Event()
        self.tool_started = asyncio.Event()
        self.cycle_started = asyncio.Event()
        self.second_step_streaming = asyncio.Event()

    def on_decision(self, decision) -> None:
        self.decisions.append(decision)

    def on_cycle_start(self, cycle_id: int, origin: str) -> None:
        self.cycle_started.set()

    def on_model_request(self, step: int) -> None:
        self.steps = step

    def on_text(self, delta: str) -> None:
        self.streaming.set()
        if self.steps >= 1:
            self.second_step_streaming.set()

    def on_tool_start(self, call: Turn, side_effects: bool) -> None:
        self.tool_started.set()

    def on_cycle_end(self, cycle_id: int, outcome: str, error: str | None) -> None:
        self.ends.append((outcome, error))

    def on_notice(self, text: str) -> None:
        self.notices.append(text)

    def on_idle(self) -> None:
        self.idles += 1

    def of(self, kind: type) -> list:
        return [d for d in self.decisions if isinstance(d, kind)]


def make_agent(
    session: Session,
    provider: Provider,
    tools: Sequence[Tool] = (),
    *,
    reflexes: ReflexSettings | dict | None = None,
    senses: Senses | None = None,
    clock: Clock = wall_clock,
    max_steps: int = 12,
    **options: object,
) -> tuple[Agent, Recorder]:
    recorder = Recorder()
    registry = ToolRegistry(tools)
    cycle = ReasoningCycle(session, provider, registry, lambda: "You are a test.",
                           CycleSettings(max_steps=max_steps))
    if isinstance(reflexes, dict):
        reflexes = ReflexSettings.model_validate(reflexes)
    agent = Agent(session, cycle, recorder, context_window=100_000,
                  reflexes=reflexes or ReflexSettings(), senses=senses or make_senses(),
                  clock=clock, **options)  # type: ignore[arg-type]
    return agent, recorder


async def wait(flag: asyncio.Event, timeout: float = 10.0) -> None:
    await asyncio.wait_for(flag.wait(), timeout)


async def until(condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Wait until `condition()` holds, looking every 10 ms: generous, since on a
    loaded machine background work (a compaction, a commit) gets little CPU."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"still waiting after {timeout:.0f} s for {what}")
        await asyncio.sleep(0.01)


# -- the checks ---------------------------------------------------------------------------


def check_both_protocols(turns: Sequence[Turn]) -> None:
    """Raise unless both wire formats would accept the history as it stands."""
    messages = build_messages("You are a test.", turns)
    check_history(messages)
    _, wire = to_anthropic(messages)
    if wire and wire[0]["role"] != "user":
        raise AssertionError("the Anthropic conversation must start with the user")
    open_uses: set[str] = set()
    for index, message in enumerate(wire):
        if index and wire[index - 1]["role"] == message["role"]:
            raise AssertionError(f"roles do not alternate at message {index}")
        uses = {b["id"] for b in message["content"] if b["type"] == "tool_use"}
        answers = [b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"]
        if message["role"] == "user":
            if sorted(answers) != sorted(open_uses) or len(set(answers)) != len(answers):
                raise AssertionError(f"message {index} answers {answers}, open were {open_uses}")
            kinds = [b["type"] for b in message["content"]]
            if kinds != sorted(kinds, key=lambda kind: kind != "tool_result"):
                raise AssertionError(f"message {index}: tool results must come first")
            open_uses = set()
        else:
            if open_uses:
                raise AssertionError(f"message {index}: calls {open_uses} were never answered")
            open_uses = uses
    if open_uses:
        raise AssertionError(f"calls {open_uses} have no result at the end")


def check_notices(turns: Sequence[Turn]) -> None:
    """A cancellation notice is answered `true` and followed at once by the event."""
    for index, turn in enumerate(turns):
        if turn.kind is TurnKind.TOOL_CALL and turn.tool_name == CANCELLED_TOOL:
            answer = turns[index + 1]
            assert answer.call_id == turn.call_id and answer.content == "true", answer
            following = turns[index + 2]
            assert following.kind is TurnKind.USER or (
                following.kind is TurnKind.TOOL_CALL and following.tool_name == "pool_event"
            ), following


def event_ids(turns: Sequence[Turn]) -> list[str]:
    """Every "evt-N" label carried by a pool_event result in these turns."""
    found: list[str] = []
    for turn in turns:
        if turn.is_result and turn.tool_name == "pool_event":
            found += re.findall(r"evt-\d+", turn.content)
    return found


def result_for(turns: Sequence[Turn], call_id: str) -> Turn | None:
    return next((t for t in turns if t.is_result and t.call_id == call_id), None)


def never_discarded(session: Session) -> None:
    assert not any(t.has(Flag.DISCARDED) for t in session.turns)
