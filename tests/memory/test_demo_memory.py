"""The memory chapter of the demo runs end to end, offline."""

from __future__ import annotations

import io

from noema.interfaces.terminal.chat import TerminalListener
from noema.demo.memory import memory_chapter
from noema.paths import AgentPaths


class Quiet(TerminalListener):
    def on_idle(self) -> None:
        pass


async def test_the_memory_chapter_shows_rejection_retry_and_recall(tmp_path):
    out = io.StringIO()
    printer = Quiet(out)
    await memory_chapter(AgentPaths.for_agent("memory", tmp_path), printer.write, printer)
    text = out.getvalue()
    assert "attempt 1 REJECTED" in text and "[invented_id]" in text
    assert "attempt 2 is valid" in text and "compaction accepted" in text
    assert "stays in the session" in text
    assert "lookup_turn rehydrated turn 1" in text and "pH 6.2 and low nitrogen" in text
    assert "system prompt with save point 1" in text
