"""File tools for the model: find, grep, read, write, search-and-replace,
patch, mkdir, history and restore.

Every path goes through the access policy. Reading tools run in a worker
thread and may be cancelled at any time. Writing tools have no await point
between their first effect and their last: a cancellation lands either
before the call starts (nothing happened) or after it ends (its result is
delivered), so the orchestrator always knows whether the effect happened.
Each write is atomic and versioned: the person's edits first, then the
agent's write with the turn ID and the tool.

Whose words a file holds is kept in `FileMarks`, by content: a read says
whose outside words the bytes it read hold, and a write marks what it wrote
with the outside words that led, those its arguments carried and those of
the content it was made from (a replacement or a patch of marked text).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import replace

from ..security import fsafe
from ..security.history import ChangeNote, Recorded, Skipped, Version, left_out_text
from ..security.policy import Access, AccessPolicy, Target
from ..memory.turns import Source, sources_union
from ..security.file_marks import FileMarks
from ..security.settings import FilesSettings
from ..security.versions import Versions
from . import file_search, unidiff
from .registry import Tool, ToolContext, ToolError, ToolResult, tool


async def _off_loop(work: Callable[[threading.Event], str]) -> str:
    stop = threading.Event()
    try:
        return await asyncio.to_thread(work, stop)
    except asyncio.CancelledError:
        stop.set()  # the worker notices and ends; nothing it did had effects
        raise


def _lines(n: int) -> str:
    return "1 line" if n == 1 else f"{n} lines"


def _version_text(version: Version | None) -> str:
    return f"version {version.short}" if version else "no new version (the content was unchanged)"


def _outcome(recorded: Recorded) -> str:
    """The version a write made, and what the history had to leave out around it."""
    return _version_text(recorded.version) + "." + _left_out(recorded.skipped)


def _left_out(skipped: tuple[Skipped, ...]) -> str:
    """A sentence naming paths the history could not hold ('' for none)."""
    text = left_out_text(skipped)
    return f" {text}" if text else ""


def _carried(ctx: ToolContext, **values: str) -> tuple[Source, ...]:
    """Whose outside words the given arguments repeat (see security.provenance)."""
    found = ctx.words.carried(values) if ctx.words is not None else None
    return found.sources if found is not None else ()


def file_tools(policy: AccessPolicy, versions: Versions, files: FilesSettings,
               marks: FileMarks | None = None) -> list[Tool]:
    """The file tools, bound to a policy, the workspaces' histories, the limits
    and the marks of files that hold outside words."""
    marks = marks if marks is not None else FileMarks()

    def read_marks(read: list[bytes], shown: str = "") -> tuple[Source, ...]:
        return sources_union(*(marks.of_content(data, shown) for data in read))

    def write(
        ctx: ToolContext, target: Target, data: bytes, tool_name: str, summary: str,
        derived: tuple[Source, ...] = (),
    ) -> Recorded:
        if len(data) > files.max_write_bytes:
            raise ToolError(
                f"the content is {len(data)} bytes, above the {files.max_write_bytes}-byte "
                "limit for one write; split the file"
            )
        store = versions.store_for(target.root)
        note = ChangeNote("agent", summary, ctx.turn_id, tool_name)
        with store.change(note, [str(target.relative)]) as recorded:
            fsafe.atomic_write(
                target.root.path, target.relative, data, allow_hard_links=files.allow_hard_links
            )
        # What it holds may be a stranger's: the words that led, those its
        # content repeats, those of what it was made from.
        text = data.decode("utf-8", "replace")
        marks.mark(data, sources_union(ctx.lead, derived, _carried(ctx, content=text)),
                   str(target.path))
        if recorded.version is not None:
            marks.mark_version(recorded.version.id, ctx.lead)
        return recorded

    def writable(path: str) -> Target:
        target = policy.check(path, Access.WRITE)
        if str(target.relative) == ".":
            raise ToolError(f"{path} is a root folder, not a file")
        return target

    @tool(side_effects=False, own_words=True)
    async def file_find(ctx: ToolContext, pattern: str) -> ToolResult:
        """List files and folders whose path matches a glob pattern.

        A pattern without '/' matches names anywhere ('*.md'); with '/' it matches the
        path from the root ('src/**/*.py', '**' spans folders).

        Args:
            pattern: The glob, e.g. '*.py', 'notes/*.md' or 'docs/**/*.txt'.
        """
        listed: list[str] = []
        text = await _off_loop(lambda stop: file_search.find(policy, pattern, stop, listed))
        return ToolResult(text, sources=marks.of_paths(listed))  # names a stranger may have chosen

    @tool(side_effects=False, own_words=True)
    async def file_grep(ctx: ToolContext, query: str,
                        file_pattern: str | None = None) -> ToolResult:
        """Search the text files for lines matching a regular expression. A search is
        stopped after 20 s in all or 1 s on one line; sockets, pipes and devices are
        skipped.

        Args:
            query: A Python regular expression (re syntax, matched line by line); escape
                ( [ . * to match them literally.
            file_pattern: Only search files matching this glob, e.g. '*.py'.
        """
        read: list[bytes] = []
        text = await _off_loop(
            lambda stop: file_search.grep(policy, files, query, file_pattern, stop, read)
        )
        return ToolResult(text, sources=read_marks(read))

    @tool(side_effects=False, own_words=True)
    async def file_read(ctx: ToolContext, path: str, offset: int = 1,
                        limit: int = 500) -> ToolResult:
        """Read a text file, a page of lines at a time.

        Args:
            path: The file; relative paths start in the workspace.
            offset: The first line to show (1 is the first line).
            limit: How many lines to show at most.
        """
        read: list[bytes] = []
        text = await _off_loop(
            lambda _stop: file_search.read_page(policy, files, path, offset, limit, read)
        )
        # Judged by the bytes read: a rename in between cannot unmark them.
        return ToolResult(text, sources=read_marks(read, path))

    @tool(side_effects=True, own_words=True)
    def file_write(ctx: ToolContext, path: str, content: str) -> str:
        """Create or replace a whole text file (missing folders are created).

        Args:
            path: The file; relative paths start in the workspace.
            content: The complete new content.
        """
        target = writable(path)
        existed = target.path.exists()
        data = content.encode("utf-8")
        recorded = write(ctx, target, data, "file_write", f"file_write {target.relative}")
        verb = "Replaced" if existed else "Created"
        return (
            f"{verb} {policy.display(target)} ({len(data)} bytes, "
            f"{_lines(len(content.splitlines()))}); {_outcome(recorded)}"
        )

    @tool(side_effects=True, own_words=True)
    def file_search_and_replace(ctx: ToolContext, path: str, old_text: str, new_text: str) -> str:
        """Replace one exact piece of text in a file. old_text must occur exactly once:
        include enough surrounding lines to make it unique.

        Args:
            path: The file to edit.
            old_text: The exact text to replace, whitespace and indentation included.
            new_text: The text to put in its place.
        """
        if not old_text:
            raise ToolError("old_text is empty; give the exact text to replace")
        target = writable(path)
        before: list[bytes] = []
        text = file_search.read_text(files, target, before)
        count = text.count(old_text)
        shown = policy.display(target)
        if count == 0:
            raise ToolError(
                f"old_text was not found in {shown}. It must match exactly, spaces, tabs and "
                "line breaks included: read the file again (file_read) and copy the text"
            )
        if count > 1:
            lines = []
            start = 0
            for _ in range(min(count, 10)):
                at = text.index(old_text, start)
                lines.append(str(text.count("\n", 0, at) + 1))
                start = at + 1
            raise ToolError(
                f"old_text occurs {count} times in {shown} (lines {', '.join(lines)}); include "
                "more surrounding text so that it occurs exactly once"
            )
        at = text.index(old_text)
        line = text.count("\n", 0, at) + 1
        updated = text[:at] + new_text + text[at + len(old_text) :]
        recorded = write(
            ctx,
            target,
            updated.encode("utf-8"),
            "file_search_and_replace",
            f"file_search_and_replace {target.relative} (line {line})",
            read_marks(before),
        )
        return f"Replaced the text at line {line} of {shown}; {_outcome(recorded)}"

    @tool(side_effects=True, own_words=True)
    def file_patch(ctx: ToolContext, path: str, unified_diff: str) -> str:
        """Apply a unified diff to one file. Hunks are placed by their context lines,
        so slightly wrong line numbers are tolerated; if any hunk does not fit, nothing
        is changed.

        Args:
            path: The file the diff applies to (a missing file counts as empty).
            unified_diff: The diff: '@@ -start,count +start,count @@' hunks whose lines
                start with ' ' (context), '-' (removed) or '+' (added).
        """
        target = writable(path)
        before: list[bytes] = []
        text = file_search.read_text(files, target, before) if target.path.exists() else ""
        updated = unidiff.apply(text, unified_diff)
        recorded = write(
            ctx, target, updated.encode("utf-8"), "file_patch", f"file_patch {target.relative}",
            sources_union(read_marks(before), _carried(ctx, unified_diff=unified_diff)),
        )
        before, after = text.count("\n"), updated.count("\n")
        return (
            f"Patched {policy.display(target)} ({_lines(before)} → {_lines(after)}); "
            f"{_outcome(recorded)}"
        )

    @tool(side_effects=True, own_words=True)
    def file_mkdir(ctx: ToolContext, path: str) -> str:
        """Create a folder (and its missing parents).

        Args:
            path: The folder to create.
        """
        target = policy.check(path, Access.WRITE)
        if target.path.is_dir():
            return f"{policy.display(target)} already exists."
        fsafe.make_dirs(target.root.path, target.relative)
        return f"Created the folder {policy.display(target)}."

    @tool(side_effects=False, own_words=True)
    def file_history(ctx: ToolContext, path: str, limit: int = 20) -> str | ToolResult:
        """List the recorded versions of a file (or folder), newest first: version ID,
        time, who made it (person or agent), the agent's turn, and what was done.

        Args:
            path: The file or folder.
            limit: How many versions to list at most (1 to 200).
        """
        if limit < 1:
            raise ToolError(f"limit must be at least 1 version, not {limit}")
        target = policy.check(path, Access.READ)
        if not target.root.writable:
            return (
                f"{policy.display(target)} is in a read-only folder; only read-write folders "
                "are versioned."
            )
        store = versions.store_for(target.root)
        store.record_person()  # the person's latest edits belong in the answer
        left_out = _left_out(store.skipped)
        rel = str(target.relative)
        found = store.log(None if rel == "." else rel, min(limit, 200))
        shown = "the workspace" if rel == "." else policy.display(target)
        if not found:
            return f"No versions of {shown} yet." + left_out
        listing = "\n".join(v.line() for v in found)
        tail = f"\n{left_out.lstrip()}" if left_out else ""
        # A version's note repeats the call that made it: one a stranger's
        # words led to is theirs as much as the agent's.
        return ToolResult(f"Versions of {shown}, newest first:\n{listing}{tail}",
                          sources=marks.of_versions(v.id for v in found))

    @tool(side_effects=True, own_words=True)
    def file_restore(ctx: ToolContext, path: str, version: str) -> str:
        """Put back the content a file had in an earlier version (see file_history).
        The current content is recorded first, so this can be undone too.

        Args:
            path: The file to restore.
            version: The version ID, as file_history lists it.
        """
        from ..security import undo  # it needs pygit2, which an idle agent does not load

        target = writable(path)
        store = versions.store_for(target.root)
        rel = str(target.relative)
        note = ChangeNote(
            "agent", f"file_restore {rel} to {version.strip()[:12]}", ctx.turn_id, "file_restore"
        )
        made = undo.restore(store, rel, version, note)
        if made is not None:
            marks.mark_version(made.id, ctx.lead)
        if ctx.lead:  # a restore a stranger's words led to: what it put back is theirs too
            restored = fsafe.read_file(target.root.path, target.relative,
                                       max_bytes=files.max_read_bytes,
                                       allow_hard_links=files.allow_hard_links)
            marks.mark(restored, ctx.lead, str(target.path))
        left_out = _left_out(store.skipped)
        if made is None:
            return (
                f"{policy.display(target)} already has the content of version {version}."
                + left_out
            )
        return (
            f"Restored {policy.display(target)} to version {version}; "
            f"{_version_text(made)}.{left_out}"
        )

    where = "\n\n" + policy.summary()
    tools = [
        file_find,
        file_grep,
        file_read,
        file_write,
        file_search_and_replace,
        file_patch,
        file_mkdir,
        file_history,
        file_restore,
    ]
    return [
        replace(t, description=t.description + where) if t.name in _WITH_ROOTS else t for t in tools
    ]


_WITH_ROOTS = frozenset({"file_find", "file_read", "file_write"})
