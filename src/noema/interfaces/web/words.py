"""Names the pages give to things the code names: tools, kinds of turn, the
search's filters. A tool not listed (an MCP server's) keeps its own name."""

from __future__ import annotations

import re
from collections.abc import Mapping

# What a tool does, as a person would ask for it.
TOOL_NAMES: Mapping[str, str] = {
    "shell_execute": "Run a command",
    "file_write": "Write a file",
    "file_patch": "Change a file",
    "file_search_and_replace": "Replace text in a file",
    "file_restore": "Restore a file",
    "file_mkdir": "Make a folder",
    "file_read": "Read a file",
    "file_find": "Find files",
    "file_grep": "Search in files",
    "file_history": "Read a file's history",
    "email_send": "Send a mail",
    "email_read": "Read a mail",
    "email_list": "List mails",
    "email_save_attachment": "Save a mail's attachment",
    "telegram_send": "Send a Telegram message",
    "telegram_save_file": "Save a file from Telegram",
    "schedule_alarm": "Set an alarm",
    "schedule_recurring": "Set a repeating alarm",
    "schedule_cancel": "Cancel an alarm",
    "schedule_list": "List the alarms",
    "web_search": "Search the web",
    "web_get_content": "Read a web page",
    "sensor_stop": "Silence a sensor",
    "sensor_start": "Start a sensor",
    "sensor_status": "Read the sensors' state",
    "search_full_history": "Search the conversation",
    "get_current_time": "Read the clock",
    "document_search": "Search the documents",
    "get_partial_document": "Read a document",
}


def tool_name(tool: str | None) -> str:
    """A tool's name in words ("Run a command"); its own name when it has none."""
    if not tool:
        return "a tool"
    return TOOL_NAMES.get(tool, tool)


def kind_words(kind: str, tool: str | None, agent: str) -> str:
    """Who or what a turn is, in words: You, the agent's name, a tool's call or result."""
    if kind == "user":
        return "You"
    if kind == "assistant":
        return agent
    if kind == "tool_call":
        return f"{tool_name(tool)} (asked)"
    if kind == "tool_result":
        return f"{tool_name(tool)} (result)"
    if kind == "event":
        return "Events"
    return "Note"


_RESTORED = re.compile(r"Restore of (.+) to [0-9a-f]{7,40} \((?:noema restore|the page)\)")


def summary_words(summary: str) -> str:
    """A version's summary ("file_write notes.txt") with its tool said in words
    ("Write a file: notes.txt"), and a restore without its commit's id."""
    if (restored := _RESTORED.fullmatch(summary)) is not None:
        return f"Restored {restored.group(1)} as an earlier version had it"
    tool, _, rest = summary.partition(" ")
    if tool in TOOL_NAMES:
        return f"{TOOL_NAMES[tool]}: {rest}" if rest else TOOL_NAMES[tool]
    return summary


# The search's filters (`memory.search.ROLE_KINDS`' keys) in words.
def role_words(agent: str) -> dict[str, str]:
    return {"user": "You", "assistant": agent, "tool": "Tools", "event": "Events",
            "note": "Notes"}


__all__ = ["TOOL_NAMES", "kind_words", "role_words", "summary_words", "tool_name"]
