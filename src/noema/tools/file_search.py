"""The reading side of the file tools: walking the roots, glob patterns,
grep, and paginated reads. Everything here is read-only, runs in a worker
thread, and spends its matching time through a `timed_regex.Budget`, which
looks at the stop event before each match, so that a cancelled search ends
promptly and a pathological pattern ends with a clear error.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..security import fsafe
from ..security.policy import Access, AccessPolicy, Root, Target
from ..security.settings import FilesSettings
from .errors import ToolError, quoted, shorten
from .timed_regex import Budget, Pattern, compile_internal, compile_query

MAX_LISTED = 200
MAX_MATCHES = 200
MAX_VISITED = 200_000
PAGE_CHARS = 60_000
LINE_CHARS = 4_000
_BINARY_PROBE = 8192


@dataclass(frozen=True, slots=True)
class Found:
    """An entry met while walking the roots (its path as listed, not resolved)."""

    path: Path
    root: Root
    is_dir: bool

    @property
    def relative(self) -> str:
        return self.path.relative_to(self.root.path).as_posix()


@dataclass(slots=True)
class Skipped:
    """What a search passed over, for the note under its answer."""

    special: int = 0  # sockets, pipes, devices: never opened
    unreadable: int = 0  # binary, too large, hard-linked, vanished, refused by the system

    def note(self) -> str:
        parts = []
        if self.unreadable:
            parts.append(f"{self.unreadable} binary, oversized or unreadable file(s)")
        if self.special:
            parts.append(f"{self.special} special file(s) (sockets, pipes, devices)")
        return f"\n({' and '.join(parts)} skipped)" if parts else ""


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> Pattern:
    """A glob as a regular expression: `*` within a name, `**` across folders."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    try:
        return compile_internal("".join(out) + r"\Z")
    except Exception:  # a bracket expression the engine cannot read
        raise ToolError(
            f"the pattern {quoted(pattern)} is not a valid glob; check its [ ] brackets"
        ) from None


def matcher(pattern: str) -> tuple[str, Pattern]:
    """How a pattern is applied ('name', 'relative' or 'absolute') and its regex."""
    text = pattern.strip()
    if not text:
        raise ToolError("the pattern is empty; use e.g. '*.md' or 'src/**/*.py'")
    if ".." in Path(text).parts:
        raise ToolError("patterns cannot contain '..'; use a path inside the allowed folders")
    if text.startswith(("/", "~")):
        return "absolute", glob_regex(os.path.expanduser(text))
    if "/" not in text:
        return "name", glob_regex(text)
    return "relative", glob_regex(text[2:] if text.startswith("./") else text)


def _matches(kind: str, regex: Pattern, found: Found, budget: Budget) -> bool:
    if kind == "name":
        return budget.match(regex, found.path.name)
    if kind == "absolute":
        return budget.match(regex, str(found.path))
    return budget.match(regex, found.relative)


def walk(
    policy: AccessPolicy, stop: threading.Event, skipped: Skipped | None = None
) -> Iterator[Found]:
    """Every entry the policy lets the model see, root by root, never through
    links; sockets, pipes and devices are counted in `skipped`, never yielded."""
    skipped = skipped if skipped is not None else Skipped()
    visited = 0
    for root in policy.roots:
        if policy.denial(root.path, Access.READ) or not root.path.is_dir():
            continue
        pending = [root.path]
        while pending:
            if stop.is_set():
                return
            folder = pending.pop()
            try:
                with os.scandir(folder) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError:
                skipped.unreadable += 1  # vanished, or the system refuses to list it
                continue
            folders, files = [], []
            for entry in entries:
                path = Path(entry.path)
                try:
                    if entry.is_symlink():
                        if _visible_link(policy, path):
                            files.append(Found(path, root, False))
                    elif entry.is_dir(follow_symlinks=False):
                        # A deeper root is walked on its own; the policy vets the rest.
                        if not policy.denial(path, Access.READ) and policy.root_of(path) is root:
                            folders.append(path)
                            yield Found(path, root, True)
                    elif policy.denial(path, Access.READ):
                        continue  # not even counted: its name is not the model's to know
                    elif entry.is_file(follow_symlinks=False):
                        files.append(Found(path, root, False))
                    else:
                        skipped.special += 1
                except OSError:
                    skipped.unreadable += 1
            yield from files
            pending.extend(reversed(folders))  # depth first, in name order
            visited += len(entries)
            if visited > MAX_VISITED:
                raise ToolError(
                    f"the search stopped after {MAX_VISITED} entries; narrow it with a "
                    "pattern naming a folder (e.g. 'src/**/*.py')"
                )


def _visible_link(policy: AccessPolicy, link: Path) -> bool:
    return policy.denial(Path(os.path.realpath(link)), Access.READ, link) is None


