"""A guided scenario of the agent's hands and their safety net.

Tools are called exactly as the model calls them (a ToolCall through the
ToolRegistry); the person's side is played by direct file edits and by the
`noema undo` / `noema history` functions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import count
from pathlib import Path

from ..interfaces.commands import versions as versions_cli
from ..interfaces.commands.versions import VersionsCommandError
from ..paths import AgentPaths
from ..providers.base import ToolCall
from ..security.approvals import ApprovalRequest
from ..security.settings import FilesSettings, HandsSettings, RootSettings
from ..tools.hands import build_hands
from ..tools.registry import ToolContext, ToolRegistry


async def demo_hands(workdir: Path, paths: AgentPaths, out: Callable[[str], None]) -> None:
    """Run the scenario in `workdir` (a scratch folder: the workspace and an
    'outside' file are created in it), printing each step through `out`."""
    workspace = workdir / "workspace"
    outside = workdir / "outside.txt"
    workspace.mkdir(parents=True, exist_ok=True)
    outside.write_text("a file outside the workspace\n")
    files = FilesSettings(roots=(RootSettings(path=workspace, mode="read-write"),))
    settings = HandsSettings(files=files)  # shell_execute stays at 'ask'

    async def approve(request: ApprovalRequest) -> bool:
        out(f"  [the person is asked to approve {request.tool}: {request.arguments!r} → yes]")
        return True

    hands = build_hands(settings, paths, approve)
    registry = ToolRegistry(hands.tools)
    ids = count(1)

    async def call(name: str, **arguments: object) -> str:
        number = next(ids)
        shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        out(f"\nagent → {name}({shown if len(shown) < 160 else shown[:160] + '…'})")
        result = await registry.call(
            ToolCall(f"demo-{number}", name, json.dumps(arguments)),
            ToolContext(f"demo-{number}", 1000 + number, 1),
        )
        out(
            ("  refused/failed: " if result.is_error else "  ")
            + result.content.replace("\n", "\n  ")
        )
        return result.content

    def person(text: str) -> None:
        out(f"\nperson: {text}")

    def cli(name: str, run: Callable[[], str]) -> None:
        out(f"\nperson → noema {name}")
        try:
            out("  " + run().replace("\n", "\n  "))
        except VersionsCommandError as exc:
            out(f"  refused: {exc}")

    try:
        out(f"Workspace: {workspace}")
        person("writes notes.md by hand")
        (workspace / "notes.md").write_text("# Shopping\n- milk\n- bread\n")
        await call(
            "file_search_and_replace", path="notes.md", old_text="- milk", new_text="- oat milk"
        )
        person("adds a line to notes.md by hand, after the agent's edit")
        with (workspace / "notes.md").open("a") as handle:
            handle.write("- coffee\n")
        cli("undo", lambda: versions_cli.undo(files, paths))
        await call("file_write", path="todo.md", content="1. call the plumber\n")
        cli("history", lambda: versions_cli.history(files, paths))
        cli("undo", lambda: versions_cli.undo(files, paths))
        out(f"  todo.md exists after the undo: {(workspace / 'todo.md').exists()}")
        out(
            "  notes.md still holds the person's line: "
            + str("coffee" in (workspace / "notes.md").read_text())
        )
        await call(
            "shell_execute", command="echo hello from the sandbox; ls; echo made > built.txt"
        )
        out("\nEscape attempts:")
        await call("file_read", path="../outside.txt")
        await call("file_write", path=str(outside), content="overwritten")
        await call("shell_execute", command=f"echo overwritten > {outside}; cat {outside}")
        out(
            f"  outside.txt on the real disk afterwards: {outside.read_text()!r} (inside the "
            "sandbox only the workspace is the real disk; /tmp is private scratch space)"
        )
    finally:
        hands.close()
