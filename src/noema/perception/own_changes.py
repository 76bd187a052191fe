"""The agent's own changes to files, so that a folder it watches does not
report them back to it as news.

Every change the agent makes in a workspace (a file tool's write, a
command's effects, a saved attachment) becomes a version of the agent's in
the workspace's history; the history tells this registry which paths it
recorded and the registry notes what each file looks like right after
(inode, size, modification time; or that it is gone). When the folder sensor
then sees a change to one of those paths and the file still looks exactly
so, the change is the agent's own and is not an event. A person who edits
the file afterwards changes how it looks, so their edit is reported.

Entries are forgotten after `keep_s`: a watcher reports within its debounce
time, and an old entry must not hide a later edit that happens to leave the
same size and time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

Look = tuple[int, int, int] | None  # (inode, size, mtime in ns), or None when absent


def _look(path: Path) -> Look:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class OwnChanges:
    """What the agent changed recently, and how each file looked after."""

    def __init__(self, keep_s: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 temp_suffix: str | None = None) -> None:
        self.keep_s = keep_s
        # The hidden files an atomic write makes and renames away.
        self.temp_suffix = temp_suffix
        self._clock = clock
        self._lock = threading.Lock()  # versions are recorded in worker threads
        self._seen: dict[str, tuple[float, Look]] = {}

    def record(self, workdir: Path, paths: Iterable[str]) -> None:
        """The agent's version of `workdir` just recorded these paths."""
        now = self._clock()
        looks = {os.path.realpath(workdir / p): _look(workdir / p) for p in paths}
        with self._lock:
            for key, look in looks.items():
                self._seen[key] = (now, look)
            if len(self._seen) > 10_000:  # a command that touched a great many files
                self._forget_old(now)

    def is_own(self, path: Path | str) -> bool:
        """Whether `path` looks as the agent left it, a moment ago."""
        name = os.path.basename(path)
        if self.temp_suffix and name.startswith(".") and name.endswith(self.temp_suffix):
            return True
        key = os.path.realpath(path)
        with self._lock:
            entry = self._seen.get(key)
            if entry is None:
                return False
            when, look = entry
            if self._clock() - when > self.keep_s:
                del self._seen[key]
                return False
        return _look(Path(key)) == look

    def _forget_old(self, now: float) -> None:
        old = [k for k, (when, _) in self._seen.items() if now - when > self.keep_s]
        for key in old:
            del self._seen[key]