def find(policy: AccessPolicy, pattern: str, stop: threading.Event,
         listed: list[str] | None = None) -> str:
    """The paths matching a glob; `listed` collects the paths shown."""
    kind, regex = matcher(pattern)
    budget = Budget(stop)
    skipped = Skipped()
    found = [f for f in walk(policy, stop, skipped) if _matches(kind, regex, f, budget)]
    if listed is not None:
        listed.extend(str(f.path) for f in found[:MAX_LISTED])
    hits = [policy.display(f.path) + ("/" if f.is_dir else "") for f in found]
    if not hits:
        return f"No files or folders match {pattern!r}. {policy.summary()}" + skipped.note()
    shown = hits[:MAX_LISTED]
    more = (
        f"\n(showing {MAX_LISTED} of {len(hits)}; narrow the pattern)"
        if len(hits) > MAX_LISTED
        else ""
    )
    return f"{len(hits)} match(es) for {pattern!r}:\n" + "\n".join(shown) + more + skipped.note()


def decode_text(target: Target, data: bytes) -> str:
    """The text of a file, or a clear refusal when it is not text."""
    if b"\0" in data[:_BINARY_PROBE]:
        raise ToolError(
            f"{target.requested} looks binary ({len(data)} bytes); the file tools only read "
            "and edit text"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{target.requested} is not UTF-8 text (byte {exc.start} cannot be decoded); the "
            "file tools only read and edit text"
        ) from None


def read_text(files: FilesSettings, target: Target, read: list[bytes] | None = None) -> str:
    """A checked target's text; `read` collects the bytes read (whose marks
    are then judged by what was read, not by what the name holds later)."""
    data = fsafe.read_file(
        target.root.path,
        target.relative,
        max_bytes=files.max_read_bytes,
        allow_hard_links=files.allow_hard_links,
    )
    text = decode_text(target, data)
    if read is not None:
        read.append(data)
    return text


def grep(
    policy: AccessPolicy,
    files: FilesSettings,
    query: str,
    file_pattern: str | None,
    stop: threading.Event,
    read: list[bytes] | None = None,
) -> str:
    """Matching lines of the text files; `read` collects the bytes of each
    file that had a line shown."""
    regex = compile_query(query)
    selector = matcher(file_pattern) if file_pattern else None
    budget = Budget(stop)
    skipped = Skipped()
    lines: list[str] = []
    total = 0
    for found in walk(policy, stop, skipped):
        if found.is_dir or (selector and not _matches(*selector, found, budget)):
            continue
        this: list[bytes] = []
        try:
            target = policy.check(str(found.path), Access.READ)
            text = read_text(files, target, this)
        except (ToolError, OSError):
            skipped.unreadable += 1  # binary, too large, hard-linked, vanished, a socket
            continue
        shown = policy.display(found.path)
        for number, line in budget.lines(regex, text, shorten(shown)):
            total += 1
            if len(lines) < MAX_MATCHES:
                lines.append(f"{shown}:{number}: {line[:300]}")
                if read is not None and this:
                    read.append(this.pop())
    if not lines:
        where = f" in files matching {file_pattern!r}" if file_pattern else ""
        return f"No line matches {query!r}{where}." + skipped.note()
    tail = f"\n(showing {MAX_MATCHES} of {total} matching lines)" if total > MAX_MATCHES else ""
    return "\n".join(lines) + tail + skipped.note()


def read_page(
    policy: AccessPolicy, files: FilesSettings, path: str, offset: int, limit: int,
    read: list[bytes] | None = None,
) -> str:
    if offset < 1:
        raise ToolError(f"offset is a line number and starts at 1, not {offset}")
    if limit < 1:
        raise ToolError(f"limit must be at least 1 line, not {limit}")
    target = policy.check(path, Access.READ)
    text = read_text(files, target, read)
    lines = text.splitlines()
    shown = policy.display(target)
    if not lines:
        return f"{shown} is empty."
    if offset > len(lines):
        raise ToolError(f"{shown} has {len(lines)} lines; offset {offset} is past its end")
    page: list[str] = []
    size = 0
    last = offset - 1
    for number in range(offset, min(offset + limit, len(lines) + 1)):
        line = lines[number - 1]
        if len(line) > LINE_CHARS:
            line = line[:LINE_CHARS] + f" [... line cut: {len(line)} characters in all]"
        if page and size + len(line) > PAGE_CHARS:
            break
        page.append(line)
        size += len(line) + 1
        last = number
    header = f"{shown}: lines {offset}-{last} of {len(lines)}"
    footer = f"\n[more: call file_read with offset={last + 1}]" if last < len(lines) else ""
    return header + "\n" + "\n".join(page) + footer
