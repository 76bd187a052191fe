"""An approval's arguments as the person reads them: a command as a command, a
file and its new text as a diff against what the file holds now, a mail as a
mail, a message as a message.

The arguments arrive as the approval summary writes them (`name: value`
lines, invisible characters already written out as ⟨U+…⟩). Only the fields a
tool is known to take are read, each at most once: a value holding a line
that looks like another field ("to: someone" inside a mail's body) makes the
reading ambiguous, and the card then shows the lines as they came, never a
guess a hostile model could have steered.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from .words import tool_name

# Per tool: the fields it takes, and those it cannot be asked without.
_FIELDS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "shell_execute": (("command", "timeout"), ("command",)),
    "file_write": (("path", "content"), ("path", "content")),
    "file_search_and_replace": (("path", "old_text", "new_text"), ("path", "old_text", "new_text")),
    "file_patch": (("path", "unified_diff"), ("path", "unified_diff")),
    "email_send": (("to", "subject", "body", "reply_to_uid"), ("to", "subject", "body")),
    "telegram_send": (("text", "chat_id"), ("text",)),
}
MAX_DIFF_LINES = 400  # a longer diff is cut, and says so

Reader = Callable[[str], "str | None"]  # a file's text now, by the path the tool was given


def fields(tool: str, shown: str) -> dict[str, str] | None:
    """The tool's arguments read back from their summary; None when the tool is
    not one this reads or the reading is ambiguous."""
    known = _FIELDS.get(tool)
    if known is None:
        return None
    names, required = known
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in shown.split("\n"):
        name, colon, rest = line.partition(": ")
        if colon and name in names:
            if name in found:
                return None  # a field twice: one of them is inside another's value
            current = found[name] = [rest]
        elif current is None:
            return None  # text before any field
        else:
            current.append(line)
    if not all(name in found for name in required):
        return None
    return {name: "\n".join(lines) for name, lines in found.items()}


def _diff(old: str, new: str) -> list[list[str]]:
    """Lines of a diff as [sign, text]: " " kept, "-" taken out, "+" put in."""
    lines: list[list[str]] = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3):
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            lines.append(["@", "…"])
        else:
            lines.append([line[:1] or " ", line[1:]])
    if len(lines) > MAX_DIFF_LINES:
        cut = len(lines) - MAX_DIFF_LINES
        lines = lines[:MAX_DIFF_LINES] + [["@", f"… and {cut} more lines"]]
    return lines


def view(tool: str, shown: str, current: Reader | None = None) -> dict[str, Any]:
    """How the card shows this request: `title` (what the tool does, in words)
    and `kind` with its parts ("command", "diff", "mail", "message"), or
    "lines" with the summary as it came."""
    title = tool_name(tool)
    read = fields(tool, shown)
    if read is None:
        return {"title": title, "kind": "lines", "text": shown}
    if tool == "shell_execute":
        notes = [f"time limit: {read['timeout']} s"] if read.get("timeout") not in (None, "") \
            else []
        return {"title": title, "kind": "command", "command": read["command"], "notes": notes}
    if tool in ("file_write", "file_search_and_replace"):
        path = read["path"]
        before = current(path) if current is not None else None
        if tool == "file_write":
            after = read["content"]
        elif before is not None and before.count(read["old_text"]) == 1:
            after = before.replace(read["old_text"], read["new_text"])
        else:
            before, after = read["old_text"], read["new_text"]
        state = "new file" if before is None and tool == "file_write" else "changed"
        return {"title": title, "kind": "diff", "path": path, "state": state,
                "lines": _diff(before or "", after)}
    if tool == "file_patch":
        lines = [[line[:1] if line[:1] in "+- " else "@", line[1:]]
                 for line in read["unified_diff"].split("\n")
                 if not line.startswith(("---", "+++", "diff ", "index "))]
        return {"title": title, "kind": "diff", "path": read["path"], "state": "changed",
                "lines": lines}
    if tool == "email_send":
        return {"title": title, "kind": "mail",
                "to": [r.strip() for r in read["to"].replace(";", ",").split(",") if r.strip()],
                "subject": read["subject"], "body": read["body"],
                "reply": bool(read.get("reply_to_uid"))}
    return {"title": title, "kind": "message", "text": read["text"],
            "to": read.get("chat_id") or ""}


__all__ = ["Reader", "fields", "view"]
