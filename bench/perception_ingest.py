"""Ingest throughput: raw events through gate, counts, archive and treatments.

Prints events a second on one core for a mixed stream (logs, chat, file
changes, state updates), with the archive on disk (WAL, group commits: an
event is acknowledged when its group commits), the same stream with event
construction included, and the stream with groups ten times smaller (a
commit every 100 events, as a slower stream gets from the 50 ms commit
delay). Every drain records its deliveries in the archive, as the agent does.

    .venv/bin/python bench/perception_ingest.py [events] [--smoke]   (--smoke: 1,000 events, one try)
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
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


def run(events: list[Event] | None, spec: list[tuple], folder: Path, name: str,
        group: int = 1000) -> float:
    archive = SensoryArchive(folder / f"{name}.db", flush_every=group)
    pipeline = Pipeline(archive, SENSORS)
    started = time.perf_counter()
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
    elapsed = time.perf_counter() - started
    if archive.committed != len(spec) or next(archive.undelivered(), None) is not None:
        raise SystemExit("every event must be committed and delivered")
    archive.close()
    return elapsed


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
    with tempfile.TemporaryDirectory(prefix="noema-bench-") as scratch:
        folder = Path(scratch)
        prebuilt = min(run(events, spec, folder, f"prebuilt{i}") for i in range(tries))
        built = min(run(None, spec, folder, f"built{i}") for i in range(tries))
        small = min(run(events, spec, folder, f"small{i}", group=100) for i in range(tries))
        size = (folder / "prebuilt0.db").stat().st_size
    print(f"events: {count:,} (70 % log lines, 10 % chat, 10 % file changes, 10 % state)")
    print(f"gate + counts + archive + treatments: {count / prebuilt:,.0f} events/s "
          f"({prebuilt * 1e6 / count:.1f} µs/event, best of {tries})")
    print(f"including building each Event:        {count / built:,.0f} events/s "
          f"({built * 1e6 / count:.1f} µs/event, best of {tries})")
    print(f"committing every 100 events:          {count / small:,.0f} events/s "
          f"({small * 1e6 / count:.1f} µs/event, best of {tries})")
    print(f"archive on disk: {size / count:.0f} bytes/event")
    print("target: ≥ 20,000 events/s")


if __name__ == "__main__":
    main(sys.argv[1:])
