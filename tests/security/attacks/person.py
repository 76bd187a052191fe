"""The person at work while a command runs: a separate process that waits
for the command's signal (a file it makes), then creates or re-saves files
the way editors and `sed -i` do (write a copy under another name, rename it
over), writes into one in place, or gives one another name (a hard link, a
rename; the new name is given as the content), and signals back when done.

    with Person(ws, "create", ".env", CANARY):
        await shell(world, "touch started; ... wait for done ...; cat .env")
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import os, sys, time
folder, action, name, content, rounds = sys.argv[1:6]
rounds = int(rounds)
end = time.monotonic() + 120  # the tool call starts the command: slow on a busy machine
while not os.path.exists(os.path.join(folder, "started")):
    if time.monotonic() > end:
        raise SystemExit("the command never started")
    time.sleep(0.005)
target = os.path.join(folder, name)
for n in range(rounds):
    if action == "create":
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write(content + "\n")
    elif action == "resave":
        copy = os.path.join(os.path.dirname(target), f"sedq{n % 7}Xz")
        with open(copy, "w") as f:
            f.write(f"{content} round {n}\n")
        os.rename(copy, target)
    elif action == "link":  # `content` is the new name
        os.link(target, os.path.join(folder, content))
    elif action == "rename":  # likewise
        os.rename(target, os.path.join(folder, content))
    elif action == "flicker":
        with open(target, "w") as f:
            f.write(content + "\n")
        time.sleep(0.002)
        os.unlink(target)
    time.sleep(0.002)
open(os.path.join(folder, "done"), "w").close()
"""


class Person:
    """Runs the person's edits in a child process for the length of a `with`."""

    def __init__(self, folder: Path, action: str, name: str, content: str, rounds: int = 1):
        self.argv = [sys.executable, "-c", _CHILD, str(folder), action, name, content, str(rounds)]
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Person:
        self.process = subprocess.Popen(self.argv, stderr=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        try:
            _, err = self.process.communicate(timeout=180)
        finally:
            if self.process.poll() is None:
                self.process.kill()
        if exc[0] is None:
            assert self.process.returncode == 0, err


# A command's side of the meeting: say it started, wait (bounded) for the person.
WAIT_DONE = (
    "touch started; n=0; while [ ! -e done ] && [ $n -lt 3000 ]; do sleep 0.01; n=$((n+1)); done"
)
