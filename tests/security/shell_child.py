"""A stand-in agent process for the kill test: runs one long sandboxed
command and waits for it (the test kills this process with SIGKILL)."""

import asyncio
import json
import sys
from pathlib import Path

from noema.paths import AgentPaths
from noema.providers.base import ToolCall
from noema.security.settings import AutonomySettings, FilesSettings, HandsSettings, RootSettings
from noema.tools.hands import build_hands
from noema.tools.registry import ToolContext, ToolRegistry


async def main(workspace: str, agent_root: str, command: str) -> None:
    settings = HandsSettings(
        files=FilesSettings(roots=(RootSettings(path=Path(workspace)),)),
        autonomy=AutonomySettings(tools={"shell_execute": "allow"}),
    )
    hands = build_hands(settings, AgentPaths("t", Path(agent_root)))
    registry = ToolRegistry(hands.tools)
    call = ToolCall("c1", "shell_execute", json.dumps({"command": command}))
    await registry.call(call, ToolContext("c1", 1, 1))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
