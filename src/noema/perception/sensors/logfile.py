"""The log-file sensor: one event per line of a followed file, read as soon as
the kernel says the file changed.

Lines are aggregatable: their key is the line's shape (`logkeys.py`), so
"connection error to 10.0.0.3 after 512 ms" and "connection error to
10.0.0.9 after 77 ms" are counted together. Following the file across
rotation, truncation and deletion, and resuming where it stood, is the
follower's job (`logfollow.py`, over the files of `logfiles.py`); this module reads slice after slice, saves
the place with each line, and waits at the end of the file.

**Waiting.** The sensor waits for a change notification (`logwatch.py`,
inotify on the file's folder), so a line is read within a millisecond or so
of being written. Where there is no notification (no inotify, the folder
missing, the watch limit reached) it polls every `poll_interval`, and tries
to watch again each time. Even when notified it looks again every
`RECHECK_INTERVAL`, for the changes inotify cannot see (a rotated file still
being written after it was moved to another folder, a network filesystem).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from ..events import Nature, SensorInfo, TreatmentParams, Urgency
from ..hub import Bookmark, Emitter, MemoryBookmark, Sleep
from ..timefmt import format_duration
from .logfiles import LogPosition
from .logfollow import DEFAULT_MAX_BACKLOG, MAX_LINE, SLICE_BYTES, LogFollower, LogSlice
from .logkeys import normalise_line
from .logwatch import LogWatch

__all__ = [
    "DEFAULT_MAX_BACKLOG", "MAX_LINE", "NOTE_KEY", "RECHECK_INTERVAL", "SLICE_BYTES",
    "YIELD_EVERY", "LogFileSensor", "LogFollower", "LogPosition", "LogSlice", "normalise_line",
]

log = logging.getLogger(__name__)

YIELD_EVERY = 256  # lines the sensor emits in one turn of the event loop (keys cost ~10 µs each)
NOTE_KEY = "noema:sensor-note"
RECHECK_INTERVAL = 30.0  # seconds between looks when notified anyway
# Under a flood of writes each one is notified: reading at most this often
# groups them (a line after a quiet spell is read at once, without this wait).
MIN_READ_GAP = 0.005


class LogFileSensor:
    """Follows one log file; aggregatable by line pattern; resumes where it stood."""

    def __init__(
        self,
        path: Path | str,
        *,
        channel: str,
        window: float = 300.0,
        poll_interval: float = 1.0,
        from_start: bool = False,
        urgency: Urgency = Urgency.NORMAL,
        can_silence: bool = True,
        sleep: Sleep = asyncio.sleep,
        bookmark: Bookmark | None = None,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
        notify: bool = True,
    ) -> None:
        """`bookmark` keeps the sensor's place across restarts (by default only
        across restarts of the sensor inside this process). `notify` False
        polls every `poll_interval` instead of waiting for the kernel's word."""
        self.path = Path(path)
        self._poll_interval = poll_interval
        self._from_start = from_start
        self._sleep = sleep
        self._bookmark = bookmark if bookmark is not None else MemoryBookmark()
        self._max_backlog = max_backlog
        self._notify = notify
        self._last_read = 0.0  # on the loop's clock: when the file was last read
        self.info = SensorInfo(
            channel,
            f"Lines appended to the log file {self.path}, counted by pattern.",
            Nature.AGGREGATABLE,
            parameters={"path": str(self.path), "window": format_duration(window),
                        "poll_interval": format_duration(poll_interval)},
            can_silence=can_silence,
            default_urgency=urgency,
            treatment=TreatmentParams(window=window),
            words_of="log",
        )

    async def run(self, emit: Emitter) -> None:
        follower = LogFollower(
            self.path, from_start=self._from_start, max_backlog=self._max_backlog,
            resume=LogPosition.from_dict(self._bookmark.load()),
        )
        sender = str(self.path)
        saved = None
        watch = LogWatch(self.path)
        try:
            while True:
                # Watching starts before the read and the flag is lowered before
                # it, so a line written while reading is never waited for.
                self._keep_watching(watch)
                watch.rearm()
                self._last_read = asyncio.get_running_loop().time()
                batch = follower.read()
                for index, text in enumerate(batch.lines):
                    # Saved before it is emitted: if emitting makes the archive
                    # commit, the place committed is this line's, never an earlier one.
                    saved = self._save(batch.position(index), saved)
                    emit(text, sender=sender, key=normalise_line(text))
                    if index % YIELD_EVERY == YIELD_EVERY - 1:
                        await asyncio.sleep(0)  # a long slice: let the other tasks run
                saved = self._save(follower.position(), saved)
                for note in follower.notes:  # what was skipped, with the place past it
                    emit(note, sender=sender, key=NOTE_KEY)
                follower.notes.clear()
                if follower.more:
                    await asyncio.sleep(0)  # more is waiting: only let the other tasks run
                else:
                    await self._wait(watch)
        finally:
            watch.close()
            follower.close()

    def _keep_watching(self, watch: LogWatch) -> None:
        """Start the change notification if it is not running (the first time,
        or after it was lost); without it the sensor polls."""
        if not self._notify or watch.active:
            return
        watch.close()
        try:
            watch.start()
        except OSError as exc:
            log.debug("no change notification for %s (%s): polling", self.path, exc)

    async def _wait(self, watch: LogWatch) -> None:
        """Until the file may have changed: notified, or the time for a look."""
        if not watch.active:
            await self._sleep(self._poll_interval)
            return
        timer = asyncio.ensure_future(self._sleep(max(self._poll_interval, RECHECK_INTERVAL)))
        notified = asyncio.ensure_future(watch.changed.wait())
        try:
            await asyncio.wait((timer, notified), return_when=asyncio.FIRST_COMPLETED)
        finally:
            rang = timer.done()
            for waiter in (timer, notified):
                waiter.cancel()
        if rang:
            timer.result()  # a sleep that raised (a stop, a test's step) is raised here
            return
        since = asyncio.get_running_loop().time() - self._last_read
        if since < MIN_READ_GAP:
            await asyncio.sleep(MIN_READ_GAP - since)

    def _save(self, position: LogPosition | None, saved: LogPosition | None
              ) -> LogPosition | None:
        if position is not None and position != saved:
            self._bookmark.save(position.as_dict())
            return position
        return saved
