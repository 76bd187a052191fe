"""A version's diff as a person reads it: one part per file, saying whether
the file is new, changed, deleted or renamed, and its lines taken out and put
in; git's own lines (`diff --git`, `index 0000000..`, `new file mode 100644`,
`---`/`+++`) are read for what they mean and not shown."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class FileChange:
    path: str
    state: str = "changed"  # "new file", "deleted", "renamed from …", "changed"
    lines: list[tuple[str, str]] = field(default_factory=list)  # (kind, text): kind is
    # "added", "removed", "kept" or "gap" (lines between two changes left out)
    binary: bool = False

    @property
    def counts(self) -> tuple[int, int]:
        return (sum(k == "added" for k, _ in self.lines), sum(k == "removed" for k, _ in self.lines))


def read_diff(text: str) -> list[FileChange]:
    """The files a unified git diff changes, in its order."""
    changes: list[FileChange] = []
    current: FileChange | None = None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            parts = line.split(" b/", 1)
            current = FileChange(parts[1] if len(parts) == 2 else line[11:])
            changes.append(current)
            continue
        if current is None:
            continue
        if line.startswith("new file mode"):
            current.state = "new file"
        elif line.startswith("deleted file mode"):
            current.state = "deleted"
        elif line.startswith("rename from "):
            current.state = f"renamed from {line[12:]}"
        elif line.startswith("Binary files"):
            current.binary = True
        elif line.startswith(("index ", "--- ", "+++ ", "old mode", "new mode", "similarity ",
                              "rename to ", "\\ No newline")):
            continue
        elif (hunk := _HUNK.match(line)) is not None:
            if current.lines:
                current.lines.append(("gap", f"… from line {hunk.group(3)}"))
        elif line.startswith("+"):
            current.lines.append(("added", line[1:]))
        elif line.startswith("-"):
            current.lines.append(("removed", line[1:]))
        else:
            current.lines.append(("kept", line[1:] if line.startswith(" ") else line))
    return changes


__all__ = ["FileChange", "read_diff"]
