"""The workspace's history: who did what, readable with the ordinary git
command, never touching the person's own repository."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path, PurePosixPath

import pytest

from noema.security.fsafe import atomic_write
from noema.security.history import Authors, ChangeNote
from noema.security.versioning import VersionStore

from .world import PERSON_GIT, World, tree_snapshot


def open_store(tmp_path: Path, ws: Path, *, watch: bool = True) -> VersionStore:
    return VersionStore(
        ws.resolve(),
        tmp_path / "agent" / "v.git",
        authors=Authors("Ana", "ana@localhost", "Noema (t)", "noema-t@localhost"),
        exclude=(".env",),
        watch_changes=watch,
    )


def agent_write(
    store: VersionStore, rel: str, data: bytes, turn: int = 7, tool: str = "file_write"
):
    with store.change(ChangeNote("agent", f"{tool} {rel}", turn, tool), [rel]) as recorded:
        atomic_write(store.workdir, PurePosixPath(rel), data)
    return recorded.version


def git(store: VersionStore, *args: str) -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(store.gitdir), "--work-tree", str(store.workdir), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(params=[True, False], ids=["inotify", "full-scan"])
def store(request, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("v1\n")
    s = open_store(tmp_path, ws, watch=request.param)
    yield s
    s.close()


def test_person_edits_are_committed_first_and_as_theirs(store: VersionStore):
    agent_write(store, "a.txt", b"agent 1\n", turn=3)
    (store.workdir / "notes.txt").write_text("v2 by the person\n")
    agent_write(store, "b.txt", b"agent 2\n", turn=4)
    lines = git(
        store, "log", "--format=%an|%s|%(trailers:key=Noema-Turn,valueonly,separator=)"
    ).splitlines()
    assert lines == [
        "Noema (t)|file_write b.txt|4",
        "Ana|Changes by the person: notes.txt|",
        "Noema (t)|file_write a.txt|3",
        "Ana|Initial state of the workspace: notes.txt|",
    ]
    assert git(store, "show", "HEAD~1:notes.txt") == "v2 by the person\n"
    assert git(store, "show", "HEAD:b.txt") == "agent 2\n"
    body = git(store, "log", "-1", "--format=%B")
    assert "Noema-Author: agent" in body and "Noema-Tool: file_write" in body


def test_agent_commit_holds_only_the_agent_write(store: VersionStore):
    agent_write(store, "a.txt", b"x")
    (store.workdir / "notes.txt").write_text("edited meanwhile\n")
    # A person edit made during the agent's write is not folded into it.
    with store.change(ChangeNote("agent", "file_write a.txt", 1, "file_write"), ["a.txt"]):
        (store.workdir / "notes.txt").write_text("edited during the write\n")
        atomic_write(store.workdir, PurePosixPath("a.txt"), b"y")
    assert git(store, "show", "--name-only", "--format=", "HEAD").split() == ["a.txt"]
    store.record_person()
    assert git(store, "show", "--format=%an", "--name-only", "HEAD").split() == ["Ana", "notes.txt"]


def test_repository_passes_fsck_and_status_is_clean(store: VersionStore):
    for n in range(3):
        agent_write(store, f"d/f{n}.txt", b"%d" % n)
    (store.workdir / "notes.txt").unlink()
    store.record_person()
    store.close()
    done = subprocess.run(
        ["git", "--git-dir", str(store.gitdir), "fsck", "--strict"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "error" not in (done.stdout + done.stderr).lower()
    assert git(store, "status", "--porcelain") == ""


def test_person_git_folder_is_never_touched(tmp_path: Path):
    ws = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "code.py").write_text("print(1)\n")
    before = tree_snapshot(ws / ".git")
    store = open_store(tmp_path, ws)
    agent_write(store, "code.py", b"print(2)\n")
    store.close()
    assert tree_snapshot(ws / ".git") == before
    tracked = git(store, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert tracked == ["code.py"]


def test_no_git_link_file_is_created_in_the_workspace(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    store = open_store(tmp_path, ws)
    agent_write(store, "a.txt", b"x")
    store.close()
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt"]


def test_nested_repository_files_are_versioned_but_not_its_git(store: VersionStore):
    nested = store.workdir / "lib"
    subprocess.run(["git", "init", "-q", str(nested)], check=True)
    (nested / "x.py").write_text("x = 1\n")
    agent_write(store, "lib/y.py", b"y = 2\n")
    tracked = git(store, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert "lib/x.py" in tracked and "lib/y.py" in tracked
    assert not any(".git/" in t for t in tracked)


def test_ignored_files_are_skipped_unless_the_agent_writes_them(store: VersionStore):
    (store.workdir / ".gitignore").write_text("build/\n")
    (store.workdir / "build").mkdir()
    (store.workdir / "build" / "cache.bin").write_text("junk")
    agent_write(store, "build/report.txt", b"agent report\n")
    (store.workdir / "build" / "report.txt").write_text("person touched the report\n")
    agent_write(store, "build/report.txt", b"agent report 2\n")
    tracked = git(store, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert "build/report.txt" in tracked and "build/cache.bin" not in tracked
    assert git(store, "show", "HEAD~1:build/report.txt") == "person touched the report\n"


def test_secret_names_never_enter_the_history(store: VersionStore):
    (store.workdir / ".env").write_text("API_KEY=abc\n")
    (store.workdir / "sub").mkdir()
    (store.workdir / "sub" / ".env").write_text("API_KEY=def\n")
    agent_write(store, "a.txt", b"x")
    assert ".env" not in git(store, "log", "--all", "--name-only", "--format=")


def test_deletions_renames_and_new_folders_by_the_person(store: VersionStore):
    agent_write(store, "docs/a/one.txt", b"1")
    agent_write(store, "docs/a/two.txt", b"2")
    os.rename(store.workdir / "docs" / "a", store.workdir / "docs" / "b")
    (store.workdir / "notes.txt").unlink()
    (store.workdir / "new" / "deep").mkdir(parents=True)
    (store.workdir / "new" / "deep" / "n.txt").write_text("n")
    agent_write(store, "z.txt", b"z")
    tracked = sorted(git(store, "ls-tree", "-r", "--name-only", "HEAD").split())
    assert tracked == ["docs/b/one.txt", "docs/b/two.txt", "new/deep/n.txt", "z.txt"]
    # Changes to files in the new folder are seen too.
    (store.workdir / "new" / "deep" / "n.txt").write_text("n2")
    store.record_person()
    assert git(store, "show", "HEAD:new/deep/n.txt") == "n2"


def test_links_and_executable_bits_are_recorded(store: VersionStore):
    (store.workdir / "run.sh").write_text("#!/bin/sh\n")
    (store.workdir / "run.sh").chmod(0o755)
    (store.workdir / "link").symlink_to("notes.txt")
    store.record_person()
    listing = git(store, "ls-tree", "HEAD")
    assert "100755 blob" in listing.split("run.sh")[0].splitlines()[-1]
    assert "120000 blob" in listing.split("\tlink")[0].splitlines()[-1]


def test_another_process_commits_are_built_upon(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a1")
    agent = open_store(tmp_path, ws)
    agent_write(agent, "a.txt", b"a2")
    other = open_store(tmp_path, ws, watch=False)  # as `noema restore` would
    with other.change(ChangeNote("person", "Restore of a.txt"), ["a.txt"]):
        atomic_write(ws, PurePosixPath("a.txt"), b"a1")
    other.close()
    agent_write(agent, "b.txt", b"b")
    agent.close()
    assert git(agent, "show", "HEAD:a.txt") == "a1"
    subjects = git(agent, "log", "--format=%s").splitlines()
    assert subjects[:2] == ["file_write b.txt", "Restore of a.txt"]


async def test_agent_data_inside_the_workspace_is_not_versioned(inner_world: World):
    await inner_world.call("file_write", path="a.txt", content="x")
    (inner_world.paths.root / "turns.db").write_text("agent data changes all the time")
    await inner_world.call("file_write", path="b.txt", content="y")
    names = inner_world.git("log", "--name-only", "--format=").split()
    assert names == ["b.txt", "a.txt", "notes.txt"]


async def test_history_is_kept_outside_the_workspace(world: World):
    await world.call("file_write", path="a.txt", content="x")
    assert world.gitdir().is_relative_to(world.paths.versions_dir)
    assert (world.ws / ".git" / "config").read_text() == PERSON_GIT
    digest = hashlib.sha256(str(world.ws.resolve()).encode()).hexdigest()[:12]
    assert world.gitdir().name.endswith(f"{digest}.git")
