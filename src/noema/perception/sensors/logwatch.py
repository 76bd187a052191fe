"""The kernel's word that a followed log file changed (inotify, through asyncinotify).

The folder of the file is watched, not the file: a watch on the file itself
would follow its inode away on rotation and miss the new file. Only names
that are the file's or its rotated names (`app.log`, `app.log.1`, ...) count.
Writes to a rotated file still held open are reported under its new name, so
the follower's "read the old file to its end" is woken too.

Why asyncinotify and not `watchfiles` (used for folders): watchfiles batches
changes until none came for `step` milliseconds, checking on a timer; measured
on a log append, p50 11 ms / p99 16 ms at step=5 for 1.3 % of a core while idle,
2 ms / 8 ms at step=1 for 4 %. asyncinotify reads the inotify descriptor from
the event loop: p50 0.6 ms / p99 2.3 ms, and nothing at all while idle.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from asyncinotify import Inotify, Mask

log = logging.getLogger(__name__)

# What can mean new text, or another file at the path: writes and truncation
# (MODIFY), renames and deletes in the folder, a new file.
_MASK = (Mask.MODIFY | Mask.CREATE | Mask.DELETE | Mask.MOVED_FROM | Mask.MOVED_TO
         | Mask.CLOSE_WRITE | Mask.ONLYDIR)


def concerns(path: Path, name: str) -> bool:
    """Whether a change to `name` in the folder of `path` may matter to its follower."""
    own = path.name
    return name == own or (name.startswith(own + ".") and name[len(own) + 1:].isdigit())


class LogWatch:
    """Sets `changed` when the kernel reports a change to the file or its
    rotations. `start` raises OSError where there is no notification (no
    inotify, the folder missing, the watch limit reached): the sensor polls then.

    Once `changed` is set, nothing more is read from the kernel until the
    sensor calls `rearm` (just before it reads the file): meanwhile the kernel
    folds repeated writes into one queued event, so a flood of appends costs a
    wake-up per read of the file, not one per write.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.changed = asyncio.Event()
        self._armed = asyncio.Event()
        self._armed.set()
        self._inotify: Inotify | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def active(self) -> bool:
        """Whether changes are being reported (False before `start` or once the watch is lost)."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Watch the folder now: a change made after this returns is reported."""
        inotify = Inotify()
        try:
            inotify.add_watch(self.path.parent, _MASK)
        except BaseException:
            inotify.close()
            raise
        self._inotify = inotify
        self._task = asyncio.get_running_loop().create_task(
            self._listen(inotify), name=f"logwatch:{self.path}")

    async def _listen(self, inotify: Inotify) -> None:
        path = self.path
        try:
            async for event in inotify:
                if event.mask & (Mask.IGNORED | Mask.Q_OVERFLOW):
                    # The folder is gone (the watch ends) or events were lost:
                    # either way, look at the file now.
                    self.changed.set()
                    if event.mask & Mask.IGNORED:
                        return
                elif event.name is not None and concerns(path, str(event.name)):
                    self.changed.set()
                    self._armed.clear()
                    await self._armed.wait()
        finally:
            log.debug("no longer notified of changes to %s", path)

    def rearm(self) -> None:
        """Lower `changed` and listen again: call just before reading the file,
        so a change made while reading sets it again."""
        self.changed.clear()
        self._armed.set()

    def close(self) -> None:
        """Stop watching."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._inotify is not None:
            # The listener's reader is removed here, not by the listener: a
            # task cancelled before its first step never runs its cleanup.
            try:
                asyncio.get_running_loop().remove_reader(self._inotify.fd)
            except RuntimeError:  # no loop running any more: nothing to remove from
                pass
            self._inotify.close()
            self._inotify = None
