"""`shell_execute`: a shell command in the sandbox, its file changes versioned.

After a command, whatever way it ended, a worker thread checks what it left
(git metadata the person's git would run, files made setuid, setgid or
someone else's) and commits the files it changed; the event loop never waits
on that walk, which can take seconds after a command that planted hundreds
of repositories.

Cancellation: when the task running a call is cancelled, the command's
whole process group (and, under bubblewrap, its PID namespace) is killed,
the same after-command work runs in its thread, and the partial outcome is
appended to the call's `ToolContext.interruption` before CancelledError goes
on (a second cancellation meanwhile does not cut the account short). The
orchestrator reads it to tell the model plainly what happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypeVar

from ..memory.turns import Source, sources_union
from ..privacy import shell_with_person_umask
from ..security import fsafe
from ..security.file_marks import FileMarks
from ..security.gitguard import GitGuard, Included, Neutralised
from ..security.history import ChangeNote, Skipped, Version, left_out_text
from ..security.masks import Masker, Scan
from ..security.open_guard import policy_secrets
from ..security.ownership import OwnershipGuard, Repaired
from ..security.policy import AccessPolicy
from ..security.sandbox import Finished, Layout, Output, Sandbox, SandboxUnavailable
from ..security.settings import ShellSettings
from ..security.versions import Versions
from .registry import Tool, ToolContext, ToolError, ToolResult, tool

_T = TypeVar("_T")
# Files a command changed are read back to be marked up to this size; past it,
# the file tools refuse to read them anyway.
MARKED_READ_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class InterruptedRun:
    """A command cancelled while it ran: it was killed; this is what it did."""

    command: str
    output: str  # capped like a normal result
    output_bytes: int
    versions: tuple[str, ...]  # versions recording the files it had changed
    notes: str = ""  # paths the history left out, git metadata neutralised

    def describe(self) -> str:
        """A plain account for the model's tool result."""
        changed = (
            f"Files it changed before that were recorded as version(s) {', '.join(self.versions)}."
            if self.versions
            else "It had changed no files."
        )
        return (
            f"The command was cancelled while running and was killed with all its processes. "
            f"{changed}{self.notes} Output so far ({self.output_bytes} bytes):\n{self.output}"
        )


def shell_layout(
    policy: AccessPolicy, scan: Scan, settings: ShellSettings, included: Sequence[Included] = ()
) -> Layout:
    """What a command may see now: the roots, minus every path the policy
    refuses to read (masked, and refused again at each open, for what
    appears while it runs), with git metadata and the files the person's
    git configuration includes read-only (frozen)."""
    extra = tuple(i.real for i in included if i.freezable)
    return Layout(
        policy.workspace.path,
        tuple(r.path for r in policy.writable_roots),
        tuple(r.path for r in policy.roots if not r.writable),
        hidden=scan.hidden,
        network=settings.network,
        frozen=tuple(dict.fromkeys(scan.frozen + extra)),
        secrets=policy_secrets(policy),
    )


def _neutralised_note(policy: AccessPolicy, done: list[Neutralised]) -> str:
    if not done:
        return ""
    lines = "\n".join(f"- {n.describe(policy.display(n.where))}" for n in done)
    return (
        "\nGit metadata the command left was neutralised, since the person's git would "
        f"run it outside the sandbox (the person is told):\n{lines}"
    )


def _repaired_note(policy: AccessPolicy, done: list[Repaired]) -> str:
    if not done:
        return ""
    lines = "\n".join(f"- {r.describe(policy.display(r.path))}" for r in done)
    return (
        "\nFiles the command left with rights no command may give were repaired, since "
        f"any local user could use them (the person is told):\n{lines}"
    )


def _result(
    command_timeout: float, finished: Finished, made: list[Version], skipped: Sequence[Skipped]
) -> str:
    if finished.timed_out:
        head = (
            f"The command timed out after {command_timeout:g} s and was killed with all its "
            "processes."
        )
    else:
        head = f"Exit code {finished.exit_code}."
    head += f" {finished.limit}" if finished.limit else ""  # which resource limit stopped it
    if made:
        paths = sorted({p for v in made for p in v.paths})
        shown = ", ".join(paths[:20]) + (f" and {len(paths) - 20} more" if len(paths) > 20 else "")
        head += f" Files changed: {shown} (version {', '.join(v.short for v in made)})."
    if skipped:
        head += " " + left_out_text(skipped)
    body = finished.output if finished.output_bytes else "(no output)"
    return f"{head}\n{body}"


