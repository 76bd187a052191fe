"""The hands demo runs end to end and shows each safety property."""

from __future__ import annotations

from pathlib import Path

import pytest

from noema.demo.hands import demo_hands
from noema.paths import AgentPaths
from tests.security.world import BWRAP


@pytest.mark.skipif(not BWRAP, reason="the demo's shell steps need bubblewrap")
async def test_demo_shows_the_safety_net(tmp_path: Path):
    printed: list[str] = []
    await demo_hands(tmp_path / "demo", AgentPaths.for_agent("demo", tmp_path / "home"), printed.append)
    text = "\n".join(printed)
    assert "refused: cannot undo" in text and "changed after it by the person" in text
    assert "Undid " in text and "todo.md exists after the undo: False" in text
    assert "notes.md still holds the person's line: True" in text
    assert "hello from the sandbox" in text
    assert text.count("refused/failed: Error:") == 2  # the traversal read and the outside write
    assert "outside.txt on the real disk afterwards: 'a file outside the workspace\\n'" in text
    assert (tmp_path / "demo" / "outside.txt").read_text() == "a file outside the workspace\n"
