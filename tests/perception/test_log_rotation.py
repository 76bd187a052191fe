"""The log sensor loses no line and repeats none when another process rotates
its file: rename and create, copytruncate, delete and re-create, several
rotations between two polls, half-written lines, bursts, restarts."""

from __future__ import annotations

import asyncio
import json
import selectors
import subprocess
import sys
from collections.abc import Callable

import pytest

from noema.perception.archive import SensoryArchive
from noema.perception.clock import ManualClock
from noema.perception.hub import Emitter
from noema.perception.pipeline import Pipeline
from noema.perception.sensors import LogFileSensor
from noema.perception.sensors.logfile import NOTE_KEY, SLICE_BYTES, YIELD_EVERY

from .conftest import T0

# The writer: a separate process holding its log open for appending, as a
# service does, and rotating it as logrotate would. One JSON command a line
# on stdin, "ok" once it is done.
WRITER = r"""
import json, os, shutil, sys

path = sys.argv[1]
log = open(path, "a")

def shift():  # app.log.2 -> app.log.3, then app.log.1 -> app.log.2
    n = 1
    while os.path.exists(f"{path}.{n}"):
        n += 1
    for n in range(n - 1, 0, -1):
        os.replace(f"{path}.{n}", f"{path}.{n + 1}")

for command in sys.stdin:
    what, *args = json.loads(command)
    if what == "write":
        start, count, width = args
        log.write("".join(f"line {n:06d} ".ljust(width, "x") + "\n"
                          for n in range(start, start + count)))
    elif what == "partial":
        log.write(args[0])
    elif what == "rename":
        log.close()
        shift()
        os.rename(path, path + ".1")
        log = open(path, "a")
    elif what == "copytruncate":
        log.flush()
        shift()
        shutil.copyfile(path, path + ".1")
        os.truncate(path, 0)
    elif what == "delete":
        log.close()
        os.remove(path)
        log = open(path, "a")
    log.flush()
    print("ok", flush=True)
"""


class Writer:
    """The writing process, told what to do step by step."""

    def __init__(self, path) -> None:
        self.path = path
        path.write_text("")
        self._proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._answers = selectors.DefaultSelector()
        self._answers.register(self._proc.stdout, selectors.EVENT_READ)
        self.lines: list[str] = []  # every complete line written, in order

    def do(self, *commands: list) -> None:
        for command in commands:
            self._proc.stdin.write(json.dumps(command) + "\n")
            self._proc.stdin.flush()
            assert self._answers.select(timeout=20), "the writer did not answer"
            assert self._proc.stdout.readline() == "ok\n", "the writer failed"

    def write(self, count: int, width: int = 40) -> list:
        """A command writing the next `count` numbered lines."""
        start = len(self.lines)
        self.lines += [f"line {n:06d} ".ljust(width, "x") for n in range(start, start + count)]
        return ["write", start, count, width]

    def close(self) -> None:
        self._proc.stdin.close()
        self._proc.wait(timeout=20)
        self._answers.close()


@pytest.fixture
def writer(tmp_path):
    w = Writer(tmp_path / "app.log")
    yield w
    w.close()


class Stop(Exception):
    """Ends the sensor's run once every step is done."""


async def follow(writer: Writer, steps: list[Callable[[], None]],
                 sink: Callable | None = None, **options) -> tuple[list[str], list[int]]:
    """Run the real sensor on the writer's log; each time it sleeps (it has
    read the file to its end: a poll) the next step runs; after the last it
    is stopped. The lines it emitted, and how many it had emitted at each sleep."""
    texts: list[str] = []
    at_sleeps: list[int] = []
    todo = iter(steps)

    async def sleep(seconds: float) -> None:
        at_sleeps.append(len(texts))
        step = next(todo, None)
        if step is None:
            raise Stop
        step()

    def emitted(event) -> None:
        texts.append(event.text)
        if sink is not None:
            sink(event)

    sensor = LogFileSensor(writer.path, channel="log.app", from_start=True, sleep=sleep,
                           **options)
    with pytest.raises(Stop):
        await asyncio.wait_for(sensor.run(Emitter("log.app", ManualClock(T0), emitted)), 60)
    return texts, at_sleeps


# -- each kind of rotation ---------------------------------------------------------------

@pytest.mark.parametrize("kind", ["rename", "copytruncate", "delete"])
async def test_one_rotation_between_polls_loses_nothing(writer, kind):
    steps = [lambda: writer.do(writer.write(30), [kind], writer.write(30)) for _ in range(4)]
    writer.do(writer.write(10))
    texts, _ = await follow(writer, steps)
    assert texts == writer.lines


@pytest.mark.parametrize("kind", ["rename", "copytruncate"])
async def test_two_rotations_between_polls_read_the_file_in_between(writer, kind):
    """The middle file is created and rotated away between two polls: it is
    found among the numbered rotations and read whole, in its place."""
    steps = [lambda: writer.do(writer.write(20), [kind], writer.write(20), [kind],
                               writer.write(20)) for _ in range(3)]
    texts, _ = await follow(writer, steps)
    assert texts == writer.lines
    assert (writer.path.parent / "app.log.6").exists()  # six rotations, all kept


async def test_many_rotations_between_polls_are_read_in_order(writer):
    def storm() -> None:
        for _ in range(8):
            writer.do(writer.write(15), ["rename"])
        writer.do(writer.write(5))

    texts, _ = await follow(writer, [storm, storm])
    assert texts == writer.lines


