"""The built-in sensors: clock, log file, folder, simulated source."""

from __future__ import annotations

import asyncio
import os

import pytest
import watchfiles

from noema.perception.clock import ManualClock
from noema.perception.events import Nature, SensorInfo
from noema.perception.hub import Emitter
from noema.perception.sensors import (
    ClockSensor,
    FolderSensor,
    LogFileSensor,
    LogFollower,
    SilenceWatch,
    SimulatedSensor,
    describe_changes,
    normalise_line,
)
from noema.perception.sensors.logfile import MAX_LINE, SLICE_BYTES
from noema.perception.sensors.simulated import chat_burst, log_storm, merge, state_updates

from .conftest import T0

H = 3600.0


# -- clock ---------------------------------------------------------------------

def test_silence_notices_come_at_the_threshold_then_each_doubling():
    watch = SilenceWatch(3 * H)
    assert watch.check(T0 + 2 * H, T0) is None
    assert watch.check(T0 + 3 * H, T0) == 3 * H
    assert watch.check(T0 + 5 * H, T0) is None
    assert watch.due(T0) == T0 + 6 * H
    assert watch.check(T0 + 6 * H, T0) == 6 * H
    assert watch.check(T0 + 30 * H, T0) == 30 * H  # one notice after a long sleep
    assert watch.due(T0) == T0 + 48 * H
    assert watch.check(T0 + 31 * H, T0 + 30 * H) is None  # a new exchange starts over


async def test_the_clock_sensor_reports_long_silences_on_a_fake_clock():
    clock = ManualClock(T0)
    last = [T0]
    events = []
    sensor = ClockSensor(lambda: last[0], long_silence=3 * H, clock=clock, sleep=clock.sleep)
    assert sensor.info.nature is Nature.STATE

    def sink(event):
        events.append(event)
        if len(events) == 2:
            raise asyncio.CancelledError  # enough: stop the sensor

    with pytest.raises(asyncio.CancelledError):
        await sensor.run(Emitter("clock", clock, sink))
    assert [e.payload["silence_seconds"] for e in events] == [3 * H, 6 * H]
    assert "3 h have passed since the last exchange" in events[0].text
    assert events[0].text.startswith("It is Mon 2026-03-30 02:00:00 UTC")
    assert events[0].key == "silence" and events[0].authorised


async def test_an_exchange_postpones_the_clock_notice():
    clock = ManualClock(T0)
    last = [T0]
    events = []

    async def sleep(seconds):
        await clock.sleep(seconds)
        if last[0] == T0:
            last[0] = clock() - 1 * H  # while it slept, the person spoke



    def sink(event):
        events.append(event)
        raise asyncio.CancelledError

    sensor = ClockSensor(lambda: last[0], long_silence=2 * H, clock=clock, sleep=sleep)
    with pytest.raises(asyncio.CancelledError):
        await sensor.run(Emitter("clock", clock, sink))
    assert events[0].occurred_at == T0 + 3 * H  # two hours after the exchange at T0 + 1 h


# -- log file ------------------------------------------------------------------

@pytest.mark.parametrize("line, key", [
    ("connection error to 10.0.0.3 after 512 ms", "connection error to <ip> after <n> ms"),
    ("2026-03-29T23:00:01.123Z worker 7 took 0x1f3a ms",
     "<time> worker <n> took <hex> ms"),
    ("Mar 29 23:00:01 host sshd[4121]: Failed password for root from 192.168.1.9:22",
     "<time> host sshd[<n>]: Failed password for root from <ip>"),
    ("job 3f2a9c1e-77b0-4d5e-9a61-1c2b3d4e5f60 done, trace deadbeef42",
     "job <uuid> done, trace <hex>"),
    ("peer fe80::1:2ff:fe33:4455 lost", "peer <ip> lost"),
    ('10.1.1.1 - - [29/Mar/2026:23:00:01 +0000] "GET /a/17 HTTP/1.1" 200 512',
     '<ip> - - [<time>] "GET /a/<n> HTTP/<n>" <n> <n>'),
])
def test_lines_are_normalised_into_patterns(line, key):
    assert normalise_line(line) == key


