"""The agent's hands assembled: policy, histories, sandbox, autonomy gate and
the file and shell tools, from the settings of one agent."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from ..paths import AgentPaths
from ..security.approvals import ApprovalGate, Approver
from ..security.file_marks import FileMarks, import_legacy_marks
from ..security.policy import AccessPolicy
from ..security.sandbox import Sandbox
from ..security.settings import HandsSettings
from ..security.snapshot import record_at_start, record_open
from ..security.versions import Versions
from .files import file_tools
from .registry import Tool
from .shell import shell_tools

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Hands:
    """Everything the composition root needs to offer and control the tools."""

    tools: tuple[Tool, ...]  # already guarded by the autonomy gate
    policy: AccessPolicy
    versions: Versions
    sandbox: Sandbox
    gate: ApprovalGate  # attach the interface's Approver here
    marks: FileMarks  # which file contents hold outside words

    async def prepare(self) -> None:
        """Record the workspaces' current state as the person's: on a large
        workspace the first snapshot takes seconds, which would otherwise fall
        on the agent's first write. A workspace whose store this process has
        not opened is recorded by a child process (`security/snapshot.py`),
        one already open in a worker thread. Optional; problems are logged."""
        roots = self.policy.writable_roots
        opened = [r for r in roots if self.versions.opened(r)]
        specs = [self.versions.spec_for(r) for r in roots if not self.versions.opened(r)]
        recordings = await record_at_start(specs)
        recordings += await asyncio.to_thread(
            lambda: [record_open(self.versions.store_for(r)) for r in opened])
        for done in recordings:
            if done.problem:
                log.warning("the state of %s at start was not recorded: %s",
                            done.workdir, done.problem)
            elif done.version:
                log.info("the state of %s at start was recorded as version %s",
                         done.workdir, done.version)

    def close(self) -> None:
        self.versions.close()
        self.sandbox.close()
        self.marks.close()


def build_hands(
    settings: HandsSettings,
    paths: AgentPaths,
    approver: Approver | None = None,
    *,
    watch_changes: bool = True,
    carry_legacy_marks: bool = False,
) -> Hands:
    """Build the tools for an agent; missing read-write roots are created (private).

    `carry_legacy_marks`: the agent was made by a version that kept its marks
    of outside words on the files; they are carried into its store now."""
    policy = AccessPolicy.from_settings(settings.files, paths)
    for root in policy.writable_roots:
        root.path.mkdir(parents=True, exist_ok=True, mode=0o700)
    versions = Versions.of_agent(
        policy, settings.files.deny, paths,
        watch_changes=watch_changes, allow_hard_links=settings.files.allow_hard_links,
    )
    sandbox = Sandbox(settings.shell)
    gate = ApprovalGate(settings.autonomy, approver)
    marks = FileMarks(paths.file_marks_db)
    if carry_legacy_marks:
        carried = import_legacy_marks(marks, [root.path for root in policy.writable_roots])
        log.info("an earlier version's marks of outside words: %d carried", carried)
    raw = file_tools(policy, versions, settings.files, marks) + shell_tools(
        sandbox, policy, versions, paths.agents_dir, marks
    )
    return Hands(tuple(gate.wrap_all(raw)), policy, versions, sandbox, gate, marks)
