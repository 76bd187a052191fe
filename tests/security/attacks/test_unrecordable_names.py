"""Class 7, the recorder's half: a path the history cannot hold never stops
the rest from being recorded, and is named.

Names git reads as `.git` (case variants, trailing dots or spaces, 8.3 short
names, NTFS streams) are refused by libgit2; special files, files above the
size limit and files that vanish mid-walk cannot be recorded either. Before,
one such path made the whole recording fail: the command's other edits were
later credited to the person (so `undo` skipped them) and `noema diff` and
`undo` ended in a traceback.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import pytest

from noema.interfaces.commands import versions as versions_cli
from noema.interfaces.commands.versions import VersionsCommandError
from noema.security.history import ChangeNote, Skipped, left_out_text
from noema.security.versioning import VersionStore
from noema.security.versions import Versions
from noema.security.worktree import REFUSED_NAME, WorkTree

from ..world import BWRAP, World
from .history_scan import agent_store, agent_write, open_store, show, tree_modes

SCANS = pytest.mark.parametrize("watch", [True, False], ids=["notifications", "full-scan"])

REFUSED = [
    ".GIT/config",
    ".Git/hooks/pre-commit",
    ".git./config",
    ".git /config",
    "git~1/config",
    "GIT~1/hooks/post-checkout",
    "sub/.GIT/config",
    ".GIT",
    "sub/.git.",
]

COMMAND = ChangeNote("agent", "shell_execute: make things", 12, "shell_execute")


def _plant(ws: Path, rel: str, data: str = "[core]\n\thooksPath = /tmp/evil\n") -> None:
    path = ws / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data)


@pytest.fixture
def stores(world: World):
    opened: list[VersionStore] = []

    def make(watch: bool, **options) -> VersionStore:
        store = open_store(world, f"s{len(opened)}", watch=watch, **options)
        opened.append(store)
        agent_write(store, "start.txt", b"start\n")
        return store

    yield make
    for store in opened:
        store.close()


# -- a name git refuses --------------------------------------------------------


@SCANS
@pytest.mark.parametrize("name", REFUSED)
def test_a_refused_name_is_left_out_and_the_rest_recorded(
    world: World, stores, watch: bool, name: str
):
    store = stores(watch)
    _plant(world.ws, name)
    (world.ws / "a.txt").write_text("made by the command\n")
    version = store.record(COMMAND)  # what the shell tool does after a command
    assert version is not None and version.note.author == "agent"
    assert "a.txt" in version.paths
    assert show(store.gitdir, "HEAD:a.txt") == b"made by the command\n"
    assert not [p for p in tree_modes(store) if p.lower().startswith(name.lower()[:4])]
    named = {s.path: s.reason for s in store.skipped}
    assert named and all(name == p or name.startswith(p + "/") for p in named), named
    assert set(named.values()) == {REFUSED_NAME}
    assert version.skipped == store.skipped


@pytest.mark.parametrize("name", [".GIT/config", "git~1/config", ".git./config"])
async def test_a_command_edit_beside_a_refused_name_stays_the_agents_and_undoable(
    world: World, name: str
):
    await world.call("file_write", path="a.txt", content="before\n")
    store = agent_store(world)
    _plant(world.ws, name)
    (world.ws / "a.txt").write_text("after the command\n")
    assert store.record(COMMAND) is not None
    (world.ws / "a.txt").write_text("after the command, edited again by it\n")
    assert store.record(COMMAND) is not None
    assert store.record_person() is None  # nothing is left for the person to claim
    world.close()
    text = versions_cli.undo(world.settings().files, world.paths)
    assert text.startswith("Undid ") and "a.txt" in text
    assert (world.ws / "a.txt").read_text() == "after the command\n"


@pytest.mark.parametrize("name", [".GIT/config", ".Git/hooks/pre-commit", "git~1/x", ".GIT"])
async def test_history_commands_never_crash_while_such_a_file_exists(world: World, name: str):
    await world.call("file_write", path="a.txt", content="one\n")
    version = world.git("log", "-1", "--format=%h").strip()
    await world.call("file_write", path="a.txt", content="two\n")
    _plant(world.ws, name)
    (world.ws / "b.txt").write_text("by hand\n")
    world.close()
    files, paths = world.settings().files, world.paths
    shown = versions_cli.diff(files, paths)
    assert "+by hand" in shown
    top = name.split("/")[0]
    assert f"{top} {REFUSED_NAME}" in shown or f"{name} {REFUSED_NAME}" in shown
    assert "file_write a.txt" in versions_cli.history(files, paths)
    assert versions_cli.history(files, paths, name).startswith("No versions of")
    assert versions_cli.undo(files, paths).startswith("Undid ")
    assert (world.ws / "a.txt").read_text() == "one\n"
    (world.ws / "a.txt").write_text("three\n")
    assert "Restored a.txt" in versions_cli.restore(files, paths, "a.txt", version)
    assert (world.ws / "a.txt").read_text() == "one\n"
    with pytest.raises(VersionsCommandError, match="did not exist"):
        versions_cli.restore(files, paths, name, version)
    assert (world.ws / name).exists()  # the commands leave the person's file alone


def test_an_agent_write_at_a_refused_name_lands_and_is_named(world: World, stores):
    store = stores(True)
    recorded = agent_write(store, ".GIT/config", b"[core]\n")
    assert recorded.version is None  # nothing the history can hold changed
    assert [(s.path, s.reason) for s in recorded.skipped] == [(".GIT/config", REFUSED_NAME)]
    assert (world.ws / ".GIT" / "config").read_text() == "[core]\n"
    assert agent_write(store, "b.txt", b"fine\n").version is not None


@pytest.mark.parametrize("name", [".gitignore", ".github/ci.yml", "x.git/config", ".gitx/y",
                                  "git~2/x", ".git~1/x"])
def test_names_git_accepts_are_recorded(world: World, stores, name: str):
    store = stores(False)
    _plant(world.ws, name, "ordinary\n")
    store.record_person()
    assert show(store.gitdir, f"HEAD:{name}") == b"ordinary\n"
    assert store.skipped == ()


def test_a_refused_name_that_is_removed_is_no_longer_listed(world: World, stores):
    store = stores(False)
    _plant(world.ws, ".GIT/config")
    store.record_person()
    assert [s.path for s in store.left_out()] == [".GIT"]
    (world.ws / ".GIT" / "config").unlink()
    (world.ws / ".GIT").rmdir()
    (world.ws / "c.txt").write_text("c\n")
    store.record_person()
    assert store.left_out() == ()


@pytest.mark.skipif(not BWRAP, reason="needs bubblewrap for the sandboxed shell")
async def test_a_real_command_beside_a_refused_name_is_recorded_as_the_agents(world: World):
    await world.call("file_write", path="a.txt", content="before\n")
    result = await world.call(
        "shell_execute",
        command="mkdir -p .GIT 2>/dev/null; echo x > .GIT/config 2>/dev/null; echo after > a.txt",
    )
    assert not result.is_error, result.content
    assert "Traceback" not in result.content
    log = world.git("log", "--format=%an|%s", "-2").splitlines()
    assert log[0].startswith("Noema (t)|shell_execute"), log
    assert show(world.gitdir(), "HEAD:a.txt") == b"after\n"
    if (world.ws / ".GIT" / "config").exists():
        assert ".GIT" in {s.path.split("/")[0] for s in agent_store(world).skipped}


# -- special, oversized and vanishing files --------------------------------------


def _special(path: Path, kind: str) -> socket.socket | None:
    if kind == "fifo":
        os.mkfifo(path)
        return None
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    return sock


@SCANS
@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_a_special_file_is_left_out_and_named(world: World, stores, watch: bool, kind: str):
    store = stores(watch)
    held = _special(world.ws / "special", kind)
    try:
        (world.ws / "a.txt").write_text("a\n")
        version = store.record_person()
        assert version is not None and "a.txt" in version.paths
        assert "special" not in tree_modes(store)
        [skipped] = store.skipped
        assert skipped.path == "special" and "not a regular file" in skipped.reason
    finally:
        if held is not None:
            held.close()


@SCANS
def test_a_file_above_the_limit_is_left_out_and_named(world: World, stores, watch: bool):
    store = stores(watch, max_file_bytes=64)
    (world.ws / "small.txt").write_text("small\n")
    (world.ws / "big.bin").write_bytes(b"x" * 65)
    store.record_person()
    modes = tree_modes(store)
    assert "small.txt" in modes and "big.bin" not in modes
    assert [(s.path, s.reason) for s in store.skipped] == [
        ("big.bin", "is 65 bytes, above the 64-byte limit for versioning")
    ]


def test_a_tracked_file_that_grows_past_the_limit_leaves_the_history(world: World, stores):
    store = stores(True, max_file_bytes=64)
    (world.ws / "log.txt").write_text("short\n")
    store.record_person()
    (world.ws / "log.txt").write_text("long\n" * 40)
    version = store.record_person()
    assert version is not None and "log.txt" in version.paths
    assert "log.txt" not in tree_modes(store)
    assert [s.path for s in version.skipped] == ["log.txt"]


@SCANS
def test_a_file_that_vanishes_mid_walk_is_recorded_as_gone(
    world: World, stores, monkeypatch, watch: bool
):
    store = stores(watch)
    (world.ws / "brief.txt").write_text("here for a moment\n")
    store.record_person()
    (world.ws / "brief.txt").write_text("edited, then removed\n")
    (world.ws / "other.txt").write_text("other\n")
    real_read = WorkTree._read

    def read_after_removal(self, folder, name, listed, device):
        if name == "brief.txt":
            os.unlink(name, dir_fd=folder)
        return real_read(self, folder, name, listed, device)

    monkeypatch.setattr(WorkTree, "_read", read_after_removal)
    version = store.record_person()
    assert version is not None and {"brief.txt", "other.txt"} <= set(version.paths)
    assert "brief.txt" not in tree_modes(store)
    assert store.skipped == ()


# -- what the model and the person are told ----------------------------------------


def test_the_left_out_sentence_names_paths_and_reasons():
    assert left_out_text(()) == ""
    skipped = [Skipped(f"f{n}", "is a name git refuses (it reads as .git)") for n in range(7)]
    text = left_out_text(skipped)
    assert text.startswith("Not recorded in the history, so not restorable: f0 is a name git")
    assert "f4 is a name" in text and "f5" not in text and text.endswith("; and 2 more.")


# -- closing never raises ------------------------------------------------------------


def test_closing_a_store_whose_index_cannot_be_written_does_not_raise(
    world: World, caplog
):
    store = open_store(world, "s", watch=True)
    agent_write(store, "a.txt", b"a\n")
    index = store.gitdir / "index"
    index.unlink(missing_ok=True)
    index.mkdir()
    (index / "blocker").write_text("the index cannot be replaced")
    with caplog.at_level(logging.WARNING):
        store.close()
    assert "not saved at close" in caplog.text
    store.close()  # twice is fine too


async def test_closing_all_histories_goes_on_past_a_broken_one(world: World, caplog):
    await world.call("file_write", path="a.txt", content="a\n")
    versions: Versions = world.hands.versions  # type: ignore[union-attr]
    index = world.gitdir() / "index"
    index.unlink(missing_ok=True)
    index.mkdir()
    (index / "blocker").write_text("x")
    with caplog.at_level(logging.WARNING):
        versions.close()
    assert "not saved at close" in caplog.text
    world.hands = None


def test_a_version_is_made_even_when_the_index_file_cannot_be_saved(world: World, caplog):
    store = open_store(world, "s", watch=False)
    try:
        agent_write(store, "a.txt", b"a\n")
        index = store.gitdir / "index"
        index.unlink(missing_ok=True)
        index.mkdir()
        (index / "blocker").write_text("x")
        (world.ws / "b.txt").write_text("b\n")
        with caplog.at_level(logging.WARNING):
            version = store.record_person()
        assert version is not None and "b.txt" in version.paths
        assert "was not saved" in caplog.text
    finally:
        store.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder whatever its mode")
@SCANS
def test_a_folder_the_recorder_cannot_read_keeps_its_earlier_record(
    world: World, stores, watch: bool
):
    store = stores(watch)
    locked = world.ws / "locked"
    locked.mkdir()
    (locked / "kept.txt").write_text("kept\n")
    store.record_person()
    locked.chmod(0o000)
    try:
        (world.ws / "a.txt").write_text("a\n")
        (world.ws / "locked.txt").write_text("touch the parent\n")
        version = store.record_person()
        assert version is not None and "a.txt" in version.paths
        assert show(store.gitdir, "HEAD:locked/kept.txt") == b"kept\n"
        assert ("locked", "cannot be read (Permission denied)") in {
            (s.path, s.reason) for s in store.skipped
        }
    finally:
        locked.chmod(0o755)
