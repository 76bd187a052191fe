"""Something of the wrong kind where the agent keeps a folder or a file: the
agent does not start, and says which path and what to do, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from noema.paths import AgentLock, AgentPaths, MisplacedPath


def _logs_file(paths: AgentPaths) -> Path:
    paths.root.mkdir(parents=True)
    paths.logs_dir.write_text("not a folder")
    return paths.logs_dir


def _lock_folder(paths: AgentPaths) -> Path:
    paths.lock_file.mkdir(parents=True)
    return paths.lock_file


def _identity_file(paths: AgentPaths) -> Path:
    paths.root.mkdir(parents=True)
    paths.identity_dir.write_text("not a folder")
    return paths.identity_dir


CASES = {"logs is a file": (_logs_file, "a file", "a folder"),
         "the lock is a folder": (_lock_folder, "a folder", "a file"),
         "identity is a file": (_identity_file, "a file", "a folder")}


@pytest.mark.parametrize("case", CASES)
def test_the_agent_starts_with_a_message_naming_the_path_and_the_way_out(tmp_path, case):
    make, found, wanted = CASES[case]
    misplaced = make(AgentPaths.for_agent("default", tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
    done = subprocess.run([sys.executable, "-m", "noema", "run"], capture_output=True,
                          text=True, env={**env, "NOEMA_HOME": str(tmp_path)}, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{misplaced} is {found}, but the agent needs {wanted} there" in done.stderr
    assert f"mv {misplaced} {misplaced}.old" in done.stderr


def test_the_folders_and_the_lock_refuse_what_stands_in_their_place(tmp_path):
    """The refusal lives where the folder is made and the lock is taken, so any
    caller (the page's server, a demo) gets the same message, not an OSError."""
    paths = AgentPaths.for_agent("default", tmp_path)
    logs = _logs_file(paths)
    with pytest.raises(MisplacedPath, match=f"{logs} is a file"):
        paths.ensure()
    lock = _lock_folder(paths)
    with pytest.raises(MisplacedPath, match=f"{lock} is a folder"):
        AgentLock(paths)
    assert logs.read_text() == "not a folder" and lock.is_dir()  # nothing was moved or lost
