"""`bench/citation_support.py` reads a file in LoCoMo's format and prints its two
headline figures first. Run on a tiny slice of a real conversation, on words
alone (no model to load): the figures themselves are not checked."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "citation_support.py"
LOCOMO = Path("/work/shared/data/locomo/locomo-conv-30.json")

pytestmark = pytest.mark.slow


def tiny_slice(source: Path, sessions: int = 2) -> list[dict]:
    """The first sessions of the first conversation, with their observations."""
    sample = json.loads(source.read_text(encoding="utf-8"))[0]
    conversation = {k: v for k, v in sample["conversation"].items()
                    if not k.startswith("session_") or int(re.findall(r"\d+", k)[0]) <= sessions}
    observation = {k: v for k, v in sample["observation"].items()
                   if int(re.findall(r"\d+", k)[0]) <= sessions}
    return [{"sample_id": "slice", "conversation": conversation, "observation": observation}]


def made_up() -> list[dict]:
    sys.path.insert(0, str(BENCH.parent))
    try:
        import citation_support
    finally:
        sys.path.remove(str(BENCH.parent))
    return [citation_support.smoke_sample()]


def test_the_bench_prints_both_headline_figures_first(tmp_path):
    data = tiny_slice(LOCOMO) if LOCOMO.exists() else made_up()
    path = tmp_path / "slice.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    done = subprocess.run([sys.executable, str(BENCH), str(path), "--words-only"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"per citation: accept correct \d+\.\d %, reject wrong \d+\.\d %", lines[0])
    assert re.fullmatch(r"per save point: accept good \d+\.\d %, reject shuffled \d+\.\d %",
                        lines[1])
    assert any(line.startswith("time per save point") for line in lines)
    assert any("(held out)" in line for line in lines)  # the slice was never tuned on


def test_a_file_that_is_not_locomo_is_refused_with_an_error(tmp_path):
    path = tmp_path / "not.json"
    path.write_text('{"conversation": 3}', encoding="utf-8")
    done = subprocess.run([sys.executable, str(BENCH), str(path), "--words-only"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode != 0
    assert "LoCoMo" in done.stderr and "Traceback" not in done.stderr
