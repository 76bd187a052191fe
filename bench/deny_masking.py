"""Cost of masking deny paths at depth: the walk that finds every refused path
and every piece of git metadata in a workspace (cold, then warm from its
cache, then after one folder changed), and the sandbox start-up with those
masks against the same sandbox without them. Prints figures; asserts nothing.

    .venv/bin/python bench/deny_masking.py [--files 10000] [--rounds 50] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from noema.security.masks import Masker
from noema.security.policy import AccessPolicy, Root
from noema.security.sandbox import Layout, Output, Sandbox, run_process, sandbox_env
from noema.security.settings import DEFAULT_DENY, ShellSettings

SECRETS = (".env", "id_rsa", "server.pem", ".aws/credentials", "secrets.toml")


def build_workspace(ws: Path, files: int) -> int:
    """`files` files, 20 to a folder, four levels deep; a secret in every
    25th folder (rotating through the kinds) and a nested repository in every
    100th. Returns the number of secrets planted."""
    planted = 0
    for number in range(files // 20):
        folder = ws / f"a{number % 5}" / f"b{number % 7}" / f"c{number}"
        folder.mkdir(parents=True)
        for index in range(20):
            (folder / f"file{index}.txt").write_text("x\n")
        if number % 25 == 0:
            secret = folder / SECRETS[planted % len(SECRETS)]
            secret.parent.mkdir(exist_ok=True)
            secret.write_text("SECRET\n")
            planted += 1
        if number % 100 == 0:
            (folder / ".git").mkdir()
            (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return planted


def timed_ms(action) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def line(name: str, samples: list[float]) -> float:
    p50 = statistics.median(samples)
    p90 = statistics.quantiles(samples, n=10)[-1] if len(samples) > 1 else p50
    print(f"{name:<52} p50 {p50:8.2f} ms   p90 {p90:8.2f} ms")
    return p50


async def sandbox_start(layout: Layout, rounds: int) -> tuple[list[float], list[float]]:
    """`true` under bubblewrap with the layout's masks, and with none, interleaved."""
    sandbox = Sandbox(ShellSettings())
    bare = Layout(layout.workdir, layout.writable)
    await sandbox.check(bare)

    async def once(chosen: Layout) -> float:
        started = time.perf_counter()
        await run_process(sandbox.argv(chosen, "true"), cwd=chosen.workdir, env=sandbox_env(),
                          timeout_s=30, output=Output(4000))
        return (time.perf_counter() - started) * 1000

    with_masks, without = [], []
    for _ in range(rounds):
        without.append(await once(bare))
        with_masks.append(await once(layout))
    return with_masks, without


def main(files: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        ws = Path(scratch) / "ws"
        ws.mkdir()
        planted = build_workspace(ws, files)
        policy = AccessPolicy([Root(ws.resolve(), True)], DEFAULT_DENY, (Path(scratch) / "data",))

        cold = []
        for _ in range(max(3, rounds // 10)):
            masker = Masker(policy, Path(scratch) / "data")
            cold.append(timed_ms(masker.scan))
        scan = masker.scan()
        time.sleep(2.1)  # past the racy window: the folders just written become trusted
        masker.scan()
        warm = [timed_ms(masker.scan) for _ in range(rounds)]
        changed = []
        for number in range(rounds):
            (ws / "a0" / "b0" / "c0" / f"new{number}.txt").write_text("x\n")
            changed.append(timed_ms(masker.scan))

        print(f"workspace: {files} files in {scan.folders} folders, {planted} secrets, "
              f"{sum(1 for p in scan.frozen)} frozen git folders\n")
        line("layout walk, cold (no cache)", cold)
        line("layout walk, warm (nothing changed)", warm)
        line("layout walk, one folder changed", changed)
        print(f"masks: {len(scan.hidden)} paths hidden, {len(scan.frozen)} frozen")

        if shutil.which("bwrap") is None:
            print("\nbubblewrap is not installed: no sandbox figures")
            return
        layout = Layout(ws.resolve(), (ws.resolve(),), hidden=scan.hidden, frozen=scan.frozen)
        with_masks, without = asyncio.run(sandbox_start(layout, rounds))
        print()
        base = line("sandbox start-up, no masks", without)
        mounts = len(scan.hidden) + len(scan.frozen)
        masked = line(f"sandbox start-up, {mounts} mounts more", with_masks)
        print(f"\ncost of the masks at start-up: {masked - base:.2f} ms at p50")
        print("target: sandbox start-up overhead <= 30 ms (see bench/sandbox_overhead.py)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="small sizes, a few seconds")
    args = parser.parse_args()
    if args.smoke:
        main(files=400, rounds=5)
    else:
        main(args.files, args.rounds)
