"""Killing a running sandboxed command when an urgent event cancels the cycle.

A scripted model asks for a command that writes a heartbeat file every 10 ms
inside the bubblewrap sandbox and never ends on its own. Once the heartbeat
is seen, an urgent event arrives and the cycle is cancelled unsafely. From
the call that hands the event to the agent:

- killed:     the command's process group is killed and reaped (the tool's
              cancellation handler runs after `run_process` waited for it);
- sanitised:  the history is repaired, the tool's result says what it did;
- silent:     verified afterwards: the heartbeat no longer changes.

Target: `killed` within 100 ms. Prints figures and ratios; asserts nothing.

    .venv/bin/python bench/kill_sandboxed.py [--trials 100] [--unsandboxed] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.memory.turns import TurnKind
from noema.orchestrator.agent import Agent, AgentListener, Senses
from noema.orchestrator.cycle import ReasoningCycle
from noema.orchestrator.settings import ReflexSettings
from noema.perception.archive import SensoryArchive
from noema.perception.events import Event, Nature, SensorInfo, Urgency
from noema.perception.packing import render_pool_event
from noema.perception.pipeline import Pipeline
from noema.perception.untrusted import SessionDelimiter
from noema.providers.scripted import ScriptedProvider, call, say
from noema.security.sandbox import Layout, Output, Sandbox
from noema.security.settings import ShellSettings
from noema.tools.registry import ToolContext, ToolRegistry, tool

TARGET_MS = 100.0
HEARTBEAT = "i=0; while true; do i=$((i+1)); echo beat $i; echo $i > beat; sleep 0.01; done"
PAGER = SensorInfo("pager", "the on-call pager", Nature.DISCRETE, default_urgency=Urgency.URGENT)


class Ends(AgentListener):
    def __init__(self) -> None:
        self.sanitised: float | None = None

    def on_cycle_end(self, cycle_id: int, outcome: str, error: str | None) -> None:
        if outcome == "cancelled_unsafe":
            self.sanitised = time.perf_counter()


def command_tool(sandbox: Sandbox, layout: Layout, killed: list[float]):
    @tool(side_effects=True)
    async def run_command(ctx: ToolContext, command: str) -> str:
        """Run a command in the sandbox.

        Args:
            command: The command line.
        """
        output = Output(4000)
        try:
            finished = await sandbox.run(layout, command, 60, output)
        except asyncio.CancelledError:
            killed.append(time.perf_counter())
            ctx.interruption.append(
                f"The command was killed with its processes. Output so far ({output.total} "
                f"bytes): {output.render()[-80:]!r}"
            )
            raise
        return f"exit code {finished.exit_code}: {finished.output}"

    return run_command


async def trial(sandbox: Sandbox, workdir: Path, n: int) -> tuple[float, float, bool, str]:
    beat = workdir / "beat"
    beat.unlink(missing_ok=True)
    layout = Layout(workdir=workdir, writable=(workdir,))
    killed: list[float] = []
    store = TurnStore(":memory:")
    session = Session.load(store)
    pipeline = Pipeline(SensoryArchive(":memory:"), [PAGER])
    delimiter = SessionDelimiter("c0ffee00c0ffee")
    senses = Senses(pipeline, lambda items, now: render_pool_event(items, delimiter, now=now))
    ends = Ends()
    provider = ScriptedProvider([say("", call("run_command", command=HEARTBEAT)), say("Stopped.")])
    cycle = ReasoningCycle(session, provider, ToolRegistry([command_tool(sandbox, layout, killed)]),
                           lambda: "You are terse.")
    agent = Agent(session, cycle, ends, context_window=100_000, senses=senses,
                  reflexes=ReflexSettings(idle_quiet_window_s=0, idle_max_wait_s=0))
    agent.submit(f"trial {n}: run the heartbeat")
    deadline = time.monotonic() + 10
    while not beat.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.03)
    started = time.perf_counter()
    agent.perceive(Event.create("pager", "the disk is failing", received_at=time.time()))
    await agent.idle()
    last = beat.read_text() if beat.exists() else ""
    await asyncio.sleep(0.1)
    silent = (beat.read_text() if beat.exists() else "") == last
    result = next(t.content for t in session.turns
                  if t.kind is TurnKind.TOOL_RESULT and t.tool_name == "run_command")
    await agent.close()
    store.close()
    pipeline.archive.conn.close()
    return killed[0] - started, (ends.sanitised or started) - started, silent, result


def figures(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
    return (f"{name:<10} p50 {q[49]:7.2f}  p90 {q[89]:7.2f}  p99 {q[98]:7.2f}  "
            f"max {ms[-1]:7.2f} ms")


async def main(trials: int, unsandboxed: bool) -> None:
    sandbox = Sandbox(ShellSettings(sandbox="none" if unsandboxed else "bubblewrap"))
    killed, sanitised, silent = [], [], 0
    example = ""
    with tempfile.TemporaryDirectory(prefix="noema-kill-") as folder:
        workdir = Path(folder)
        await sandbox.check(Layout(workdir=workdir, writable=(workdir,)))
        for n in range(trials):
            k, s, quiet, example = await trial(sandbox, workdir, n)
            killed.append(k)
            sanitised.append(s)
            silent += quiet
    how = "unsandboxed (sh)" if unsandboxed else "bubblewrap sandbox"
    print(f"Killing a running command on an urgent event, {trials} trials, {how}\n")
    print("  " + figures("killed", killed))
    print("  " + figures("sanitised", sanitised))
    p99 = statistics.quantiles([k * 1000 for k in killed], n=100, method="inclusive")[98]
    print(f"\nheartbeat silent after the kill in {silent}/{trials} trials")
    print(f"event -> command dead: p99 {p99:.2f} ms; target {TARGET_MS:g} ms "
          f"(ratio {p99 / TARGET_MS:.2f})")
    print(f"\nthe model was told:\n  {example[:300]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--unsandboxed", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a few trials, to see that it runs")
    args = parser.parse_args()
    asyncio.run(main(3 if args.smoke else args.trials, args.unsandboxed))
