"""Log rotation under polling: lines lost and duplicated, and how fast one log reads.

A separate writer process appends numbered lines at a steady rate and
rotates the log every few hundred lines, in each of three ways: rename and
create (keeping `app.log.1` ... `app.log.20`), copytruncate (the same
numbered copies) and delete and re-create. The log sensor's follower reads
the file as the sensor drives it (slice after slice while more is waiting,
a poll's sleep at the end of the file), and every line read is counted by
its number: lines written, read, lost, duplicated, and read out of order.
Rename and copytruncate are polled slower than they rotate (several
rotations between two looks, recovered from the numbered names); delete and
re-create is polled faster than it rotates, since a file deleted between two
looks is gone for any poller.

Then the read throughput of one log: a plain `readline` loop over the same
file (the baseline), the follower alone (lines with their places), and the
whole sensor (each line's pattern key computed and an event built), which
must outpace the writer on its own for a log to be followed live.

    .venv/bin/python bench/log_rotation.py            # 1,000 rotations of each kind
    .venv/bin/python bench/log_rotation.py --smoke    # a few seconds
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from noema.perception.clock import wall_clock
from noema.perception.hub import Emitter
from noema.perception.sensors.logfile import LogFileSensor, LogFollower

KEEP = 20  # numbered rotations kept, as logrotate's `rotate 20`
PAD = "x" * 60  # lines of about 100 bytes


@dataclass(frozen=True)
class Plan:
    """What the writer does: `rotations` rotations of `kind`, one every
    `per_file` lines, `rate` lines a second."""

    path: str
    kind: str  # "rename", "copytruncate" or "delete"
    rotations: int
    per_file: int
    rate: int


@dataclass(frozen=True)
class Kind:
    name: str
    label: str
    per_file: int
    poll: float  # the sensor's poll interval


# -- the writer (a child process) -------------------------------------------------------

def shift(path: str) -> None:
    """Make room for `app.log.1` as logrotate does: .19 -> .20, ..., .1 -> .2."""
    for number in range(KEEP - 1, 0, -1):
        older = f"{path}.{number}"
        if os.path.exists(older):
            os.replace(older, f"{path}.{number + 1}")


def rotate(plan: Plan, handle):
    if plan.kind == "copytruncate":
        handle.flush()
        shift(plan.path)
        shutil.copyfile(plan.path, f"{plan.path}.1")
        os.truncate(plan.path, 0)
        return handle  # opened for appending: the next line goes at the new start
    handle.close()
    if plan.kind == "rename":
        shift(plan.path)
        os.rename(plan.path, f"{plan.path}.1")
    else:
        os.remove(plan.path)
    return open(plan.path, "a", encoding="utf-8")  # noqa: SIM115 - the writer's log


def write(plan: Plan) -> None:
    """Append numbered lines at `plan.rate`, rotating every `plan.per_file` lines."""
    total = plan.rotations * plan.per_file + plan.per_file  # a last file after the last rotation
    handle = open(plan.path, "a", encoding="utf-8")  # noqa: SIM115 - kept across rotations
    start, written = time.monotonic(), 0
    while written < total:
        due = min(total, int((time.monotonic() - start) * plan.rate) + 1)
        while written < due:
            upto = min(due, (written // plan.per_file + 1) * plan.per_file)
            handle.write("".join(f"line {n:09d} {plan.kind} {PAD}\n"
                                 for n in range(written, upto)))
            handle.flush()
            written = upto
            if written % plan.per_file == 0 and written < total:
                handle = rotate(plan, handle)
        time.sleep(0.002)
    handle.close()


# -- the reader: the follower, driven as the sensor drives it ---------------------------

def follow(plan: Plan, poll: float, writer: subprocess.Popen) -> list[int]:
    """Read as the sensor does (slice after slice while more is waiting, a
    `poll` sleep at the end of the file) until every line is read, or nothing
    new comes for 3 s after the writer has finished; the line numbers read."""
    total = plan.rotations * plan.per_file + plan.per_file
    reader = LogFollower(plan.path, from_start=True)
    numbers: list[int] = []
    done_at = None
    try:
        while True:
            numbers.extend(int(text[5:14]) for text in reader.read().lines)
            if reader.more:
                continue
            if writer.poll() is not None:
                done_at = done_at or time.monotonic()
                if len(numbers) >= total or time.monotonic() - done_at > 3.0:
                    break
            time.sleep(poll)
    finally:
        reader.close()
    return numbers


def run_kind(folder: Path, kind: Kind, rotations: int, rate: int) -> dict[str, object]:
    path = folder / f"{kind.name}.log"
    path.write_text("")
    plan = Plan(str(path), kind.name, rotations, kind.per_file, rate)
    began = time.monotonic()
    writer = subprocess.Popen([sys.executable, __file__, "--writer", json.dumps(asdict(plan))])
    try:
        numbers = follow(plan, kind.poll, writer)
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.wait()
    if writer.returncode:
        raise SystemExit(f"the writer failed ({writer.returncode})")
    total = rotations * kind.per_file + kind.per_file
    distinct = set(numbers)
    out_of_order = sum(1 for a, b in zip(numbers, numbers[1:], strict=False) if b < a)
    return {"kind": kind.label, "written": total, "read": len(numbers),
            "lost": total - len(distinct & set(range(total))),
            "duplicated": len(numbers) - len(distinct), "out_of_order": out_of_order,
            "between_looks": kind.poll * rate / kind.per_file, "poll": kind.poll,
            "seconds": time.monotonic() - began}


# -- throughput of one log --------------------------------------------------------------

class Stop(Exception):
    """Ends the sensor's run once the file is read to its end."""


