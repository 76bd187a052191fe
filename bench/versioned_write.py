"""Cost of one versioned agent write in a 2,000-file workspace.

A versioned write is what `file_write` does: check the path against the
policy, record the person's pending edits, write atomically (temporary
file, fsync, rename), and commit the agent's write. It is compared with two
baselines measured in the same run: a plain write and the atomic write
alone. Prints figures; asserts nothing.

    .venv/bin/python bench/versioned_write.py [--files 2000] [--rounds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from noema.paths import AgentPaths
from noema.providers.base import ToolCall
from noema.security.fsafe import atomic_write
from noema.security.settings import FilesSettings, HandsSettings, RootSettings
from noema.tools.hands import build_hands
from noema.tools.registry import ToolContext, ToolRegistry, ToolResult


def make_workspace(root: Path, files: int) -> None:
    per_folder = 50
    for n in range(files):
        folder = root / f"dir{n // per_folder:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{n % per_folder:02d}.txt").write_text(f"line of file {n}\n" * 30)


def timed(rounds: int, step: Callable[[int], object]) -> list[float]:
    samples = []
    for n in range(rounds):
        started = time.perf_counter()
        step(n)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def report(name: str, samples: list[float], baseline: float | None = None) -> float:
    p50 = statistics.median(samples)
    p90 = statistics.quantiles(samples, n=10)[-1]
    ratio = f"  ×{p50 / baseline:5.1f} of the atomic write" if baseline else ""
    print(f"{name:<44} p50 {p50:7.2f} ms   p90 {p90:7.2f} ms{ratio}")
    return p50


async def main(files: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        ws = base / "ws"
        make_workspace(ws, files)
        target = "dir007/file07.txt"
        print(f"workspace: {files} files; {rounds} rounds per measure\n")

        plain = timed(rounds, lambda n: (ws / target).write_bytes(b"plain %d\n" % n))
        atomic = timed(
            rounds, lambda n: atomic_write(ws, PurePosixPath(target), b"atomic %d\n" % n)
        )

        results = {}
        for watch in (True, False):
            settings = HandsSettings(files=FilesSettings(roots=(RootSettings(path=ws),)))
            agent = AgentPaths.for_agent("bench", base / f"home-{watch}")
            hands = build_hands(settings, agent, watch_changes=watch)
            registry = ToolRegistry(hands.tools)
            checked = registry.check(
                ToolCall("c", "file_write", json.dumps({"path": target, "content": "x"}))
            )
            assert not isinstance(checked, ToolResult), checked
            tool, _ = checked
            started = time.perf_counter()
            await registry.run(
                tool, {"path": "warm.txt", "content": "first"}, ToolContext("c", 0, 0)
            )
            first = (time.perf_counter() - started) * 1000

            samples = []
            for n in range(rounds):
                started = time.perf_counter()
                result = await registry.run(
                    tool, {"path": target, "content": f"agent {n}\n"}, ToolContext("c", n, 0)
                )
                samples.append((time.perf_counter() - started) * 1000)
                assert not result.is_error, result.content
            with_person = []
            for n in range(max(rounds // 4, 10)):
                (ws / "dir001" / "file01.txt").write_text(
                    f"person {n}\n"
                )  # an edit to record first
                started = time.perf_counter()
                await registry.run(
                    tool, {"path": target, "content": f"agent again {n}\n"}, ToolContext("c", n, 0)
                )
                with_person.append((time.perf_counter() - started) * 1000)
            hands.close()
            results[watch] = (first, samples, with_person)

        report("plain write (no fsync)", plain)
        baseline_atomic = report("atomic write (temp, fsync, rename)", atomic)
        for watch, label in ((True, "change notifications"), (False, "full scan per write")):
            first, samples, with_person = results[watch]
            print(f"\n{label}: first write (initial snapshot of the workspace) {first:.0f} ms")
            report("  versioned write", samples, baseline_atomic)
            report("  versioned write after a person edit", with_person, baseline_atomic)
        print("\ntarget: versioned write p50 <= 10 ms (with change notifications)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="small sizes: checks the script runs")
    options = parser.parse_args()
    if options.smoke:
        options.files, options.rounds = 400, 10  # the written file lies in the 8th folder
    asyncio.run(main(options.files, options.rounds))
