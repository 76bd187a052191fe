"""A flood on a fake clock: what the model reads against one turn per event.

Ten simulated minutes of 100 log lines a second, chat bursts from two
people, and the mail count changing every 15 s. The model ends a cycle
every 30 s and then receives whatever the treatments have ready; at minute
6 it silences the log for two minutes. Prints the tokens of the pool_event
results against naive one-turn-per-event injection, the accounting of every
raw event, and the memory growth over the run.

    .venv/bin/python bench/perception_flood.py [--smoke]   (--smoke: one simulated minute)
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from noema.memory.tokens import MESSAGE_OVERHEAD, estimate_tokens
from noema.perception.archive import SensoryArchive
from noema.perception.clock import ManualClock
from noema.perception.events import Event, Nature, SensorInfo, TreatmentParams
from noema.perception.packing import render_pool_event, tally
from noema.perception.pipeline import Pipeline
from noema.perception.sensors.logfile import normalise_line
from noema.perception.sensors.simulated import chat_burst, log_storm, merge, state_updates
from noema.perception.untrusted import SessionDelimiter

START = 1_774_825_200.0
MINUTES = 10
CYCLE = 30.0
SENSORS = (
    SensorInfo("log.app", "app log", Nature.AGGREGATABLE, treatment=TreatmentParams(window=120)),
    SensorInfo("chat", "chat", Nature.MERGEABLE, can_silence=False),
    SensorInfo("mail", "unread count", Nature.STATE),
)
LINES = {
    "connection error to {ip} after {ms} ms": 60,
    "GET /api/items/{n} 200 {ms}ms": 20,
    "worker {n} heartbeat missed": 8,
    "cache miss for session {uuid}": 6,
    "slow query on shard {n}: {ms} ms": 4,
    "OOM killer stopped process {n}": 2,
}


def script(minutes: int) -> list:
    storm = log_storm("log.app", rate=100, duration=minutes * 60, lines=LINES, seed=3,
                      key=normalise_line)
    chats = []
    for i, at in enumerate(range(20, minutes * 60, 90)):
        who = ("ana", "luis")[i % 2]
        messages = [f"message {j} of burst {i}: the deploy is {'slow' if j % 2 else 'stuck'}"
                    for j in range(4 + i % 9)]
        chats.append(chat_burst("chat", who, messages, start=float(at), spacing=1.5))
    mail = state_updates("mail", "unread", [
        (float(at), f"You have {3 + at // 15} unread mails.", {"unread": 3 + at // 15})
        for at in range(5, minutes * 60, 15)
    ], sender="imap:inbox")
    return merge(storm, *chats, mail)


def naive_tokens(event: Event) -> int:
    # one synthetic pool_event call and its result per raw event, text as is
    return estimate_tokens(f"[{event.channel}] {event.sender}: {event.text}") + 2 * MESSAGE_OVERHEAD


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one simulated minute")
    minutes = 1 if parser.parse_args(argv).smoke else MINUTES
    stimuli = script(minutes)
    with tempfile.TemporaryDirectory(prefix="noema-flood-") as scratch:
        tracemalloc.start()
        base, _ = tracemalloc.get_traced_memory()
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        archive = SensoryArchive(Path(scratch) / "archive.db")
        report = flood(stimuli, archive, minutes * 60)
        archive.close()
        elapsed = time.perf_counter() - started
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        disk = (Path(scratch) / "archive.db").stat().st_size

    raw, by_channel, shown, gapped, dropped, deliveries, tokens, marked, naive = report
    print(f"simulated {minutes} min: {raw:,} raw events "
          + ", ".join(f"{c} {n:,}" for c, n in by_channel.items()))
    print(f"deliveries (pool_event results): {deliveries}, one per {CYCLE:.0f} s cycle with "
          "something ready")
    print(f"tokens the model read: {tokens:,}  vs naive one turn per event: {naive:,}  "
          f"→ {100 * tokens / naive:.3f} % (target ≤ 1 %)")
    print(f"  counting every datamark as its own token: {marked:,} → "
          f"{100 * marked / naive:.3f} %")
    print(f"accounting: shown whole {shown:,} + in archive gaps {gapped:,} + dropped at the "
          f"closed gate {dropped:,} = {shown + gapped + dropped:,} of {raw:,} "
          f"({'all accounted for' if shown + gapped + dropped == raw else 'MISMATCH'})")
    print(f"memory: traced growth {(current - base) / 1e6:.1f} MB, traced peak "
          f"{peak / 1e6:.1f} MB, max RSS +{(rss_after - rss_before) / 1024:.1f} MB "
          f"(target ≤ 50 MB); archive on disk {disk / 1e6:.1f} MB")
    print(f"wall time: {elapsed:.1f} s (tracemalloc on)")


def flood(stimuli: list, archive: SensoryArchive, duration: float) -> tuple:
    """Feed the stimuli; the log is silenced for the fifth of the run after its 60 %."""
    clock = ManualClock(START)
    pipeline = Pipeline(archive, SENSORS)
    delimiter = SessionDelimiter.new()
    raw = shown = gapped = deliveries = tokens = marked = naive = 0
    by_channel: dict[str, int] = {}
    last_cycle = START
    silenced = False

    def deliver(force: bool = False) -> None:
        nonlocal shown, gapped, deliveries, tokens, marked
        items = pipeline.drain(clock(), force)
        if not items:
            return
        text = render_pool_event(items, delimiter, now=clock())
        deliveries += 1
        tokens += estimate_tokens(text) + 2 * MESSAGE_OVERHEAD
        marked += estimate_tokens(text.replace(delimiter.marker, f" {delimiter.marker} ")) \
            + 2 * MESSAGE_OVERHEAD
        s, g = tally(items)
        shown += s
        gapped += g

    for stimulus in stimuli:
        now = START + stimulus.at
        while last_cycle + CYCLE <= now:  # cycles that ended before this event arrived
            last_cycle += CYCLE
            clock.set(last_cycle)
            deliver()
        clock.set(now)
        if not silenced and stimulus.at >= 0.6 * duration:
            pipeline.stop(["log.app"], 0.2 * duration, now)  # the model wants quiet for a while
            silenced = True
        event = stimulus.event(START)
        raw += 1
        by_channel[event.channel] = by_channel.get(event.channel, 0) + 1
        naive += naive_tokens(event)
        pipeline.ingest(event, now)
    clock.advance(CYCLE)
    deliver(force=True)
    dropped = sum(pipeline.stats.counts(c, clock()).dropped for c in pipeline.catalogue)
    return raw, by_channel, shown, gapped, dropped, deliveries, tokens, marked, naive


if __name__ == "__main__":
    main(sys.argv[1:])