def test_lines_that_differ_only_in_values_share_a_key():
    assert normalise_line("connection error to 10.0.0.3 after 512 ms") == normalise_line(
        "connection error to 10.0.0.9 after 77 ms")
    assert normalise_line("disk full on /dev/sda1") != normalise_line("disk ok on /dev/sda1")


def test_the_follower_reads_new_lines_only_and_waits_for_line_ends(tmp_path):
    log = tmp_path / "app.log"
    log.write_text("old line\n")
    follower = LogFollower(log)
    assert follower.poll() == []
    with log.open("a") as f:
        f.write("first\nsecond, half")
    assert follower.poll() == ["first"]
    with log.open("a") as f:
        f.write(" done\n\n")
    assert follower.poll() == ["second, half done"]
    follower.close()


def test_the_follower_survives_rotation(tmp_path):
    log = tmp_path / "app.log"
    log.write_text("")
    follower = LogFollower(log)
    with log.open("a") as f:
        f.write("before rotation\n")
    os.rename(log, tmp_path / "app.log.1")
    with (tmp_path / "app.log.1").open("a") as f:
        f.write("late write to the old file\nunfinished")
    assert follower.poll() == ["before rotation", "late write to the old file"]
    log.write_text("in the new file\n")
    assert follower.poll() == ["unfinished", "in the new file"]
    follower.close()


def test_the_follower_survives_truncation_and_late_creation(tmp_path):
    log = tmp_path / "later.log"
    follower = LogFollower(log)
    assert follower.poll() == []  # not there yet
    log.write_text("created\n")
    assert follower.poll() == ["created"]  # a file that appears is read from its start
    log.write_text("")
    assert follower.poll() == []
    log.write_text("after truncation\n")
    assert follower.poll() == ["after truncation"]
    follower.close()


def test_from_start_reads_what_is_already_there(tmp_path):
    log = tmp_path / "app.log"
    log.write_text("one\ntwo\n")
    follower = LogFollower(log, from_start=True)
    assert follower.poll() == ["one", "two"]
    follower.close()


async def test_the_log_sensor_emits_aggregatable_lines(tmp_path):
    log = tmp_path / "app.log"
    log.write_text("")
    clock = ManualClock(T0)
    events = []

    async def sleep(seconds):
        if len(events) >= 2:
            raise asyncio.CancelledError
        with log.open("a") as f:
            f.write(f"timeout after {len(events) + 10} ms\n")

    sensor = LogFileSensor(log, channel="log.app", window=120, sleep=sleep)
    assert sensor.info.nature is Nature.AGGREGATABLE and sensor.info.treatment.window == 120
    with pytest.raises(asyncio.CancelledError):
        await sensor.run(Emitter("log.app", clock, events.append))
    assert [e.text for e in events] == ["timeout after 10 ms", "timeout after 11 ms"]
    assert {e.key for e in events} == {"timeout after <n> ms"}
    assert events[0].sender == str(log) and not events[0].authorised


# -- folder --------------------------------------------------------------------

def test_changes_are_described_in_a_stable_order(tmp_path):
    changes = {(watchfiles.Change.deleted, str(tmp_path / "b.txt")),
               (watchfiles.Change.added, str(tmp_path / "sub" / "a.txt"))}
    assert describe_changes(changes, tmp_path) == [
        ("deleted", "deleted: b.txt", {"path": str(tmp_path / "b.txt"), "change": "deleted"}),
        ("added", "added: sub/a.txt",
         {"path": str(tmp_path / "sub" / "a.txt"), "change": "added"}),
    ]


