"""A real agent process for the crash tests: they kill it with SIGKILL.

Usage: python crash_child.py DB MODE, where MODE is "tool" (stop inside a
slow side-effect tool), "stream" (stop while the answer streams) or "loop"
(keep conversing until killed). Prints ACK <id> once a message is stored.
"""

import asyncio
import sys

from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.orchestrator.agent import Agent, AgentListener
from noema.orchestrator.cycle import ReasoningCycle
from noema.providers.scripted import ScriptedProvider, call, say
from noema.tools.registry import ToolContext, ToolRegistry, tool


@tool(side_effects=True)
def remember(ctx: ToolContext, thing: str) -> str:
    """Remember a thing.

    Args:
        thing: What.
    """
    return f"remembered {thing}"


@tool(side_effects=True)
async def slow_job(ctx: ToolContext) -> str:
    """A slow job."""
    print("IN-TOOL", flush=True)
    await asyncio.sleep(60)
    return "done"


class Say(AgentListener):
    def on_text(self, delta):
        print("TEXT", flush=True)


def script(mode):
    if mode == "tool":
        return [say("On it.", call("remember", thing="a"), call("slow_job"))]
    if mode == "stream":
        return [say("", call("remember", thing="a")), say("word " * 2000)]
    return [say(f"reply {i} " * 5, call("remember", thing=str(i))) if i % 2 else say(f"reply {i}")
            for i in range(10_000)]


async def main(db, mode):
    store = TurnStore(db)
    session = Session.load(store)
    provider = ScriptedProvider(script(mode), token_delay_s=0.002)
    cycle = ReasoningCycle(session, provider, ToolRegistry([remember, slow_job]), lambda: "test")
    agent = Agent(session, cycle, Say(), context_window=10**6)
    agent.start()
    n = 0
    while True:
        turn = agent.submit(f"message {n}")
        print(f"ACK {turn.id}", flush=True)
        n += 1
        await agent.idle()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
