"""The agent's hands assembled: policy, histories, sandbox, autonomy gate and
the file and shell tools, from the settings of one agent."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..paths import AgentPaths
from ..security.approvals import ApprovalGate, Approver
from ..security.policy import AccessPolicy
from ..security.sandbox import Sandbox
from ..security.settings import HandsSettings
from ..security.versioning import Versions
from .files import file_tools
from .registry import Tool
from .shell import shell_tools


@dataclass(frozen=True, slots=True)
class Hands:
    """Everything the composition root needs to offer and control the tools."""

    tools: tuple[Tool, ...]  # already guarded by the autonomy gate
    policy: AccessPolicy
    versions: Versions
    sandbox: Sandbox
    gate: ApprovalGate  # attach the interface's Approver here

    async def prepare(self) -> None:
        """Open the workspaces' histories and record their current state, in a
        worker thread: on a large workspace the first snapshot takes seconds,
        which would otherwise fall on the agent's first write. Optional."""

        def snapshot_all() -> None:
            for root in self.policy.writable_roots:
                self.versions.store_for(root).record_person()

        await asyncio.to_thread(snapshot_all)

    def close(self) -> None:
        self.versions.close()


def build_hands(
    settings: HandsSettings,
    paths: AgentPaths,
    approver: Approver | None = None,
    *,
    watch_changes: bool = True,
) -> Hands:
    """Build the tools for an agent; missing read-write roots are created (private)."""
    policy = AccessPolicy.from_settings(settings.files, paths)
    for root in policy.writable_roots:
        root.path.mkdir(parents=True, exist_ok=True, mode=0o700)
    versions = Versions.of_agent(
        policy, settings.files.deny, paths,
        watch_changes=watch_changes, allow_hard_links=settings.files.allow_hard_links,
    )
    sandbox = Sandbox(settings.shell)
    gate = ApprovalGate(settings.autonomy, approver)
    raw = file_tools(policy, versions, settings.files) + shell_tools(
        sandbox, policy, versions, paths.agents_dir
    )
    return Hands(tuple(gate.wrap_all(raw)), policy, versions, sandbox, gate)
