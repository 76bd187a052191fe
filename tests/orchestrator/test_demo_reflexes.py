"""The reflexes chapter of the demo runs offline and shows both paths."""

from __future__ import annotations

import io

import pytest

from noema.demo.reflexes import run_reflexes_demo

pytestmark = pytest.mark.slow


async def test_the_demo_shows_a_safe_and_an_unsafe_cancellation(tmp_path):
    out = io.StringIO()
    await run_reflexes_demo(out, tmp_path, pace=0.001)
    text = out.getvalue()
    assert "SAFE cancellation" in text and "UNSAFE cancellation" in text
    assert "flagged discarded" in text
    safe, unsafe = text.split("An urgent alert after a file write")
    assert "haveCurrentOperationsBeenCancelled" not in safe
    history = unsafe.split("The history the model sees")[1]
    lines = [line.strip() for line in history.splitlines()]
    notice = next(i for i, line in enumerate(lines) if "haveCurrentOperationsBeenCancelled" in line)
    assert lines[notice + 1].endswith("true") and "pool_event" in lines[notice + 2]
    assert (tmp_path / "workspace" / "notes" / "summary.md").exists()
