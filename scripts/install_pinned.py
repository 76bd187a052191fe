"""Install the pinned packages into the environment that runs this script, and
say what is happening while it does: what pip is fetching, how many of the
packages are fetched and installed, and for how long it has been at it.

pip alone says either everything (a line per package, then its list of a
hundred names twice) or, with -q, nothing for minutes. The install phase is
the long one, and pip prints nothing while it unpacks; its progress is read
from the packages' metadata folders (`*.dist-info`) as they appear in
site-packages, each one written when its package is in place.

    .venv/bin/python scripts/install_pinned.py requirements.lock

pip's warnings and errors are shown as they come, but for one: a package
index folder named in pip's configuration that lacks a package is noted
once per package, and said here once, counted. Everything pip said is
kept in `pip-install.log` beside the environment's `bin/`; when pip fails,
its last lines are shown, with where the rest is. The exit status is pip's.
Standard library only: it runs before anything else is installed.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

TICK_S = 0.5  # how often a terminal's line is redrawn
QUIET_S = 15.0  # without a terminal: the longest silence between two lines
SHOWN_ON_FAILURE = 25

_FETCHED = re.compile(r"^(?:Collecting|Processing|Requirement already satisfied:)\s+(\S+)")
_INSTALLING = re.compile(r"^Installing collected packages:\s*(.*)$")
_MISSING_FOLDER = re.compile(r"^WARNING: Location '.*' is ignored: it is neither a file nor a "
                             r"directory\.?$")


def pinned_count(lock: Path) -> int:
    """The requirements a lock file names (one a line, comments and options aside)."""
    count = 0
    for line in lock.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            count += 1
    return count


def site_folders() -> list[Path]:
    """This environment's site-packages (one folder, or two where platlib differs)."""
    return sorted({Path(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")})


def metadata_folders(sites: list[Path]) -> set[str]:
    """The `*.dist-info` folders in `sites`."""
    found: set[str] = set()
    for folder in sites:
        if folder.is_dir():
            found.update(p.name for p in folder.glob("*.dist-info"))
    return found


def package_name(spec: str) -> str:
    """"onnxruntime" from "onnxruntime==1.31.1", from ".../onnxruntime-1.31.1-cp311-….whl"
    or from "onnxruntime==1.31.1 (from -r requirements.lock (line 60))"."""
    spec = spec.rsplit("/", 1)[-1]
    for cut in ("==", ">=", "<=", "~=", "!=", "[", ";", "-", "("):
        spec = spec.split(cut, 1)[0]
    return spec


class Progress:
    """What the person is told: one line redrawn on a terminal, a line now and
    then elsewhere (a log, CI)."""

    def __init__(self, total: int, stream=sys.stdout) -> None:
        self.total = total
        self.stream = stream
        self.terminal = stream.isatty()
        self.started = time.monotonic()
        self.fetched = 0
        self.current = ""
        self.installing: int | None = None  # packages pip is installing, once it says
        self.installed = 0
        self._last_line = ""
        self._last_said = 0.0
        self._drawn = False

    def elapsed(self) -> int:
        return int(time.monotonic() - self.started)

    def line(self) -> str:
        if self.installing is None:
            what = f" ({self.current})" if self.current else ""
            return (f"  checking and fetching: {min(self.fetched, self.total)} of "
                    f"{self.total}{what}, {self.elapsed()} s")
        return (f"  installing into the environment: {min(self.installed, self.installing)} of "
                f"{self.installing}, {self.elapsed()} s")

    def show(self) -> None:
        line = self.line()
        if self.terminal:
            self.stream.write("\r\033[2K" + line)
            self._drawn = True
        else:
            # Without a terminal, a line when something moved and at least every QUIET_S.
            moved = line.rsplit(",", 1)[0] != self._last_line.rsplit(",", 1)[0]
            due = time.monotonic() - self._last_said >= QUIET_S
            if not (due or (moved and self._step_changed())):
                return
            self.stream.write(line + "\n")
            self._last_said = time.monotonic()
        self._last_line = line
        self.stream.flush()

    def _step_changed(self) -> bool:
        # A line per tenth of the way, not one per package.
        def step(text: str) -> str:
            numbers = re.findall(r"(\d+) of (\d+)", text)
            if not numbers:
                return ""
            done, total = map(int, numbers[0])
            return f"{text.split(':')[0]}:{10 * done // max(total, 1)}"
        return step(self.line()) != step(self._last_line)

    def say(self, text: str) -> None:
        """A line of its own (a warning), without breaking the progress line."""
        if self.terminal and self._drawn:
            self.stream.write("\r\033[2K")
        self.stream.write(text.rstrip() + "\n")
        self.stream.flush()
        if self.terminal and self._drawn:
            self.show()

    def end(self) -> None:
        if self.terminal and self._drawn:
            self.stream.write("\r\033[2K")
            self.stream.flush()


def install(lock: Path, log_path: Path, stream=sys.stdout, *,
            command: list[str] | None = None, sites: list[Path] | None = None) -> int:
    """Run pip on `lock`, showing progress on `stream`; pip's exit status.
    (`command` and `sites` stand in for pip and site-packages in tests.)"""
    progress = Progress(pinned_count(lock), stream)
    command = command or [sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
                          "--progress-bar", "off", "-r", str(lock)]
    sites = sites or site_folders()
    missing_folders = 0
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    lines: queue.Queue[str | None] = queue.Queue()
    before: set[str] = set()
    with open(log_path, "w", encoding="utf-8") as log:
        pip = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, errors="replace", env=env)

        def read() -> None:
            assert pip.stdout is not None
            for raw in pip.stdout:
                lines.put(raw)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        kept: list[str] = []
        try:
            while True:
                try:
                    raw = lines.get(timeout=TICK_S)
                except queue.Empty:
                    raw = ""
                if raw is None:
                    break
                if raw:
                    log.write(raw)
                    kept = (kept + [raw.rstrip()])[-SHOWN_ON_FAILURE:]
                    text = raw.strip()
                    fetched = _FETCHED.match(text)
                    starting = _INSTALLING.match(text)
                    if fetched:
                        progress.fetched += 1
                        progress.current = package_name(fetched.group(1))
                    elif starting:
                        names = [n for n in starting.group(1).split(",") if n.strip()]
                        progress.installing = len(names)
                        before = metadata_folders(sites)
                    elif _MISSING_FOLDER.match(text):
                        missing_folders += 1
                    elif text.startswith(("WARNING:", "ERROR:")):
                        progress.say(text)
                if progress.installing is not None:
                    progress.installed = len(metadata_folders(sites) - before)
                progress.show()
        except KeyboardInterrupt:
            pip.terminate()
            pip.wait()
            progress.end()
            stream.write("Stopped; run it again to go on where it stopped.\n")
            return 130
        status = pip.wait()
    progress.end()
    if status != 0:
        stream.write(f"pip could not install the packages (exit {status}); its last lines:\n")
        stream.write("\n".join(f"    {line}" for line in kept) + "\n")
        stream.write(f"All it said is in {log_path}.\n")
        return status
    done = progress.installing or 0
    stream.write(f"  {done} installed, {progress.total - done} already there, "
                 f"in {progress.elapsed()} s.\n")
    if missing_folders:
        stream.write(f"  (pip's configuration names package folders that lack some of these "
                     f"packages; pip found them elsewhere. Its {missing_folders} notes about "
                     f"it are in {log_path}.)\n")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python scripts/install_pinned.py LOCKFILE\n")
        return 2
    log_path = Path(sys.prefix) / "pip-install.log"
    return install(Path(argv[1]), log_path)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