async def test_the_folder_sensor_reports_a_new_file(tmp_path):
    clock = ManualClock(T0)
    seen = asyncio.Event()
    events = []

    def sink(event):
        events.append(event)
        if any(e.key == "added" and e.text.startswith("added: hello") for e in events):
            seen.set()

    sensor = FolderSensor(tmp_path, channel="folder.inbox", debounce_ms=50,
                          watch_options={"step": 20})
    assert sensor.info.nature is Nature.DISCRETE
    task = asyncio.create_task(sensor.run(Emitter("folder.inbox", clock, sink)))
    try:
        for attempt in range(100):  # the watcher needs a moment to start; write until seen
            (tmp_path / f"hello{attempt}.txt").write_text("hi")
            try:
                await asyncio.wait_for(seen.wait(), timeout=0.2)
                break
            except TimeoutError:
                continue
        assert seen.is_set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    added = next(e for e in events if e.key == "added")
    assert added.payload["path"].endswith(".txt") and added.sender == str(tmp_path)


async def test_a_missing_folder_is_a_crash_for_the_hub(tmp_path):
    sensor = FolderSensor(tmp_path / "nope", channel="folder.nope")
    with pytest.raises(FileNotFoundError):
        await sensor.run(Emitter("folder.nope", ManualClock(T0), lambda e: None))


# -- simulated -----------------------------------------------------------------

def test_script_builders():
    storm = log_storm("logs", rate=10, duration=2, lines={"error {n}": 1}, seed=1,
                      key=normalise_line)
    assert len(storm) == 20 and storm[1].at == pytest.approx(0.1)
    assert {s.key for s in storm} == {"error <n>"}
    chat = chat_burst("chat", "ana", ["a", "b"], start=0.05, spacing=1)
    mail = state_updates("mail", "unread", [(0.07, "3 unread", {"n": 3})])
    merged = merge(storm, chat, mail)
    assert [s.at for s in merged] == sorted(s.at for s in merged)
    assert merged[1].channel == "chat" and merged[2].payload["n"] == 3


async def test_the_simulated_sensor_replays_on_the_clock_it_is_given():
    clock = ManualClock(T0)
    info = SensorInfo("chat", "chat", Nature.MERGEABLE)
    script = chat_burst("chat", "ana", ["hola", "¿estás?"], start=10, spacing=5)
    events = []
    await SimulatedSensor(info, script, clock=clock, sleep=clock.sleep).run(
        Emitter("chat", clock, events.append))
    assert [(e.text, e.received_at, e.sender) for e in events] == [
        ("hola", T0 + 10, "ana"), ("¿estás?", T0 + 15, "ana")]
    with pytest.raises(ValueError):
        SimulatedSensor(SensorInfo("mail", "m", Nature.STATE), script)


@pytest.mark.parametrize("slice_bytes", [MAX_LINE + 1, MAX_LINE + 777, SLICE_BYTES])
def test_the_follower_reads_every_line_however_the_slices_fall(tmp_path, slice_bytes):
    """Blank lines, CRLF, UTF-8, long lines: the same lines whatever the slice
    size, each with the offset just after it (a line past MAX_LINE is cut to it)."""
    log = tmp_path / "app.log"
    kinds = ["plain line {}", "", "   ", "crlf line {}\r", "línea {} ñ", "\tindented {}",
             "y" * (MAX_LINE - 100)]
    if slice_bytes == SLICE_BYTES:  # with smaller slices its end would be a line of its own
        kinds.append("x" * (MAX_LINE + 10))
    raw = [kinds[i % len(kinds)].format(i) for i in range(3000)]
    log.write_bytes("".join(line + "\n" for line in raw).encode())
    follower = LogFollower(log, from_start=True, slice_bytes=slice_bytes)
    texts, ends = [], []
    for _ in range(10_000):
        piece = follower.read()
        texts += piece.lines
        ends += [piece.position(i).offset for i in range(len(piece.lines))]
        if not follower.more:
            break
    follower.close()
    offsets, at = [], 0
    for line in raw:
        at += len(line.encode()) + 1
        offsets.append(at)
    kept = [(line.rstrip("\r")[:MAX_LINE], end) for line, end in zip(raw, offsets, strict=True)
            if line.strip()]
    assert list(zip(texts, ends, strict=True)) == kept
    with pytest.raises(ValueError):
        LogFollower(log, slice_bytes=MAX_LINE)
