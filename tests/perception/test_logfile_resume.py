"""The log-file sensor resumes where it stood: after a crash, a restart, a rotation."""

from __future__ import annotations

import os
import random

import pytest

from noema.perception.archive import SensoryArchive
from noema.perception.clock import ManualClock
from noema.perception.hub import Emitter
from noema.perception.pipeline import Pipeline
from noema.perception.sensors import (
    LogFileSensor,
    LogFollower,
    LogPosition,
    build_sensors,
)
from noema.perception.sensors.logfile import NOTE_KEY
from noema.perception.settings import PerceptionSettings

from .conftest import T0


def append(path, *lines: str) -> None:
    with path.open("a") as f:
        f.write("".join(line + "\n" for line in lines))


def stopped_at(path, *lines: str) -> LogPosition:
    """Follow `path`, read what is there, and return the place it stopped at."""
    follower = LogFollower(path, from_start=True)
    assert follower.poll() == list(lines)
    position = follower.position()
    follower.close()
    assert position is not None
    return position


def test_it_continues_in_the_same_file_from_its_place(tmp_path):
    log = tmp_path / "app.log"
    append(log, "one", "two")
    here = stopped_at(log, "one", "two")
    append(log, "three")
    with log.open("a") as f:
        f.write("four, half")
    follower = LogFollower(log, resume=here)
    assert follower.poll() == ["three"] and follower.notes == []
    follower.close()
    # The half line was not read: the place is before it, so it is read whole later.
    again = LogFollower(log, resume=LogPosition.from_dict(here.as_dict()))
    with log.open("a") as f:
        f.write(" done\n")
    assert again.poll() == ["three", "four, half done"]
    again.close()


def test_a_rotation_while_stopped_reads_the_old_file_then_the_new(tmp_path):
    log = tmp_path / "app.log"
    append(log, "before")
    here = stopped_at(log, "before")
    append(log, "written to the old file while stopped")
    os.rename(log, tmp_path / "app.log.1")
    append(log, "in the new file")
    follower = LogFollower(log, resume=here)
    assert follower.poll() == ["written to the old file while stopped", "in the new file"]
    assert follower.notes == []
    append(log, "later")
    assert follower.poll() == ["later"]
    follower.close()


def test_a_lost_old_file_is_said_and_the_new_one_read_from_its_start(tmp_path):
    log = tmp_path / "app.log"
    append(log, "before")
    here = stopped_at(log, "before")
    os.rename(log, tmp_path / "app.log.1.gz")
    (tmp_path / "app.log.1.gz").write_bytes(b"compressed elsewhere")  # a new inode
    os.remove(tmp_path / "app.log.1.gz")
    append(log, "fresh")
    follower = LogFollower(log, resume=here)
    assert follower.poll() == ["fresh"]
    [note] = follower.notes
    assert "may be missing" in note
    follower.close()


def test_a_file_rewritten_in_place_is_not_mistaken_for_the_old_one(tmp_path):
    log = tmp_path / "app.log"
    append(log, "original first line", "second")
    here = stopped_at(log, "original first line", "second")
    with log.open("r+") as f:  # same inode, other content, longer than the old place
        f.write("REWRITTEN first line\nsecond\nthird\n")
    follower = LogFollower(log, resume=here)
    assert follower.poll() == ["REWRITTEN first line", "second", "third"]
    assert follower.notes
    follower.close()


def test_a_huge_backlog_is_skipped_to_the_bound_from_a_line_start(tmp_path):
    log = tmp_path / "app.log"
    append(log, "start")
    here = stopped_at(log, "start")
    append(log, *(f"backlog line {i:04d}" for i in range(1000)))  # 18 bytes each + newline
    follower = LogFollower(log, resume=here, max_backlog=100)
    lines = follower.poll()
    assert lines == [f"backlog line {i:04d}" for i in range(995, 1000)]
    [note] = follower.notes
    assert "were skipped" in note and "still in the file" in note
    follower.close()
    nothing = LogFollower(log, resume=here, max_backlog=0)
    assert nothing.poll() == [] and nothing.notes
    nothing.close()


def test_a_bookmark_of_another_path_or_malformed_is_ignored(tmp_path):
    log = tmp_path / "app.log"
    append(log, "x")
    other = stopped_at(log, "x")
    moved = tmp_path / "other.log"
    append(moved, "already here")
    follower = LogFollower(moved, resume=other)
    assert follower.poll() == [] and follower.notes == []  # a new follower: from the end
    follower.close()
    assert LogPosition.from_dict({"path": "x"}) is None
    assert LogPosition.from_dict({**other.as_dict(), "offset": -1}) is None
    assert LogPosition.from_dict(None) is None


# -- the sensor with the archive's bookmark -----------------------------------------------


class Stop(Exception):
    """Ends a sensor's run inside a test."""


async def run_once(sensor: LogFileSensor, pipeline: Pipeline, clock: ManualClock,
                   then=None) -> None:
    """One poll of the sensor into the pipeline (then `then()`), then stop it."""
    polls = 0

    async def sleep(seconds: float) -> None:
        nonlocal polls
        polls += 1
        if then is not None:
            then()
        raise Stop

    sensor._sleep = sleep
    with pytest.raises(Stop):
        await sensor.run(Emitter(sensor.info.channel, clock,
                                 lambda e: pipeline.ingest(e, clock())))
    assert polls == 1


