"""Whatever fails around a cycle, the agent says so in one line and answers the next message.

Each case makes one real step of a cycle raise once (the step's own function
is replaced by one that fails on its first call, then behaves), drives the
agent through that step, and checks the same things: the person was told,
the failure is in the log with its traceback, the agent went back to idle,
the history is still valid for both protocols, no cycle is left open, and
the next message is answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from noema.app import build_app
from noema.config import Config
from noema.identity import Identity
from noema.memory.session import Session, StorageFull
from noema.memory.settings import MemorySettings
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind
from noema.orchestrator import agent as agent_module
from noema.orchestrator import cycle as cycle_module
from noema.orchestrator.agent import Agent
from noema.orchestrator.core import Phase
from noema.orchestrator.ledger import DeliveryLedger
from noema.orchestrator.prompt import build_system_prompt
from noema.paths import AgentPaths
from noema.providers.base import ResponseBuilder
from noema.providers.scripted import ScriptedProvider, call, say
from noema.tools.registry import ToolContext, ToolRegistry, tool

from .conftest import event
from .rig import Recorder, check_both_protocols, make_agent, until, wait


class Injected(RuntimeError):
    """The failure a test plants in one step of a cycle."""


@tool(side_effects=True)
def write_note(ctx: ToolContext, text: str) -> str:
    """Write a note.

    Args:
        text: The note.
    """
    return f"wrote {text!r}"


@tool(side_effects=True)
async def slow_job(ctx: ToolContext) -> str:
    """A long command."""
    await asyncio.sleep(30)
    return "done"


def fail_once(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[bool]:
    """Make `owner.name` raise `Injected` on its first call; returns whether it fired."""
    real = getattr(owner, name)
    fired: list[bool] = []

    def broken(*args, **kwargs):
        if not fired:
            fired.append(True)
            raise Injected(f"planted in {name}")
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, broken)
    return fired


def fail_mid_stream(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[bool]:
    """Make the first stream break after its first event, with an error of ours."""
    real = ScriptedProvider.stream
    fired: list[bool] = []

    async def broken(self, request):
        async for item in real(self, request):
            yield item
            if not fired:
                fired.append(True)
                raise Injected("planted in the middle of the stream")

    monkeypatch.setattr(ScriptedProvider, "stream", broken)
    return fired


# -- how each scenario reaches its step ---------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    script: list
    tools: tuple = ()
    drive: Callable[[Agent, Recorder], Awaitable[None]] = None  # type: ignore[assignment]
    delay: float = 0.0


async def answer_plainly(agent: Agent, rec: Recorder) -> None:
    agent.submit("hello")


async def use_a_tool(agent: Agent, rec: Recorder) -> None:
    agent.submit("note it")


async def interrupt_safely(agent: Agent, rec: Recorder) -> None:
    agent.submit("tell me a long story")
    await wait(rec.streaming)
    agent.submit("actually, something else")  # a message cancels a thought with no side effect


async def interrupt_unsafely(agent: Agent, rec: Recorder) -> None:
    agent.submit("run the job")
    await wait(rec.tool_started)
    agent.perceive(event("pager", "evt-1 server down"))  # urgent: cancels a side effect


async def stop(agent: Agent, rec: Recorder) -> None:
    agent.submit("tell me a long story")
    await wait(rec.streaming)
    await agent.stop()


PLAIN = Scenario([say("Hello there, friend.")], drive=answer_plainly)
TOOL = Scenario([say("Noting.", call("write_note", text="x")), say("Noted.")], (write_note,),
                drive=use_a_tool)
SAFE = Scenario([say("word " * 300), say("Something else, then.")], drive=interrupt_safely,
                delay=0.002)
UNSAFE = Scenario([say("Running it.", call("slow_job")), say("The server first.")], (slow_job,),
                  drive=interrupt_unsafely)
STOP = Scenario([say("word " * 300)], drive=stop, delay=0.002)

# Every step the shell runs for a cycle: (what, where it lives, its name, how to break it, scenario)
STEPS = [
    ("delivering the message", agent_module, "write_package", fail_once, PLAIN),
    ("opening the cycle in the store", TurnStore, "open_cycle", fail_once, PLAIN),
    ("building the prompt", cycle_module, "build_context", fail_once, PLAIN),
    ("starting the model's stream", ScriptedProvider, "stream", fail_once, PLAIN),
    ("the middle of the stream", ScriptedProvider, "stream", fail_mid_stream, PLAIN),
    ("assembling the response", ResponseBuilder, "build", fail_once, PLAIN),
    ("storing the response", Session, "append_all", fail_once, PLAIN),
    ("settling events handed over", DeliveryLedger, "settle_handed", fail_once, PLAIN),
    ("closing the cycle in the store", TurnStore, "close_cycle", fail_once, PLAIN),
    ("checking a tool call", ToolRegistry, "check", fail_once, TOOL),
    ("running a tool", ToolRegistry, "run", fail_once, TOOL),
    ("storing a tool result", cycle_module, "result_turn", fail_once, TOOL),
    ("repairing after a safe cancellation", agent_module, "discard_cycle", fail_once, SAFE),
    ("repairing after an unsafe cancellation", agent_module, "answer_unfinished", fail_once,
     UNSAFE),
    ("repairing after a stop", agent_module, "keep_partial_text", fail_once, STOP),
]


async def check_answers_next(agent: Agent, session: Session) -> None:
    agent.submit("are you there?")
    await asyncio.wait_for(agent.idle(), 10)
    assert agent.core.phase is Phase.IDLE
    asked = max(i for i, t in enumerate(session.turns) if t.content == "are you there?")
    assert [t.kind for t in session.turns[asked:]] == [TurnKind.USER, TurnKind.ASSISTANT]


@pytest.mark.parametrize(("what", "owner", "name", "breaker", "scenario"), STEPS,
                         ids=[step[0] for step in STEPS])
async def test_a_failure_at_any_step_is_told_and_the_next_message_answered(
    session, monkeypatch, caplog, what, owner, name, breaker, scenario
):
    provider = ScriptedProvider(scenario.script, token_delay_s=scenario.delay)
    agent, rec = make_agent(session, provider, scenario.tools)
    fired = breaker(monkeypatch, owner, name)
    with caplog.at_level(logging.ERROR, logger="noema.orchestrator.agent"):
        await scenario.drive(agent, rec)
        await asyncio.wait_for(agent.idle(), 10)
    assert fired, f"the scenario never reached {what}"
    told = [n for n in rec.notices if "Injected" in n]
    assert len(told) == 1 and "\n" not in told[0] and "ready" in told[0], rec.notices
    logged = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], Injected)]
    assert logged, "the failure and its traceback are in the log"
    assert agent.core.phase is Phase.IDLE and not agent.busy
    check_both_protocols(session.turns)
    assert session.store.open_cycles() == []
    await check_answers_next(agent, session)
    check_both_protocols(session.turns)
    await agent.close()


async def test_a_failing_after_cycle_step_is_told_and_the_next_message_answered(session):
    fired: list[bool] = []

    def compact() -> None:
        if not fired:
            fired.append(True)
            raise Injected("planted in the compactor's after-cycle step")

    agent, rec = make_agent(session, ScriptedProvider([say("Hi.")]), after_cycle=compact)
    agent.submit("hello")
    await asyncio.wait_for(agent.idle(), 10)
    assert fired and any("Injected" in n for n in rec.notices)
    assert rec.idles >= 1  # the prompt came back
    await check_answers_next(agent, session)
    await agent.close()


async def test_a_store_that_fails_every_write_of_a_cycle_still_leaves_the_agent_answering(
    session, monkeypatch
):
    """The repair fails as well (a damaged page): what cannot be written is
    closed on the next start, and this process carries on."""
    provider = ScriptedProvider([say("Noting.", call("write_note", text="x")), say("Noted.")])
    agent, rec = make_agent(session, provider, (write_note,))
    broken = [True]
    real_append = TurnStore.append

    def append(self, new, **kw):
        if broken[0] and new.kind is not TurnKind.USER:
            raise Injected("database disk image is malformed")
        return real_append(self, new, **kw)

    monkeypatch.setattr(TurnStore, "append", append)
    agent.submit("note it")
    await asyncio.wait_for(agent.idle(), 10)
    assert any("Injected" in n for n in rec.notices)
    assert agent.core.phase is Phase.IDLE
    broken[0] = False
    await check_answers_next(agent, session)
    await agent.close()


async def test_a_message_whose_delivery_failed_is_answered_with_the_next_one(
    session, monkeypatch
):
    provider = ScriptedProvider([say("Both read.")])
    agent, rec = make_agent(session, provider)
    fail_once(monkeypatch, agent_module, "write_package")
    agent.submit("first")  # stored, but it could not join the session
    await asyncio.wait_for(agent.idle(), 10)
    assert [t.content for t in session.turns] == []
    agent.submit("second")
    await asyncio.wait_for(agent.idle(), 10)
    assert [(t.kind, t.content) for t in session.turns] == [
        (TurnKind.USER, "first"), (TurnKind.USER, "second"), (TurnKind.ASSISTANT, "Both read.")]
    assert session.staged() == []
    await agent.close()


# -- the person's markdown files never crash anything ---------------------------------


def test_a_non_utf8_identity_is_read_with_replacement_and_one_warning(tmp_path, caplog):
    identity = Identity(tmp_path)
    identity.ensure_defaults()
    (tmp_path / "identity.md").write_bytes(b"# Who you are\n\nYou are Ana \xe9\xff, kind.\n")
    (tmp_path / "skills" / "deploy.md").write_bytes(b"# Deploy \xff\n\nShip it \xfe safely.\n")
    (tmp_path / "environ" / "home.md").write_bytes(b"# Home\n\nA flat \xe9 in town.\n")
    with caplog.at_level(logging.WARNING, logger="noema.identity"):
        for _ in range(3):  # every prompt reads the files again
            prompt = build_system_prompt(identity, agent_name="ana", language="en")
            assert "You are Ana \ufffd\ufffd, kind." in prompt
        assert identity.read_skill("deploy") == "# Deploy \ufffd\n\nShip it \ufffd safely.\n"
        assert identity.read_environ("home") == "# Home\n\nA flat \ufffd in town.\n"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 3, warnings  # one per file, not one per read
    assert all("not valid UTF-8" in w and "\n" not in w for w in warnings)


def test_an_unreadable_identity_falls_back_to_the_default(tmp_path, caplog):
    identity = Identity(tmp_path)
    identity.ensure_defaults()
    (tmp_path / "identity.md").unlink()
    (tmp_path / "identity.md").mkdir()  # a folder where the file should be
    with caplog.at_level(logging.WARNING, logger="noema.identity"):
        assert identity.core().startswith("# Who you are")
    assert "cannot be read" in caplog.text


async def test_a_start_that_cannot_close_a_crashed_cycle_still_answers(session, monkeypatch):
    """The previous process died mid-call; this one starts on a full disk."""
    cycle_id = session.store.open_cycle("person")
    session.append(NewTurn(TurnKind.USER, "run it"))
    session.append(NewTurn(TurnKind.TOOL_CALL, tool_name="write_note", call_id="c1",
                           arguments="{}", cycle_id=cycle_id))
    agent, rec = make_agent(session, ScriptedProvider([say("Back.")]), (write_note,))

    def full(*args, **kwargs):
        raise StorageFull(session.folder, 0)

    with monkeypatch.context() as patched:
        patched.setattr(Session, "append_all", full)
        agent.start()  # no exception: told, and left for the first delivery
    assert any("is full (0 bytes free)" in n for n in rec.notices), rec.notices
    await check_answers_next(agent, session)
    check_both_protocols(session.turns)
    assert session.store.open_cycles() == []
    assert "Did not complete" in next(t for t in session.turns if t.is_result).content
    await agent.close()


async def test_the_wired_agent_with_a_non_utf8_identity_compacts_and_keeps_answering(tmp_path):
    """The report's own case: a non-UTF-8 identity.md and a session long enough to compact."""
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    paths.ensure()
    paths.identity_dir.mkdir(exist_ok=True)
    (paths.identity_dir / "identity.md").write_bytes(b"# Who you are\n\nYou are \xff Ana.\n")
    config = Config(memory=MemorySettings(trigger_turns=8, keep_recent_turns=2,
                                          min_block_turns=2, min_journey_words=10))
    model = ScriptedProvider([say(f"reply {i}") for i in range(10)])
    chronicler = ScriptedProvider([say("not a valid save point")] * 5)
    rec = Recorder()
    app = build_app(paths, config, provider=model, chronicler=chronicler, listener=rec)
    try:
        await app.start()
        for number in range(6):
            app.agent.submit(f"message {number}")
            await asyncio.wait_for(app.agent.idle(), 10)
            assert app.session.turns[-1].content == f"reply {number}"
        await until(lambda: chronicler.requests and not app.memory.compactor.busy,
                    "a compaction to run and end (did the session grow long enough?)")
        assert chronicler.requests, "the session never grew long enough to compact"
        assert "You are \ufffd Ana." in app.agent.cycle.system_prompt()
        assert app.agent.status().context_tokens > 0  # what /status shows
        assert not [n for n in rec.notices if "failed" in n], rec.notices
    finally:
        await app.aclose()
