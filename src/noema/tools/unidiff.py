"""Applying a unified diff (one file) written by a model.

Models get hunk line numbers wrong more often than context lines, so a hunk
is placed where its context and removed lines match, searching outward from
the line its header names; trailing whitespace is forgiven when nothing
matches exactly. A hunk that matches nowhere fails the whole patch: nothing
is half-applied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .registry import ToolError

_HUNK = re.compile(r"^@@\s*(?:-(\d+)(?:,(\d+))?\s+\+(\d+)(?:,(\d+))?)?\s*@@")
_NO_NEWLINE = "\\"


class PatchError(ToolError):
    """A diff that cannot be parsed or does not fit the file."""


@dataclass(frozen=True, slots=True)
class Hunk:
    """One `@@` block: its claimed start and its lines as (op, text) pairs."""

    old_start: int | None
    lines: tuple[tuple[str, str], ...]
    new_ends_without_newline: bool = False

    @property
    def old(self) -> list[str]:
        return [text for op, text in self.lines if op in " -"]

    @property
    def new(self) -> list[str]:
        return [text for op, text in self.lines if op in " +"]


def parse(diff: str) -> list[Hunk]:
    """The hunks of a one-file unified diff; headers before the first `@@` are skipped."""
    hunks: list[Hunk] = []
    start: int | None = None
    body: list[tuple[str, str]] = []
    open_hunk = False
    no_newline = False
    lines = diff.splitlines()
    index = 0

    def close() -> None:
        while body and body[-1] == (" ", "") and not body[-1][1]:
            body.pop()  # a bare empty line at the end is the diff's own trailing newline
        if body:
            hunks.append(Hunk(start, tuple(body), no_newline))

    while index < len(lines):
        line = lines[index]
        match = _HUNK.match(line)
        if match:
            if open_hunk:
                close()
            start = int(match.group(1)) if match.group(1) is not None else None
            body, open_hunk, no_newline = [], True, False
        elif (
            line.startswith("--- ")
            and index + 1 < len(lines)
            and lines[index + 1].startswith("+++ ")
        ):
            if hunks or (open_hunk and body):
                raise PatchError(
                    "the diff changes more than one file; file_patch applies to one file: "
                    "send one diff per file"
                )
            index += 1
        elif open_hunk:
            if line.startswith(_NO_NEWLINE):
                if body and body[-1][0] == "+":
                    no_newline = True
            elif line == "":
                body.append((" ", ""))
            elif line[0] in " -+":
                body.append((line[0], line[1:]))
            else:
                raise PatchError(
                    f"line {index + 1} of the diff is not part of a hunk ({line[:60]!r}); each "
                    "line must start with ' ', '-' or '+'"
                )
        index += 1
    if open_hunk:
        close()
    if not hunks:
        raise PatchError("the diff has no hunks: it needs '@@ -start,count +start,count @@' blocks")
    return hunks


def apply(text: str, diff: str) -> str:
    """`text` with the diff applied, or PatchError naming the hunk that does not fit."""
    hunks = parse(diff)
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in lines]
    cursor = 0
    for number, hunk in enumerate(hunks, 1):
        old, new = hunk.old, hunk.new
        expected = max((hunk.old_start or 1) - 1, 0)
        if not old:
            if hunk.old_start is None:
                raise PatchError(
                    f"hunk {number} only adds lines and has no line number to place them"
                )
            at = min(hunk.old_start, len(lines))  # "-0,0" adds at the top
        else:
            at = _locate(bare, old, expected, cursor, hunk.old_start is None, number)
        end = at + len(old)
        # Context lines keep the file's own text (a loose match may differ in
        # trailing spaces); added lines take the file's line ending.
        replacement, original = [], iter(lines[at:end])
        for op, text_line in hunk.lines:
            if op == " ":
                replacement.append(next(original))
            elif op == "-":
                next(original)
            else:
                replacement.append(text_line + newline)
        # A last line without a newline that now has lines after it gets one.
        replacement = [
            line if line.endswith("\n") or i == len(replacement) - 1 else line + newline
            for i, line in enumerate(replacement)
        ]
        if replacement and end < len(lines) and not replacement[-1].endswith("\n"):
            replacement[-1] += newline
        if replacement and end >= len(lines) and hunk.new_ends_without_newline:
            replacement[-1] = replacement[-1].rstrip("\r\n")
        lines[at:end] = replacement
        bare[at:end] = [line.rstrip("\r\n") for line in replacement]
        cursor = at + len(new)
    return "".join(lines)


def _locate(
    bare: list[str], old: list[str], expected: int, cursor: int, unnumbered: bool, number: int
) -> int:
    for compare in (_exact, _loose):
        found = [i for i in range(cursor, len(bare) - len(old) + 1) if compare(bare, old, i)]
        if not found:
            continue
        if unnumbered and len(found) > 1:
            raise PatchError(
                f"hunk {number} matches {len(found)} places and has no line number; add "
                "more context lines or the '@@ -line,count +line,count @@' numbers"
            )
        return min(found, key=lambda i: abs(i - expected))
    first = old[0] if old else ""
    raise PatchError(
        f"hunk {number} (near line {expected + 1}) does not match the file: its context and "
        f"removed lines, starting with {first[:80]!r}, were not found. Read the file again "
        "and send a fresh diff, or use file_search_and_replace."
    )


def _exact(bare: list[str], old: list[str], at: int) -> bool:
    return bare[at : at + len(old)] == old


def _loose(bare: list[str], old: list[str], at: int) -> bool:
    return all(a.rstrip() == b.rstrip() for a, b in zip(bare[at : at + len(old)], old, strict=True))
