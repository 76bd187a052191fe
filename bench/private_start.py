"""What checking the agent's folder for loose modes costs at each start.

Each start looks at the agent's folder two levels deep (`health/modes.py`,
`exposed`) for files and folders other users could read; `noema doctor`
walks all of it. A folder that has run for long holds mostly the versions
repositories' loose git objects, so the folder built here has `--files`
files spread over 256 object folders, as git spreads them. The figures: the
start's look at a private folder (every start), the full walk of it (each
`noema doctor`), the walk that finds everything loose, and tightening all of
it (once, the first start after an older version left it loose).

    .venv/bin/python bench/private_start.py [--files N] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from noema.health.modes import exposed, loose_modes, tighten
from noema.paths import AgentPaths


def build(home: Path, files: int, mode: int) -> AgentPaths:
    paths = AgentPaths.for_agent("bench", home).ensure()
    objects = paths.versions_dir / "workspace-0.git" / "objects"
    for n in range(files):
        folder = objects / f"{n % 256:02x}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{n:038x}"
        path.write_bytes(b"x")
        os.chmod(path, mode)
    for folder in (paths.root, *paths.root.rglob("*")):
        if folder.is_dir():
            os.chmod(folder, 0o755 if mode & 0o044 else 0o700)
    return paths


def timed(call, repeats: int) -> tuple[float, object]:
    """The median wall time of `call` in ms, and its last result."""
    times, result = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        result = call()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--smoke", action="store_true", help="a small folder, seconds")
    args = parser.parse_args()
    files = 2_000 if args.smoke else args.files
    repeats = 3 if args.smoke else 5
    with tempfile.TemporaryDirectory(prefix="noema-bench-modes-") as base:
        private = build(Path(base) / "private", files, 0o400)
        look_ms, seen = timed(lambda: exposed(private), repeats)
        assert seen is False
        print(f"start's look at a private folder of {files:,} files: {look_ms:.2f} ms")
        walk_ms, found = timed(lambda: loose_modes(private), repeats)
        assert not found, found[:3]
        print(f"doctor's walk of the same folder: {walk_ms:.1f} ms "
              f"({walk_ms * 1000 / files:.2f} µs per file)")

        loose = build(Path(base) / "loose", files, 0o444)
        find_ms, found = timed(lambda: loose_modes(loose), repeats)
        print(f"walk finding {len(found):,} loose entries: {find_ms:.1f} ms")
        began = time.perf_counter()
        outcome = tighten(found)
        tighten_ms = (time.perf_counter() - began) * 1000
        assert not outcome.failed and not loose_modes(loose)
        print(f"tightening {len(outcome.done):,} entries: {tighten_ms:.1f} ms (once)")


if __name__ == "__main__":
    main()
