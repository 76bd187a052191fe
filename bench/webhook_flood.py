"""The webhook's token holder during a slow-client flood.

    .venv/bin/python bench/webhook_flood.py [--slow N] [--posts N]

Runs the intake under the real hub on 127.0.0.1, opens N slowloris
connections from a thread of their own (each sends a request's head one byte
every half second), and meanwhile posts events with the person's token, one
connection each. It prints the token holder's latency (p50/p95/p99/max) with
and without the flood, how many of its posts were answered 202, how many slow
sockets the server had closed, and the server's waiting connections (at most
`max_waiting_connections`). Target: every post answered; flood p99 under
100 ms on a quiet machine (the connection a post opens pushes out the slow
one that waited longest, and the post is read at once).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from tests.perception.test_webhook import GENERIC, PERSON, bearer, running, url  # noqa: E402
from tests.security.attacks.test_webhook_attacks import SlowFlood  # noqa: E402


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def posts(intake, count: int) -> tuple[list[float], int]:
    times, accepted = [], 0
    for n in range(count):
        async with httpx.AsyncClient(timeout=30) as client:  # a new connection each time
            began = time.perf_counter()
            answer = await client.post(url(intake, "/events"), headers=bearer(PERSON),
                                       json={**GENERIC, "text": f"post {n}"})
            times.append(time.perf_counter() - began)
        accepted += answer.status_code == 202
        await asyncio.sleep(0.02)
    return times, accepted


def line(name: str, times: list[float], accepted: int, count: int) -> str:
    ms = [t * 1000 for t in times]
    return (f"{name:>14}: {accepted}/{count} accepted; p50 {statistics.median(ms):.1f} ms,"
            f" p95 {percentile(ms, 0.95):.1f} ms, p99 {percentile(ms, 0.99):.1f} ms,"
            f" max {max(ms):.1f} ms")


async def main(slow: int, count: int) -> None:
    async with running(lambda e: None, max_waiting_connections=32) as intake:
        quiet, quiet_ok = await posts(intake, count)
        with SlowFlood(intake.address, slow) as flood:
            while flood.opened < slow:
                await asyncio.sleep(0.05)
            waiting = intake.http.waiting
            flooded, flooded_ok = await posts(intake, count)
            closed = flood.closed_by_server
    print(line("quiet", quiet, quiet_ok, count))
    print(line(f"{slow} slow", flooded, flooded_ok, count))
    print(f"{'flood':>14}: {closed} of {slow} slow sockets closed by the server while the posts"
          f" ran; {waiting} waiting connections (bound 32)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--posts", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="20 slow clients and 20 posts")
    args = parser.parse_args()
    if args.smoke:
        args.slow, args.posts = 20, 20
    asyncio.run(main(args.slow, args.posts))
