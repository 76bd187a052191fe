"""Ingest throughput: raw events through gate, counts, archive and treatments.

Prints events a second on one core for a mixed stream (logs, chat, file
changes, state updates), with the archive on disk (WAL, group commits: an
event is acknowledged when its group commits), the same stream with event
construction included, and the stream with groups ten times smaller (a
commit every 100 events, as a slower stream gets from the 50 ms commit
delay). Every drain records its deliveries in the archive, as the agent does.

Each is measured twice in the same run: with the archive's upkeep (index
merging and WAL checkpoints in a background thread, as the agent runs it)
and, as the baseline, without it (FTS5 merging and SQLite checkpointing
inside the group commits, as before the upkeep). With upkeep, the time the
thread needs after the burst to finish merging is printed too: that work is
off the commit path, not gone. Besides events a second (wall clock), each
line gives them per second of the ingesting thread's own CPU time, which
the load of other processes on the machine disturbs less, and the p99 and
slowest group commit.

    .venv/bin/python bench/perception_ingest.py [events] [--smoke]   (--smoke: 1,000 events, one try)
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from noema.perception.archive import SensoryArchive
from noema.perception.events import Event, Nature, SensorInfo, TreatmentParams
from noema.perception.pipeline import Pipeline
from noema.perception.sensors.logfile import normalise_line

T0 = 1_774_825_200.0
SENSORS = (
    SensorInfo("log.app", "app log", Nature.AGGREGATABLE, treatment=TreatmentParams(window=60)),
    SensorInfo("chat", "chat", Nature.MERGEABLE),
    SensorInfo("files", "folder", Nature.DISCRETE),
    SensorInfo("mail", "unread count", Nature.STATE),
)
TEMPLATES = ["connection error to 10.0.{a}.{b} after {n} ms", "GET /api/items/{n} 200 {b}ms",
             "worker {a} heartbeat missed", "cache miss for key user:{n}",
             "job {n} finished in {b} ms", "retrying request {n} (attempt {a})"]


def specs(count: int, seed: int = 1) -> list[tuple]:
    """(channel, text, sender, key, authorised) for a mixed stream."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.7:
            text = rng.choice(TEMPLATES).format(a=rng.randrange(8), b=rng.randrange(255),
                                                n=rng.randrange(10_000))
            out.append(("log.app", text, "/var/log/app.log", normalise_line(text), False))
        elif roll < 0.8:
            out.append(("chat", f"message {rng.randrange(1000)}", f"user{rng.randrange(50)}",
                        "", True))
        elif roll < 0.9:
            out.append(("files", f"modified: src/file{rng.randrange(500)}.py", "/srv/src",
                        "modified", False))
        else:
            n = rng.randrange(100)
            out.append(("mail", f"You have {n} unread mails.", "imap", f"box{n % 20}", True))
    return out


def build(spec: list[tuple]) -> list[Event]:
    return [Event.create(c, t, received_at=T0 + i * 0.001, sender=s, key=k, authorised=a)
            for i, (c, t, s, k, a) in enumerate(spec)]


@dataclass(frozen=True, order=True)
class Run:
    """One run's figures, in seconds."""

    wall: float  # to ingest and commit everything
    cpu: float  # of which the ingesting thread's own CPU time
    commit_p99: float
    commit_max: float
    settling: float  # after the burst, until the upkeep had merged the index


def timed_commits(archive: SensoryArchive) -> list[float]:
    """Record how long each group commit of `archive` takes."""
    durations: list[float] = []
    flush = archive.flush

    def timed() -> None:
        began = time.perf_counter()
        flush()
        durations.append(time.perf_counter() - began)

    archive.flush = timed  # type: ignore[method-assign]
    return durations


def run(events: list[Event] | None, spec: list[tuple], folder: Path, name: str,
        group: int = 1000, *, upkeep: bool) -> Run:
    archive = SensoryArchive(folder / f"{name}.db", flush_every=group, upkeep=upkeep)
    commits = timed_commits(archive)
    pipeline = Pipeline(archive, SENSORS)
    started, cpu_started = time.perf_counter(), time.thread_time()
    if events is None:
        for i, (c, t, s, k, a) in enumerate(spec):
            now = T0 + i * 0.001
            pipeline.ingest(Event.create(c, t, received_at=now, sender=s, key=k,
                                         authorised=a), now)
            if i % 10_000 == 9_999:
                pipeline.drain(now)
    else:
        for i, e in enumerate(events):
            now = e.received_at
            pipeline.ingest(e, now)
            if i % 10_000 == 9_999:
                pipeline.drain(now)
    pipeline.drain(T0 + len(spec), force=True)
    archive.flush()
    elapsed, cpu = time.perf_counter() - started, time.thread_time() - cpu_started
    settling = 0.0
    if archive.upkeep is not None:
        if not archive.upkeep.settled.wait(600):
            raise SystemExit("the upkeep did not finish merging")
        settling = time.perf_counter() - started - elapsed
    if archive.committed != len(spec) or next(archive.undelivered(), None) is not None:
        raise SystemExit("every event must be committed and delivered")
    archive.close()
    commits.sort()
    return Run(elapsed, cpu, commits[int(len(commits) * 0.99)], commits[-1], settling)


SMOKE_EVENTS = 1_000


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("events", nargs="?", type=int, default=100_000)
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_EVENTS:,} events, one try")
    args = parser.parse_args(argv)
    count = SMOKE_EVENTS if args.smoke else args.events
    tries = 1 if args.smoke else 3
    spec = specs(count)
    events = build(spec)
    cases = [("gate + counts + archive + treatments", events, 1000),
             ("including building each Event", None, 1000),
             ("committing every 100 events", events, 100)]
    best: dict[tuple[str, bool], Run] = {}
    with tempfile.TemporaryDirectory(prefix="noema-bench-") as scratch:
        folder = Path(scratch)
        for attempt in range(tries):  # baseline and upkeep in turn, so both see the same load
            for index, (label, given, group) in enumerate(cases):
                for upkeep in (False, True):
                    name = f"c{index}-{'upkeep' if upkeep else 'base'}-{attempt}"
                    result = run(given, spec, folder, name, group, upkeep=upkeep)
                    best[label, upkeep] = min(best.get((label, upkeep), result), result)
        size = (folder / "c0-upkeep-0.db").stat().st_size
    print(f"events: {count:,} (70 % log lines, 10 % chat, 10 % file changes, 10 % state)")
    print(f"best of {tries}; baseline: index merged and WAL checkpointed inside the commits")
    for label, _, _ in cases:
        print(f"{label}:")
        for upkeep, title in ((False, "baseline"), (True, "upkeep")):
            r = best[label, upkeep]
            merged = f"; merged {r.settling:.2f} s after the burst" if upkeep else ""
            print(f"  {title:<9} {count / r.wall:>7,.0f} events/s ({r.wall * 1e6 / count:5.1f}"
                  f" µs/event), {count / r.cpu:>7,.0f} per CPU second of the ingesting thread;"
                  f" commit p99 {r.commit_p99 * 1e3:6.1f} ms, max {r.commit_max * 1e3:6.1f} ms"
                  f"{merged}")
    print(f"archive on disk: {size / count:.0f} bytes/event")
    print("target: ≥ 20,000 events/s")


if __name__ == "__main__":
    main(sys.argv[1:])