def sensor_for(log, archive: SensoryArchive, **options) -> LogFileSensor:
    return LogFileSensor(log, channel="log.app", bookmark=archive.bookmark("sensor:log.app"),
                         **options)


def archived_lines(path) -> list[str]:
    archive = SensoryArchive(path)
    texts = [e.text for e in archive.undelivered()]
    archive.close()
    return texts


async def test_a_restarted_sensor_reads_what_was_written_while_it_was_down(tmp_path):
    log, db = tmp_path / "app.log", tmp_path / "archive.db"
    clock = ManualClock(T0)
    append(log, "old history")
    archive = SensoryArchive(db)
    sensor = sensor_for(log, archive, from_start=True)
    await run_once(sensor, Pipeline(archive, [sensor.info]), clock)
    archive.close()  # the agent stops
    append(log, "written while stopped")
    os.rename(log, tmp_path / "app.log.1")  # rotated while stopped
    append(log, "after the rotation")
    archive = SensoryArchive(db)
    sensor = sensor_for(log, archive, from_start=True)  # from_start only counts the first time
    await run_once(sensor, Pipeline(archive, [sensor.info]), clock)
    archive.close()
    assert archived_lines(db) == ["old history", "written while stopped", "after the rotation"]


@pytest.mark.parametrize("seed", range(4))
async def test_a_kill_loses_no_line_and_repeats_none(tmp_path, seed):
    """Killed at random points (the archive's connection dropped with whatever
    was staged), restarted each time: every line is archived exactly once."""
    rng = random.Random(seed)
    log, db = tmp_path / "app.log", tmp_path / "archive.db"
    log.write_text("")
    clock = ManualClock(T0)
    written = 0
    placed = False  # a place is committed: a rotation can be followed across a restart
    for life in range(6):
        archive = SensoryArchive(db, flush_every=rng.choice([1, 3, 7, 1000]))
        sensor = sensor_for(log, archive, from_start=True)
        pipeline = Pipeline(archive, [sensor.info])
        lines = [f"line {written + i}" for i in range(rng.randrange(0, 12))]
        append(log, *lines)
        written += len(lines)
        if placed and rng.random() < 0.4:
            os.rename(log, tmp_path / f"app.log.{life}")
            append(log, f"line {written}")
            written += 1
        flush = archive.flush if rng.random() < 0.5 else None
        await run_once(sensor, pipeline, clock, then=flush)
        placed = placed or flush is not None or archive.committed > 0
        archive.conn.close()  # kill -9: what was only staged is lost
    archive = SensoryArchive(db, flush_every=1)
    sensor = sensor_for(log, archive, from_start=True)
    await run_once(sensor, Pipeline(archive, [sensor.info]), clock, then=archive.flush)
    texts = [r[0] for r in archive.conn.execute("SELECT text FROM events ORDER BY batch, seq")]
    archive.close()
    assert texts == [f"line {i}" for i in range(written)]


async def test_the_backlog_note_reaches_the_model_as_an_event(tmp_path):
    log, db = tmp_path / "app.log", tmp_path / "archive.db"
    append(log, "first")
    clock = ManualClock(T0)
    archive = SensoryArchive(db)
    sensor = sensor_for(log, archive, from_start=True)
    await run_once(sensor, Pipeline(archive, [sensor.info]), clock)
    archive.close()
    append(log, *(f"while down {i}" for i in range(50)))
    archive = SensoryArchive(db)
    sensor = sensor_for(log, archive, max_backlog=40)
    pipeline = Pipeline(archive, [sensor.info])
    await run_once(sensor, pipeline, clock)
    [note] = [e for e in archive.undelivered() if e.key == NOTE_KEY]
    assert "were skipped" in note.text
    assert [e.text for e in archive.undelivered() if e.key != NOTE_KEY] == [
        "first", "while down 48", "while down 49"]
    archive.close()


def test_the_settings_bound_the_backlog_and_wire_the_bookmarks(tmp_path):
    settings = PerceptionSettings.model_validate({
        "clock": {"enabled": False},
        "logs": [{"path": str(tmp_path / "a.log"), "resume_max_bytes": 1000}],
        "archive_commit_ms": 20,
    })
    archive = SensoryArchive(tmp_path / "archive.db")
    [sensor] = build_sensors(settings, last_exchange=lambda: None, bookmarks=archive.bookmark)
    assert isinstance(sensor, LogFileSensor) and sensor._max_backlog == 1000
    sensor._bookmark.save({"offset": 1})
    assert archive.bookmark("sensor:log.a.log").load() == {"offset": 1}
    assert settings.archive_commit_ms == 20
    with pytest.raises(ValueError):
        PerceptionSettings.model_validate({"archive_commit_ms": 0})
    archive.close()


async def test_a_crashed_sensor_resumes_inside_the_process(tmp_path):
    """Without a durable bookmark the hub's restart after a crash still resumes."""
    log = tmp_path / "app.log"
    append(log, "before")
    clock = ManualClock(T0)
    sensor = LogFileSensor(log, channel="log.app", from_start=True)
    seen: list[str] = []

    async def crash(seconds: float) -> None:
        raise RuntimeError("boom")

    sensor._sleep = crash
    for _ in range(2):
        with pytest.raises(RuntimeError):
            await sensor.run(Emitter("log.app", clock, lambda e: seen.append(e.text)))
        append(log, "during the backoff")
    assert seen == ["before", "during the backoff"]