async def test_copytruncate_regrowing_past_the_old_place_is_noticed(writer):
    """The file is cut and written again beyond where the sensor stood before
    it looks: only its first bytes tell; the copy gives the lines in between."""
    writer.do(writer.write(20))
    steps = [lambda: writer.do(writer.write(5), ["copytruncate"], writer.write(80, width=90))]
    texts, _ = await follow(writer, steps)
    assert texts == writer.lines
    assert writer.path.stat().st_size > 25 * 41  # the new text is longer than the old place


async def test_delete_and_recreate_reads_the_deleted_file_to_its_end(writer):
    writer.do(writer.write(10))
    steps = [lambda: writer.do(writer.write(10), ["delete"], writer.write(10)),
             lambda: writer.do(["delete"], writer.write(10)),
             lambda: writer.do(writer.write(3))]
    texts, _ = await follow(writer, steps)
    assert texts == writer.lines
    assert not list(writer.path.parent.glob("app.log.*"))  # nothing left to find by name


async def test_a_file_deleted_between_two_polls_is_the_only_loss(writer):
    """Created and deleted between two looks, a file is gone for any poller:
    its lines are missing, and every other line arrives once, in order."""
    writer.do(writer.write(5))
    gone: list[str] = []

    def two_deletes() -> None:
        writer.do(writer.write(5), ["delete"])
        before = len(writer.lines)
        writer.do(writer.write(5), ["delete"], writer.write(5))
        gone.extend(writer.lines[before:before + 5])

    texts, _ = await follow(writer, [two_deletes])
    assert texts == [line for line in writer.lines if line not in gone] and len(gone) == 5


async def test_a_half_written_line_is_emitted_whole(writer):
    writer.do(writer.write(3), ["partial", "line half, begun"])
    steps = [lambda: writer.do(["partial", " and "]),
             lambda: writer.do(["partial", "finished\n"]),
             lambda: writer.do(writer.write(2), ["partial", "cut by a rotation"], ["rename"],
                               writer.write(2))]
    texts, at_sleeps = await follow(writer, steps)
    lines = writer.lines
    assert texts == [*lines[:3], "line half, begun and finished", *lines[3:5],
                     "cut by a rotation", *lines[5:]]
    assert at_sleeps[:3] == [3, 3, 4]  # nothing of it before its newline


async def test_a_burst_bigger_than_a_slice_is_read_without_sleeping(writer):
    """Several slices' worth at once: all of it is read before the sensor
    sleeps again, and other tasks run in between."""
    ticks = 0

    async def other_sensor() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    burst = writer.write(3 * SLICE_BYTES // 400 + 1, width=399)
    ticks_at_burst: list[int] = []
    steps = [lambda: (writer.do(burst), ticks_at_burst.append(ticks))]
    other = asyncio.create_task(other_sensor())
    try:
        texts, at_sleeps = await follow(writer, steps)
    finally:
        other.cancel()
    assert texts == writer.lines
    assert at_sleeps == [0, len(writer.lines)]  # one sleep before the burst, the next after it
    assert ticks - ticks_at_burst[0] >= len(writer.lines) // YIELD_EVERY


# -- a restart across a rotation ---------------------------------------------------------

async def run_life(writer: Writer, db, steps: list[Callable[[], None]], *, killed: bool) -> None:
    """One life of the agent: the sensor with the archive's bookmark, what it
    read committed at each poll; `killed`, it ends with what it read since
    the last commit lost (as after a kill -9)."""
    archive = SensoryArchive(db)
    pipeline = Pipeline(archive, [LogFileSensor(writer.path, channel="log.app").info])
    clock = ManualClock(T0)

    def commit_then(step: Callable[[], None]) -> Callable[[], None]:
        return lambda: (archive.flush(), step())

    try:
        await follow(writer, [commit_then(step) for step in steps],
                     sink=lambda e: pipeline.ingest(e, clock()),
                     bookmark=archive.bookmark("sensor:log.app"))
        if not killed:
            archive.flush()
    finally:
        archive.conn.close()


def archived(db) -> list[str]:
    archive = SensoryArchive(db)
    texts = [r[0] for r in archive.conn.execute("SELECT text FROM events ORDER BY batch, seq")]
    archive.close()
    return texts


@pytest.mark.parametrize("kind", ["rename", "copytruncate"])
async def test_a_restart_across_rotations_resumes_without_loss_or_repeat(writer, tmp_path, kind):
    db = tmp_path / "archive.db"
    writer.do(writer.write(10))
    # Killed after reading lines it had not committed: they are read again.
    await run_life(writer, db, [lambda: writer.do(writer.write(5))], killed=True)
    assert archived(db) == writer.lines[:10]
    # While the agent is down: more lines, rotated twice.
    writer.do(writer.write(10), [kind], writer.write(10), [kind], writer.write(10))
    await run_life(writer, db, [lambda: writer.do(writer.write(5), [kind], writer.write(5))],
                   killed=False)
    texts = archived(db)
    assert [t for t in texts if not t.startswith("line ")] == []
    assert texts == writer.lines


async def test_no_note_is_emitted_when_nothing_is_missed(writer):
    notes: list[str] = []
    steps = [lambda: writer.do(writer.write(5), ["rename"], writer.write(5))]
    await follow(writer, steps,
                 sink=lambda e: notes.append(e.text) if e.key == NOTE_KEY else None)
    assert notes == []