def make_log(path: Path, size: int) -> int:
    """A log of about `size` bytes of numbered lines; its line count."""
    lines, block = 0, 10_000
    with path.open("w", encoding="utf-8") as handle:
        while handle.tell() < size:
            handle.write("".join(f"2026-11-30T10:00:00.000Z line {n:09d} request served in "
                                 f"{n % 997} ms by worker {n % 7} {PAD[:30]}\n"
                                 for n in range(lines, lines + block)))
            lines += block
    return lines


def best_of(runs: int, measure) -> float:
    return min(measure() for _ in range(runs))


def throughput(folder: Path, size: int, sensor_size: int, runs: int) -> dict[str, float]:
    path = folder / "big.log"
    lines = make_log(path, size)
    mib = path.stat().st_size / (1024 * 1024)

    def baseline() -> float:
        began, count = time.perf_counter(), 0
        with path.open("rb") as handle:
            for _ in iter(handle.readline, b""):
                count += 1
        assert count == lines
        return time.perf_counter() - began

    def follower() -> float:
        began, count = time.perf_counter(), 0
        reader = LogFollower(path, from_start=True)
        while True:
            count += len(reader.read().lines)
            if not reader.more:
                break
        reader.close()
        assert count == lines, (count, lines)
        return time.perf_counter() - began

    small = folder / "sensor.log"  # the sensor is far slower: a smaller file of the same lines
    small_lines = make_log(small, sensor_size)
    small_mib = small.stat().st_size / (1024 * 1024)

    def sensor() -> float:
        count = 0

        def sink(event) -> None:
            nonlocal count
            count += 1

        async def at_end(seconds: float) -> None:
            raise Stop

        reader = LogFileSensor(small, channel="log.big", from_start=True, sleep=at_end)
        began = time.perf_counter()
        try:
            asyncio.run(reader.run(Emitter("log.big", wall_clock, sink)))
        except Stop:
            pass
        assert count == small_lines, (count, small_lines)
        return time.perf_counter() - began

    sensor_seconds = sensor()
    return {"mib": mib, "lines": lines, "baseline": mib / best_of(runs, baseline),
            "follower": mib / best_of(runs, follower), "sensor_mib": small_mib,
            "sensor": small_mib / sensor_seconds, "sensor_lines": small_lines / sensor_seconds}


# -- the run ----------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--writer", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer:
        write(Plan(**json.loads(args.writer)))
        return 0
    rotations, rate = (10, 10_000) if args.smoke else (1000, 10_000)
    size, sensor_size = (4 << 20, 512 << 10) if args.smoke else (128 << 20, 4 << 20)
    kinds = (Kind("rename", "rename+create", 500, 0.25),
             Kind("copytruncate", "copytruncate", 500, 0.25),
             Kind("delete", "delete+re-create", 1000, 0.02))
    print(f"log rotation: {rotations:,} rotations of each kind at {rate:,} lines/s, "
          f"from a separate writer process")
    with tempfile.TemporaryDirectory(prefix="noema-rotation-") as folder:
        for kind in kinds:
            r = run_kind(Path(folder), kind, rotations, rate)
            print(f"  {r['kind']:<17} written {r['written']:>8,}  read {r['read']:>8,}  "
                  f"lost {r['lost']:>6,}  duplicated {r['duplicated']:>6,}  "
                  f"out of order {r['out_of_order']:>4,}   (polled every {r['poll']} s: "
                  f"{r['between_looks']:.1f} rotations between two looks; {r['seconds']:.0f} s)")
        t = throughput(Path(folder), size, sensor_size, 1 if args.smoke else 3)
    print(f"one log of {t['mib']:.0f} MiB ({t['lines']:,} lines), read from its start:")
    print(f"  readline loop (baseline)  {t['baseline']:8.1f} MiB/s")
    print(f"  follower                  {t['follower']:8.1f} MiB/s   (target >= 50)")
    print(f"  sensor, {t['sensor_mib']:.0f} MiB (keys, events) {t['sensor']:6.1f} MiB/s   "
          f"({t['sensor_lines']:,.0f} lines/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
