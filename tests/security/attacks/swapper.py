"""A separate process that atomically exchanges two paths in a bounded loop.

`renameat2(RENAME_EXCHANGE)` swaps a real folder (or file) and a symbolic
link in one step, so a reader that checks a path and then uses it sees the
link at the worst moment some of the time. The child runs at most `limit`
exchanges or `seconds`, whichever comes first, and always leaves the two
names as it found them (an even number of exchanges).

    with Swapper(a, b):
        ...  # drive the tools; `a` and `b` keep trading places
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

RENAME_EXCHANGE = 2
_AT_FDCWD = -100

_CHILD = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b, limit, seconds = sys.argv[1].encode(), sys.argv[2].encode(), int(sys.argv[3]), float(sys.argv[4])
end = time.monotonic() + seconds
done = 0
sys.stdout.write("ready\n"); sys.stdout.flush()
while done < limit and time.monotonic() < end:
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        raise SystemExit(f"renameat2 failed: {os.strerror(ctypes.get_errno())}")
    done += 1
if done % 2:
    libc.renameat2(-100, a, -100, b, 2)
    done += 1
sys.stdout.write(f"{done}\n")
"""


def exchange(a: Path, b: Path) -> None:
    """Swap two paths in one step (both must exist)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a))


class Swapper:
    """Runs the exchange loop in a child process for the length of a `with`."""

    def __init__(self, a: Path, b: Path, *, limit: int = 200_000, seconds: float = 5.0) -> None:
        self.a, self.b, self.limit, self.seconds = a, b, limit, seconds
        self.swaps = 0
        self._child: subprocess.Popen[str] | None = None

    def __enter__(self) -> Swapper:
        self._child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(self.a), str(self.b), str(self.limit),
             str(self.seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._child.stdout is not None
        assert self._child.stdout.readline().strip() == "ready"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._child is not None and self._child.stdout is not None
        out = self._child.stdout.read()
        code = self._child.wait(timeout=self.seconds + 30)
        assert code == 0, f"the swapper failed: {out}"
        self.swaps = int(out.strip() or 0)


def swapping_pair(real: Path, target: Path) -> Path:
    """Make a link beside `real` pointing at `target` and return it: the pair
    to hand to Swapper so that `real` is, now and then, a link to `target`."""
    link = real.with_name(real.name + ".swap-link")
    link.symlink_to(target)
    return link