def shell_tools(
    sandbox: Sandbox,
    policy: AccessPolicy,
    versions: Versions,
    agent_data: Path,
    marks: FileMarks | None = None,
    on_opened: Callable[[ToolContext, Finished], None] | None = None,
) -> list[Tool]:
    """`shell_execute`, bound to its sandbox, the workspaces' histories and
    the marks of files that hold outside words. `on_opened`, when given, is
    told of each command that ran to its end (or its time limit) with the
    files it opened in the roots (`Finished.opened`); a cancelled command's
    are not known."""
    settings = sandbox.settings
    marks = marks if marks is not None else FileMarks()
    masker = Masker(policy, agent_data)
    guard = GitGuard(policy, agent_data)
    ownership = OwnershipGuard((r.path for r in policy.writable_roots), (agent_data,))
    sandbox.on_close(ownership.close)

    def prepare() -> tuple[Scan, tuple[Included, ...]]:
        before = masker.scan()
        return before, guard.includes(before)

    def begin() -> None:
        for root in policy.writable_roots:
            versions.store_for(root).record_person()  # the person's edits stay theirs
        ownership.before()

    def aftermath(
        ctx: ToolContext, command: str, before: Scan, included: tuple[Included, ...],
        suffix: str = "",
    ) -> tuple[str, list[Version], tuple[Skipped, ...]]:
        """What a command left, made safe and recorded: a note for the model,
        the versions made, the paths the history left out. In a worker thread."""
        note = neutralise(before, included) + _repaired_note(policy, ownership.after())
        return (note, *record(ctx, command, suffix))

    def neutralise(before: Scan, included: tuple[Included, ...]) -> str:
        # Runs whatever way the command ended; the walk is warm by then.
        after = masker.scan()
        locked = set(after.unreadable) - set(before.unreadable)
        reopened = [
            Neutralised(f, ("the command had locked this folder; opened again so it is checked",))
            for f in sorted(locked)
            if guard.reopen(f)
        ]
        if reopened:
            after = masker.scan()
        return _neutralised_note(policy, reopened + guard.check(before, after, included))

    def record(
        ctx: ToolContext, command: str, suffix: str = ""
    ) -> tuple[list[Version], tuple[Skipped, ...]]:
        flat = " ".join(command.split())
        note = ChangeNote(
            "agent", f"shell_execute{suffix}: {flat[:150]}", ctx.turn_id, "shell_execute"
        )
        made = []
        skipped: tuple[Skipped, ...] = ()
        for root in policy.writable_roots:
            store = versions.store_for(root)
            version = store.record(note)
            if version is not None:
                made.append(version)
            skipped += store.skipped
        return made, skipped

    def whose(ctx: ToolContext, command: str, finished: Finished | None) -> tuple[Source, ...]:
        """The outside words a command's output and files hold."""
        found = ctx.words.carried({"command": command}) if ctx.words is not None else None
        opened = finished.opened if finished is not None else None
        if opened is None or finished.opened_capped:
            read = marks.all_sources()  # no whole view of its opens: any marked file may be read
        else:
            read = marks.of_paths_content(o.path for o in opened)
        return sources_union(ctx.lead, found.sources if found else (), read)

    def mark_changed(made: list[Version], sources: tuple[Source, ...]) -> None:
        """Mark what the command's versions hold now with its sources."""
        if not sources:
            return
        for version in made:
            marks.mark_version(version.id, sources)
            for rel in version.paths:
                for root in policy.writable_roots:
                    try:
                        data = fsafe.read_file(root.path, PurePosixPath(rel),
                                               max_bytes=MARKED_READ_BYTES,
                                               allow_hard_links=True)
                    except (ToolError, OSError):
                        continue  # removed, or not in this root
                    marks.mark(data, sources, str(root.path / rel))

    @tool(side_effects=True, own_words=True)
    async def shell_execute(ctx: ToolContext, command: str,
                            timeout: float | None = None) -> ToolResult:
        """Run a shell command (sh -c) in the workspace, inside a sandbox: the system is
        read-only, only the workspace is writable (git folders at any depth are not),
        files the file tools refuse (secrets) are hidden, there is no network unless the
        person allowed it (without it, Unix sockets cannot be made either: socket pairs
        work), files cannot be made setuid or setgid, and the output is cut to its head
        and tail.

        Args:
            command: The command line, e.g. 'pytest -q' or 'ls -la src'.
            timeout: Seconds before the command is killed (default and maximum are
                configured).
        """
        if not command.strip():
            raise ToolError("the command is empty")
        limit = settings.timeout_s if timeout is None else timeout
        if limit <= 0:
            raise ToolError("timeout must be a positive number of seconds")
        limit = min(limit, settings.max_timeout_s)
        before, included = await asyncio.to_thread(prepare)
        layout = shell_layout(policy, before, settings, included)
        try:
            await sandbox.check(layout)
        except SandboxUnavailable as exc:
            raise ToolError(f"the command was not run: {exc}") from None
        await asyncio.to_thread(begin)
        output = Output(settings.output_cap_bytes)
        try:
            finished = await sandbox.run(layout, shell_with_person_umask(command), limit, output)
        except asyncio.CancelledError:
            def cut_short() -> tuple[str, list[Version], tuple[Skipped, ...]]:
                done = aftermath(ctx, command, before, included, " (cancelled)")
                mark_changed(done[1], whose(ctx, command, None))
                return done

            work = asyncio.ensure_future(asyncio.to_thread(cut_short))
            note, made, skipped = await _despite_cancellation(work)
            if skipped:
                note = f" {left_out_text(skipped)}{note}"
            run = InterruptedRun(command, output.render(), output.total,
                                 tuple(v.short for v in made), note)
            ctx.interruption.append(run.describe())  # the orchestrator tells the model
            raise
        except SandboxUnavailable as exc:
            raise ToolError(f"the command was not run: {exc}") from None

        def after() -> tuple[str, list[Version], tuple[Skipped, ...], tuple[Source, ...]]:
            done = aftermath(ctx, command, before, included)
            sources = whose(ctx, command, finished)
            mark_changed(done[1], sources)
            return (*done, sources)

        note, made, skipped, sources = await asyncio.to_thread(after)
        if on_opened is not None:  # once what the command left is safe and recorded
            on_opened(ctx, finished)
        return ToolResult(_result(limit, finished, made, skipped) + note, sources=sources)

    return [shell_execute]


async def _despite_cancellation(work: asyncio.Future[_T]) -> _T:
    """The outcome of `work`, awaited to its end although the task awaiting
    it is being cancelled (again): what a command did must be made safe and
    told before the cancellation goes on, and the thread runs on anyway."""
    while True:
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            if work.done():
                return work.result()
