"""A workspace's history made by two at once (the start snapshot's child
process and the agent's first write): both end with the same whole history.

Seen in a full run: the second creator failed with "failed to create locked
file …/config.lock: File exists", and the approved write was lost.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pygit2

from noema.security.versioning import VersionStore


def _open_many(workdir: str, gitdir: str, start, times: int) -> None:
    start.wait()
    for _ in range(times):
        VersionStore._open(Path(workdir), Path(gitdir))


def test_two_processes_making_the_same_history_both_succeed(tmp_path):
    context = multiprocessing.get_context("spawn")  # no threads of the test carried over
    for round_ in range(5):
        workdir, gitdir = tmp_path / f"w{round_}", tmp_path / "versions" / f"w{round_}.git"
        workdir.mkdir()
        start = context.Event()
        workers = [context.Process(target=_open_many, args=(str(workdir), str(gitdir), start, 3))
                   for _ in range(4)]
        for worker in workers:
            worker.start()
        start.set()
        for worker in workers:
            worker.join(60)
        assert [w.exitcode for w in workers] == [0, 0, 0, 0]
        repo = pygit2.Repository(str(gitdir))
        assert repo.config["core.worktree"] == str(workdir) and not repo.is_bare


def test_a_history_left_half_made_is_finished(tmp_path):
    workdir, gitdir = tmp_path / "w", tmp_path / "versions" / "w.git"
    workdir.mkdir()
    pygit2.init_repository(str(gitdir), bare=True)  # stopped before its work tree was set
    repo = VersionStore._open(workdir, gitdir)
    assert repo.config["core.worktree"] == str(workdir) and not repo.is_bare
