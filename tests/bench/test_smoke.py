"""Every benchmark script still runs: each `bench/*.py` with a `__main__` guard is
found by itself, run with `--smoke` in its own process, and must exit 0 and
print its figures. What the figures are is never checked: a smoke run is too
small to mean anything, and a slow machine must not fail the suite.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
TIMEOUT_S = 180  # per script; a smoke run takes seconds, this only stops a hang

# A figure: a number followed by a unit, e.g. "0.52 ms", "11,199 events/s", "0.591 %".
FIGURE = re.compile(
    r"\d[\d,]*(?:\.\d+)?\s*(?:ms|µs|us|ns|s|%|[KMG]i?B|bytes|tokens|[a-z]+/s)(?![A-Za-z])"
)

pytestmark = pytest.mark.slow


def is_script(path: Path) -> bool:
    """A file run as a program: it has a top-level `if __name__ == "__main__":`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(test, ast.Compare) and [type(op) for op in test.ops] == [ast.Eq]:
            sides = [test.left, *test.comparators]
            names = {s.id for s in sides if isinstance(s, ast.Name)}
            values = {s.value for s in sides if isinstance(s, ast.Constant)}
            if names == {"__name__"} and values == {"__main__"}:
                return True
    return False


SCRIPTS = sorted(p for p in BENCH.glob("*.py") if is_script(p))


def run_smoke(script: Path) -> subprocess.CompletedProcess[str]:
    """Run a script with --smoke; on a hang, kill it and every process it started."""
    process = subprocess.Popen(
        [sys.executable, str(script), "--smoke"],
        cwd=BENCH.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so its children go with it
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        out, err = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"{script.name} --smoke did not finish in {TIMEOUT_S} s\n{err[-2000:]}")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_the_scripts_are_found():
    names = {p.name for p in SCRIPTS}
    # Known scripts of every kind, so that a broken discovery cannot pass by finding nothing.
    assert {"turn_store.py", "interrupt_latency.py", "synthetic.py"} <= names


def test_a_module_without_a_main_guard_is_not_a_script(tmp_path):
    library = tmp_path / "helpers.py"
    library.write_text('def main():\n    pass\n\nif __name__ != "__main__":\n    main()\n')
    script = tmp_path / "figures.py"
    script.write_text('print("1 ms")\n\nif "__main__" == __name__:\n    pass\n')
    assert not is_script(library) and is_script(script)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_the_script_runs_in_smoke_mode_and_prints_its_figures(script):
    done = run_smoke(script)
    assert done.returncode == 0, (
        f"{script.name} --smoke exited {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    )
    figures = [line for line in done.stdout.splitlines() if FIGURE.search(line)]
    assert figures, f"{script.name} --smoke printed no figure:\n{done.stdout[-2000:]}"
