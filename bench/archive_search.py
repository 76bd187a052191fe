"""Search latency of the sensory archive's full-text index at scale.

Builds an archive of synthetic raw events (log lines of several services,
chat, file changes, state updates, spread over 30 days, in batches sealed
as deliveries would seal them) through the real archive, then times
`SensoryArchive.search` for a mix of queries: rare, middling and very
common words, two words, a channel pattern, a day, and a common word in a
day. Prints p50/p95/max per kind and over all.

Building 10M events takes a while, so the archive is kept in a cache folder
outside the repository and grown run after run: each run adds events for at
most --build-minutes, then measures at the size reached (and says so).

    .venv/bin/python bench/archive_search.py [--events N] [--build-minutes M] [--smoke]
    (--smoke: 20,000 events in a temporary folder, a few seconds)
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from noema.perception.archive import SensoryArchive
from noema.perception.events import Event

CACHE = Path("/tmp/noema-bench-cache")
T0 = 1_774_825_200.0
SPAN_S = 30 * 86400  # the events arrive over 30 days
SEAL_EVERY = 2_000  # events between deliveries, which seal the open batches
RARE_EVERY = 5_000  # one event in this many holds a rare word
SERVICES = ("app", "db", "kernel", "proxy", "auth")
TEMPLATES = (
    "connection error to 10.0.{a}.{b} after {n} ms",
    "GET /api/items/{n} 200 {b}ms",
    "worker {a} heartbeat missed",
    "cache miss for key user:{n}",
    "job {n} finished in {b} ms",
    "retrying request {n} (attempt {a}) after timeout",
    "disk /dev/sd{d} usage at {b} percent",
    "slow query on table orders took {n} ms",
)
RARE = ("panic", "segfault", "quarantined", "overheating", "checksum")


def spec(i: int, total_hint: int, rng: random.Random) -> tuple[str, str, str, str, float]:
    """(channel, text, sender, bucket, received_at) of the i-th event."""
    at = T0 + (i % total_hint) * SPAN_S / total_hint
    roll = rng.random()
    if i % RARE_EVERY == 0:
        word = RARE[(i // RARE_EVERY) % len(RARE)]
        service = rng.choice(SERVICES)
        return (f"log.{service}", f"kernel {word} on host h{rng.randrange(40)} device sd"
                f"{'abc'[i % 3]}", f"/var/log/{service}.log", "pattern:rare", at)
    if roll < 0.8:
        service = rng.choice(SERVICES)
        template = rng.randrange(len(TEMPLATES))
        text = TEMPLATES[template].format(a=rng.randrange(8), b=rng.randrange(255),
                                          n=rng.randrange(100_000), d="abc"[rng.randrange(3)])
        return f"log.{service}", text, f"/var/log/{service}.log", f"pattern:{template}", at
    if roll < 0.87:
        who = f"user{rng.randrange(50)}"
        return "chat", f"message {rng.randrange(1000)} about the release", who, f"from:{who}", at
    if roll < 0.95:
        return ("files", f"modified: src/file{rng.randrange(500)}.py", "/srv/src",
                "from:/srv/src", at)
    n = rng.randrange(100)
    return "mail", f"You have {n} unread mails.", "imap", f"key:box{n % 20}", at


def grow(path: Path, target: int, minutes: float) -> int:
    """Append events to the archive at `path` until it holds `target` or the
    time is up; how many it holds."""
    with SensoryArchive(path, flush_every=10_000) as archive:
        held = sum(c.stored for c in archive.counts().values())
        rng = random.Random(held)
        deadline = time.monotonic() + minutes * 60
        started, before = time.monotonic(), held
        commits: list[float] = []
        while held < target and time.monotonic() < deadline:
            streams = set()
            for _ in range(min(SEAL_EVERY, target - held)):
                channel, text, sender, bucket, at = spec(held, max(target, 1), rng)
                archive.append(Event.create(channel, text, received_at=at, sender=sender),
                               bucket, at)
                streams.add((channel, bucket))
                held += 1
            for channel, bucket in streams:  # a delivery seals what it carried
                archive.seal_stream(channel, bucket, at)
            tick = time.perf_counter()
            archive.flush()  # a group commit of SEAL_EVERY events, index merges included
            commits.append((time.perf_counter() - tick) * 1000)
        rate = (held - before) / max(time.monotonic() - started, 1e-9)
    if held > before:
        print(f"built {held - before:,} events this run ({rate:,.0f} events/s with the index); "
              f"commits of {SEAL_EVERY:,} events: p50 {statistics.median(commits):.1f} ms, "
              f"p99 {p(commits, 0.99):.1f} ms, max {max(commits):.1f} ms")
    return held


def queries(rng: random.Random) -> list[tuple[str, dict]]:
    """(kind, search arguments) for one round of the mix."""
    day = T0 + rng.randrange(30) * 86400
    return [
        ("rare word", {"query": rng.choice(RARE)}),
        ("middling word", {"query": rng.choice(["orders", "heartbeat", "unread", "release"])}),
        ("common word", {"query": rng.choice(["error", "ms", "log"])}),
        ("two words", {"query": rng.choice(["disk usage", "connection error", "slow query"])}),
        ("rare word, channel", {"query": rng.choice(RARE), "channel": "log.k*"}),
        ("rare word, one day", {"query": rng.choice(RARE), "since": day, "until": day + 86400}),
        ("common word, one day", {"query": "error", "since": day, "until": day + 86400}),
        ("page 3 of a common word", {"query": "timeout", "offset": 40, "limit": 20}),
    ]


def measure(path: Path, rounds: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {}
    rng = random.Random(7)
    with SensoryArchive(path) as archive:
        archive.search("warm")  # the first search pays for opening the index pages
        for _ in range(rounds):
            for kind, args in queries(rng):
                started = time.perf_counter()
                archive.search(**args)
                timings.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
    return timings


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(held: int, timings: dict[str, list[float]], size: int) -> None:
    print(f"archive: {held:,} events, {size / 2**20:,.0f} MiB ({size / max(held, 1):.0f} bytes/event)")
    print(f"{'query':<26}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    everything = [t for ts in timings.values() for t in ts]
    for kind, ts in [*timings.items(), ("all", everything)]:
        print(f"{kind:<26}{statistics.median(ts):>9.1f}{p(ts, 0.95):>9.1f}{max(ts):>9.1f}")
    print("target: p95 ≤ 100 ms over 10M archived events")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--build-minutes", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--smoke", action="store_true", help="20,000 events, a few seconds")
    args = parser.parse_args(argv)
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="noema-bench-") as scratch:
            path = Path(scratch) / "archive.db"
            held = grow(path, 20_000, 5)
            report(held, measure(path, 5), path.stat().st_size)
        return
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / "archive-search.db"
    held = grow(path, args.events, args.build_minutes)
    if held < args.events:
        print(f"not yet {args.events:,} events: measured at {held:,}; run again to grow it")
    report(held, measure(path, args.rounds), path.stat().st_size)


if __name__ == "__main__":
    main(sys.argv[1:])
