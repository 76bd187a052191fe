"""A small world for the hands' tests: a workspace, a folder outside it with
a secret, the agent's data with its own secret, and tools to call as the
model would."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

from noema.paths import AgentPaths
from noema.providers.base import ToolCall
from noema.security.approvals import Approver
from noema.security.settings import (
    AutonomySettings,
    FilesSettings,
    HandsSettings,
    RootSettings,
    ShellSettings,
)
from noema.tools.hands import Hands, build_hands
from noema.tools.registry import ToolContext, ToolRegistry, ToolResult

OUTSIDE_SECRET = "TOP-SECRET-OUTSIDE-4417"
AGENT_SECRET = "AGENT-SECRET-9931"
PERSON_GIT = "[core]\n\trepositoryformatversion = 0\n# PERSON-GIT-CONFIG\n"


def _bwrap_works() -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
        capture_output=True,
        timeout=20,
    )
    return probe.returncode == 0


BWRAP = _bwrap_works()


@dataclass
class World:
    base: Path
    ws: Path
    outside: Path
    secret: Path
    paths: AgentPaths
    extra_roots: tuple[RootSettings, ...] = ()
    deny_extra: tuple[str, ...] = ()
    hands: Hands | None = None
    _ids: count = field(default_factory=lambda: count(1))
    contexts: list = field(default_factory=list)

    @classmethod
    def make(cls, base: Path, *, agent_inside: bool = False) -> World:
        ws = base / "ws"
        outside = base / "outside"
        ws.mkdir()
        outside.mkdir()
        secret = outside / "secret.txt"
        secret.write_text(OUTSIDE_SECRET + "\n")
        (ws / "notes.txt").write_text("hello\nworld\n")
        (ws / ".git").mkdir()
        (ws / ".git" / "config").write_text(PERSON_GIT)
        agent_root = (
            (ws / ".noema" / "agents" / "t") if agent_inside else (base / "home" / "agents" / "t")
        )
        paths = AgentPaths("t", agent_root)
        paths.ensure()
        (paths.root / "secrets.toml").write_text(f'key = "{AGENT_SECRET}"\n')
        return cls(base, ws, outside, secret, paths)

    def settings(
        self,
        *,
        shell: ShellSettings | None = None,
        autonomy: AutonomySettings | None = None,
        max_read: int = 1_000_000,
        max_write: int = 1_000_000,
    ) -> HandsSettings:
        from noema.security.settings import DEFAULT_DENY

        files = FilesSettings(
            roots=(RootSettings(path=self.ws, mode="read-write"), *self.extra_roots),
            deny=DEFAULT_DENY + self.deny_extra,
            max_read_bytes=max_read,
            max_write_bytes=max_write,
        )
        return HandsSettings(
            files=files,
            shell=shell or ShellSettings(),
            autonomy=autonomy or AutonomySettings(tools={"shell_execute": "allow"}),
        )

    def build(self, approver: Approver | None = None, **kwargs) -> Hands:
        if self.hands is not None:
            self.hands.close()
        self.hands = build_hands(self.settings(**kwargs), self.paths, approver)
        return self.hands

    async def call(self, name: str, _lead: tuple = (), **arguments) -> ToolResult:
        """Call a tool as the model would; `_lead`: the sources of the outside
        words that lead the conversation at the call."""
        hands = self.hands or self.build()
        number = next(self._ids)
        registry = ToolRegistry(hands.tools)
        ctx = ToolContext(f"call-{number}", 500 + number, 1, lead=_lead)
        self.contexts.append(ctx)
        return await registry.call(ToolCall(ctx.call_id, name, json.dumps(arguments)), ctx)

    def close(self) -> None:
        if self.hands is not None:
            self.hands.close()
            self.hands = None

    def gitdir(self) -> Path:
        from noema.security.versions import gitdir_for

        return gitdir_for(self.paths.versions_dir, self.ws.resolve())

    def git(self, *args: str) -> str:
        """Run the ordinary git command on the agent's repository of the workspace."""
        done = subprocess.run(
            ["git", "--git-dir", str(self.gitdir()), "--work-tree", str(self.ws), *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


def tree_snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below a folder with its bytes (links as their target), to
    prove that nothing outside changed."""
    found: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[rel] = b"->" + str(path.readlink()).encode()
        elif path.is_file():
            found[rel] = path.read_bytes()
        else:
            found[rel + "/"] = b""
    return found
