"""The narrative-memory chapter of `noema demo`.

A scripted model talks with a person about a garden until the session passes
its (deliberately low) threshold. The compactor then runs in the background
with a scripted chronicler: its first save point cites a turn that does not
exist, the validator rejects it and names the failure, the retry is valid
and replaces the old turns in the context. A message sent while the
chronicler writes stays in the session. Finally the model answers a question
about an early detail by calling lookup_turn on a cited turn, rehydrating
the exact words. Everything except the two models is real: store, session,
tools, cycle, validator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..identity import Identity
from ..interfaces.commands.memory import list_save_points, show_save_point
from ..memory.assembly import Memory, build_memory
from ..memory.compaction import CompactionListener, Outcome
from ..memory.selection import Block
from ..memory.session import Session
from ..memory.settings import MemorySettings
from ..memory.store import TurnStore
from ..memory.turns import Turn, TurnKind
from ..memory.validator import Verdict
from ..orchestrator.agent import Agent, AgentListener
from ..orchestrator.cycle import ReasoningCycle
from ..orchestrator.prompt import build_system_prompt
from ..paths import AgentPaths
from ..providers.scripted import ScriptedProvider, call, say
from ..tools.builtin import time_tools
from ..tools.registry import ToolRegistry

# Low thresholds so that a dozen turns make a compaction.
DEMO_SETTINGS = MemorySettings(
    trigger_turns=12, keep_recent_turns=4, min_block_turns=4, block_fraction=1.0,
    min_journey_words=30, retry_after_turns=4,
)

EXCHANGES = (
    ("I'm planning the vegetable garden for spring. The soil test came back: pH 6.2 and "
     "low nitrogen.",
     say("pH 6.2 is slightly acidic, which tomatoes and beans like. The low nitrogen is the part "
         "to fix: dig in two or three centimetres of compost before planting. Let me pin the "
         "figures so they stay with me.",
         call("annotate_observation", source="the person's soil test",
              note="Soil pH 6.2, low nitrogen; compost before planting."))),
    None,  # the model's text after the pin
    ("Tomatoes for sure. My neighbour swears by marigolds between the rows, is that real?",
     say("Partly: marigolds draw hoverflies that eat aphids, and their roots discourage some "
         "nematodes. Plant them at the ends of the rows rather than between, so they do not "
         "shade the young tomatoes.")),
    ("And beans: bush or climbing? The bed is against a south wall.",
     say("Climbing beans, on the south wall: they use the height and the warmth, and leave the "
         "ground to the tomatoes. Sow them after the last frost, mid-May where you are.")),
    ("Last thing for today: how often should I water the tomatoes once they're in?",
     say("Deeply twice a week rather than a little every day, more in a heatwave; water the soil, "
         "not the leaves, to keep blight away.")),
)


class _CompactionPrinter(CompactionListener):
    def __init__(self, out: Callable[[str], None]) -> None:
        self.out = out

    def on_compaction_start(self, block: Block, reason: str) -> None:
        self.out(f"  [memory] compaction starts in the background ({reason}): turns "
                 f"{block.first}-{block.last} go to the chronicler.\n")

    def on_attempt(self, number: int, verdict: Verdict) -> None:
        if verdict.ok:
            self.out(f"  [memory] attempt {number} is valid: cites {len(verdict.cited)} turns, "
                     f"coverage {verdict.coverage:.0%}, validated in {verdict.seconds * 1000:.2f} ms.\n")
            return
        self.out(f"  [memory] attempt {number} REJECTED by the validator:\n")
        for failure in verdict.failures:
            self.out(f"             [{failure.code}] {failure.message}\n")

    def on_compaction_end(self, outcome: Outcome) -> None:
        self.out(f"  [memory] compaction {outcome.status}: {outcome.reason}\n")


def _first_after(session: Session, turn_id: int, kind: TurnKind) -> Turn:
    return next(t for t in session.store.range(turn_id + 1, turn_id + 50) if t.kind is kind)


def _save_point_texts(session: Session, block: Block, asked: list[Turn]) -> tuple[str, str]:
    """A rejected save point (one invented citation) and the valid one, for this block."""
    soil, marigolds, beans = asked[:3]
    reply = {t.id: _first_after(session, t.id, TurnKind.ASSISTANT).id for t in (soil, marigolds, beans)}
    pin = _first_after(session, soil.id, TurnKind.TOOL_CALL).id
    if not {soil.id, marigolds.id, beans.id, pin, *reply.values()} <= set(block.ids):
        raise RuntimeError("the demo's block is not the expected one; run it on a fresh agent folder")
    invented = block.last + 500
    valid = (
        "## State\n"
        f"The person is planning a spring vegetable garden: soil at pH 6.2 with low nitrogen "
        f"{{cite:{soil.id}}}, compost to go in before planting {{cite:{reply[soil.id]}}}, tomatoes "
        f"with marigolds at the row ends {{cite:{reply[marigolds.id]}}} and climbing beans on the "
        f"south wall {{cite:{reply[beans.id]}}}.\n\n"
        "## The Journey\n"
        f"The conversation opened with the person's plans for the spring garden and the news of "
        f"a soil test, pH 6.2 and low nitrogen {{cite:{soil.id}}}. The agent read the acidity as "
        f"good news for tomatoes and beans but insisted that the nitrogen be fixed first, with "
        f"compost dug in before planting {{cite:{reply[soil.id]}}}, and pinned the figures so "
        f"they would outlive the conversation {{cite:{pin}}}. Then a neighbour's advice came up, "
        f"half believed: marigolds between the rows {{cite:{marigolds.id}}}. The agent took it "
        f"seriously, explaining the hoverflies and the nematodes, but moved the flowers to the "
        f"ends of the rows so they would not shade the young plants {{cite:{reply[marigolds.id]}}}. "
        f"The question of beans, bush or climbing, was settled by the south wall "
        f"{{cite:{beans.id}}}: climbing beans, sown after the last frost "
        f"{{cite:{reply[beans.id]}}}.\n"
    )
    rejected = valid.replace(f"young plants {{cite:{reply[marigolds.id]}}}",
                             f"young plants {{cite:{invented}}}")
    return rejected, valid


async def memory_chapter(
    paths: AgentPaths, out: Callable[[str], None], printer: AgentListener, *, pace: float = 0.0
) -> None:
    """Run the chapter on a fresh agent folder; `out` prints, `printer` shows the cycles."""
    paths.ensure()
    store = TurnStore(paths.turns_db)
    session = Session.load(store)
    identity = Identity(paths.identity_dir)
    identity.ensure_defaults()
    model = ScriptedProvider([], token_delay_s=pace, context_window=32_768)
    chronicler = ScriptedProvider([], token_delay_s=pace / 4, name="scripted", model="chronicler")
    memory: Memory = build_memory(
        session, chronicler, DEMO_SETTINGS, context_window=model.context_window,
        agent_name=paths.name, listener=_CompactionPrinter(out),
    )
    tools = ToolRegistry([*time_tools(None), *memory.tools])

    def system_prompt() -> str:
        return build_system_prompt(identity, agent_name=paths.name, chronicle=memory.chronicle())

    armed = False

    def compact_if_due() -> None:
        # What the shell does after every cycle. The demo arms it only once
        # the scripted chronicler knows which turns it will be given.
        if armed:
            memory.compactor.maybe_start()

    agent = Agent(session, ReasoningCycle(session, model, tools, system_prompt), printer,
                  context_window=model.context_window, after_cycle=compact_if_due)
    try:
        if store.count():
            raise RuntimeError(f"the memory demo needs a fresh agent folder, not {paths.root}")
        agent.start()
        asked: list[Turn] = []
        for number, exchange in enumerate(EXCHANGES):
            if exchange is None:
                continue
            text, response = exchange
            model.extend([response])
            if number == 0:
                model.extend([say("Pinned. Compost first, then we can choose what to grow.")])
            out(f"person> {text}\n")
            asked.append(agent.submit(text))
            await agent.idle()
        model.extend([say("Noted; a notebook is the best memory a garden can have.")])
        out("person> I'll keep a garden notebook too.\n")
        agent.submit("I'll keep a garden notebook too.")
        await agent.idle()

        out(f"\nThe session holds {len(session)} turns, past the demo's threshold of "
            f"{DEMO_SETTINGS.trigger_turns}: after this cycle the shell's "
            "compactor.maybe_start() starts a compaction in the background.\n")
        memory.compactor.prune()
        block = memory.compactor.next_block()
        assert block is not None, "the demo conversation is long enough to compact"
        rejected, valid = _save_point_texts(session, block, asked)
        chronicler.extend([say(rejected), say(valid)])
        armed = True
        task = memory.compactor.maybe_start()
        assert task is not None, "a compaction is due"
        meanwhile = "Remind me to buy compost."
        model.extend([say("I will: compost is the first job, before anything is planted.")])
        out(f"person> {meanwhile}   (sent while the chronicler writes)\n")
        late = agent.submit(meanwhile)
        await agent.idle()
        await task
        kept = "stays" if late.id in session.ids() else "is LOST"
        out(f"  The message sent during the compaction (turn {late.id}) {kept} in the session.\n")
        out(f"\nThe context now: system prompt with save point {session.save_point_id}, then "
            f"{len(session)} raw turns ({session.turns[0].id}-{session.turns[-1].id}).\n\n")
        out(list_save_points(store, session) + "\n\n")
        assert session.save_point_id is not None
        out(show_save_point(store, session.save_point_id) + "\n")

        question = "What exactly did the soil test say? I want to tell the nursery."
        model.extend([
            say("The chronicle cites your message about it; let me read the original.",
                call("lookup_turn", id=asked[0].id)),
            say("Your words were: pH 6.2 and low nitrogen. Tell the nursery the soil is slightly "
                "acidic and short of nitrogen, and that you are adding compost."),
        ])
        out(f"\nperson> {question}\n")
        agent.submit(question)
        await agent.idle()
        lookup = next(t for t in reversed(session.turns)
                      if t.kind is TurnKind.TOOL_RESULT and t.tool_name == "lookup_turn")
        out(f"\nlookup_turn rehydrated turn {asked[0].id}, which left the context with the "
            f"compaction:\n{lookup.content}\n")
    finally:
        await agent.close()
        await memory.close()
        store.close()


def run_memory_demo(paths: AgentPaths, *, pace: float = 0.0) -> None:
    """Run the chapter alone, printing to stdout (for trying it by hand)."""
    import sys

    from ..interfaces.terminal.chat import TerminalListener

    class Transcript(TerminalListener):
        def on_idle(self) -> None:  # no interactive prompt here
            pass

    printer = Transcript(sys.stdout)
    asyncio.run(memory_chapter(paths, printer.write, printer, pace=pace))


if __name__ == "__main__":
    import sys
    import tempfile
    from pathlib import Path

    home = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="noema-memory-"))
    run_memory_demo(AgentPaths.for_agent("memory-demo", home))
