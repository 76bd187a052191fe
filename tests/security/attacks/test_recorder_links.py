"""Class 1: the version recorder never reads through a link.

A folder or a file of the workspace swapped for a link to the outside (by a
command, or by a race during a write or a restore) must not put the outside
files into the history, from where a restore would bring them back. Links
are recorded as links; races are driven by a separate process exchanging a
real path and a link with renameat2(RENAME_EXCHANGE).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from noema.security.history import ChangeNote
from noema.security.undo import restore
from noema.security.versioning import VersionStore
from noema.security.worktree import CHANGED_MEANWHILE, OTHER_FILE_SYSTEM, WorkTree

from ..world import AGENT_SECRET, BWRAP, OUTSIDE_SECRET, World
from .history_scan import (
    agent_store,
    agent_write,
    history_holds,
    open_store,
    show,
    tree_modes,
    workspace_holds,
)
from .swapper import Swapper, exchange, swapping_pair

SCANS = pytest.mark.parametrize("watch", [True, False], ids=["notifications", "full-scan"])


@pytest.fixture
def fresh(world: World, request):
    """A store on the world's workspace whose first look has already happened,
    so what the test does next is seen as a change."""
    stores: list[VersionStore] = []

    def make(watch: bool, **options) -> VersionStore:
        store = open_store(world, f"s{len(stores)}", watch=watch, **options)
        stores.append(store)
        agent_write(store, "start.txt", b"start\n")
        return store

    yield make
    for store in stores:
        store.close()


# -- links are recorded as links ----------------------------------------------

LINKS = {
    "absolute-to-outside-file": lambda w: (w.ws / "x.txt", w.secret),
    "relative-to-outside-file": lambda w: (w.ws / "x.txt", Path("../outside/secret.txt")),
    "to-agent-secrets": lambda w: (w.ws / "x.txt", w.paths.root / "secrets.toml"),
    "chain-to-outside": lambda w: (w.ws / "x.txt", w.ws / "hop.txt"),
    "nested-to-outside": lambda w: (w.ws / "deep" / "er" / "x.txt", w.secret),
}


@SCANS
@pytest.mark.parametrize("kind", list(LINKS))
def test_a_link_to_a_file_is_recorded_as_a_link(world: World, fresh, watch: bool, kind: str):
    store = fresh(watch)
    link, pointee = LINKS[kind](world)
    (world.ws / "hop.txt").symlink_to(world.secret)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(pointee)
    store.record_person()
    rel = link.relative_to(world.ws).as_posix()
    assert tree_modes(store)[rel] == "120000"
    assert show(store.gitdir, f"HEAD:{rel}") == os.fsencode(str(pointee))
    assert not history_holds(store.gitdir, OUTSIDE_SECRET)
    assert not history_holds(store.gitdir, AGENT_SECRET)


@SCANS
@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_a_link_to_an_outside_folder_is_recorded_as_a_link(
    world: World, fresh, watch: bool, relative: bool
):
    store = fresh(watch)
    (world.outside / "more").mkdir()
    (world.outside / "more" / "token").write_text(OUTSIDE_SECRET)
    (world.ws / "docs").symlink_to("../outside" if relative else world.outside)
    store.record_person()
    modes = tree_modes(store)
    assert modes["docs"] == "120000"
    assert not [p for p in modes if p.startswith("docs/")]
    assert not history_holds(store.gitdir, OUTSIDE_SECRET)


async def test_restoring_a_link_brings_back_the_link_not_the_content(world: World):
    (world.ws / "x.txt").symlink_to(world.secret)
    await world.call("file_write", path="other.txt", content="1")  # records the link
    version = world.git("log", "-1", "--format=%H").strip()
    (world.ws / "x.txt").unlink()
    (world.ws / "x.txt").write_text("replaced by hand\n")
    result = await world.call("file_restore", path="x.txt", version=version)
    assert not result.is_error, result.content
    assert (world.ws / "x.txt").is_symlink()
    assert os.readlink(world.ws / "x.txt") == str(world.secret)
    assert (await world.call("file_read", path="x.txt")).is_error
    assert workspace_holds(world.ws, OUTSIDE_SECRET) == []
    assert not history_holds(world.gitdir(), OUTSIDE_SECRET)


async def test_restoring_a_link_over_another_link_replaces_the_link_only(world: World):
    (world.ws / "x").symlink_to("notes.txt")
    await world.call("file_write", path="other.txt", content="1")
    version = world.git("log", "-1", "--format=%H").strip()
    (world.ws / "x").unlink()
    (world.ws / "x").symlink_to(world.secret)
    # (The tools refuse the name while it points outside; the restore itself
    # replaces a link without looking through it.)
    restore(agent_store(world), "x", version, ChangeNote("person", "restore x"))
    assert os.readlink(world.ws / "x") == "notes.txt"
    assert world.secret.read_text() == OUTSIDE_SECRET + "\n"
    assert not history_holds(world.gitdir(), OUTSIDE_SECRET)


# -- a swap at the worst moment, made deterministic ---------------------------


@SCANS
def test_a_file_swapped_for_a_link_between_listing_and_read_is_not_read(
    world: World, fresh, monkeypatch, watch: bool
):
    store = fresh(watch)
    target = world.ws / "secret.txt"
    target.write_text("innocent\n")
    link = swapping_pair(target, world.secret)
    real_read = WorkTree._read
    swaps = []

    def read_after_a_swap(self, folder, name, listed, device):
        if name == "secret.txt" and not swaps:
            exchange(target, link)  # the listing saw a file; the name is now a link
            swaps.append(name)
        return real_read(self, folder, name, listed, device)

    monkeypatch.setattr(WorkTree, "_read", read_after_a_swap)
    store.record_person()
    assert swaps
    assert not history_holds(store.gitdir, OUTSIDE_SECRET)
    assert [s.reason for s in store.skipped if s.path == "secret.txt"] == [CHANGED_MEANWHILE]
    exchange(target, link)
    monkeypatch.undo()
    store.record_person()  # the next version holds the real file
    assert show(store.gitdir, "HEAD:secret.txt") == b"innocent\n"


def _swap_before_opening(monkeypatch, folder: Path, link: Path) -> list[str]:
    """Make the recorder meet `folder` as a folder in its listing and as a link
    when it opens it."""
    real_open = WorkTree._open_folder
    swaps: list[str] = []

    def open_after_a_swap(self, index, rel, parent, name, listed, device):
        if name == folder.name and not swaps:
            exchange(folder, link)
            swaps.append(rel)
        return real_open(self, index, rel, parent, name, listed, device)

    monkeypatch.setattr(WorkTree, "_open_folder", open_after_a_swap)
    return swaps


@SCANS
def test_a_folder_swapped_for_a_link_between_listing_and_open_is_not_walked(
    world: World, fresh, monkeypatch, watch: bool
):
    store = fresh(watch)
    folder = world.ws / "d"
    folder.mkdir()
    (folder / "secret.txt").write_text("innocent\n")
    link = swapping_pair(folder, world.outside)
    swaps = _swap_before_opening(monkeypatch, folder, link)
    store.record_person()
    assert swaps == ["d"]
    assert not history_holds(store.gitdir, OUTSIDE_SECRET)
    assert ("d", CHANGED_MEANWHILE) in {(s.path, s.reason) for s in store.skipped}
    exchange(folder, link)
    monkeypatch.undo()
    store.record_person()
    assert show(store.gitdir, "HEAD:d/secret.txt") == b"innocent\n"


def test_a_folder_that_changed_meanwhile_keeps_its_earlier_record(
    world: World, fresh, monkeypatch
):
    store = fresh(False)
    folder = world.ws / "d"
    folder.mkdir()
    (folder / "secret.txt").write_text("innocent\n")
    store.record_person()
    (folder / "secret.txt").write_text("innocent, edited\n")
    link = swapping_pair(folder, world.outside)
    swaps = _swap_before_opening(monkeypatch, folder, link)
    store.record_person()
    assert swaps == ["d"]
    # Neither the outside file nor a false deletion: the earlier record stays.
    assert show(store.gitdir, "HEAD:d/secret.txt") == b"innocent\n"
    assert not history_holds(store.gitdir, OUTSIDE_SECRET)
    exchange(folder, link)


def test_a_parent_folder_that_is_a_link_records_nothing_below_it(world: World, fresh):
    """An agent write's path whose folder turned into a link: the forced path is
    looked up component by component, never through the link."""
    store = fresh(True)
    (world.ws / "d").mkdir()
    agent_write(store, "d/secret.txt", b"innocent\n")
    (world.ws / "d").rename(world.ws / "d.real")
    (world.ws / "d").symlink_to(world.outside)
    store.record(ChangeNote("agent", "shell_execute: mv", 3, "shell_execute"), ["d/secret.txt"])
    modes = tree_modes(store)
    assert "d/secret.txt" not in modes  # gone from where the history looks
    assert not history_holds(store.gitdir, OUTSIDE_SECRET)
    store.record_person()  # and the next look records the link as a link
    assert tree_modes(store)["d"] == "120000"


# -- the stat cache -----------------------------------------------------------


@SCANS
def test_a_file_replaced_with_the_same_size_and_times_is_read_again(
    world: World, fresh, watch: bool
):
    store = fresh(watch)
    path = world.ws / "same.txt"
    path.write_text("AAAA\n")
    old = time.time() - 3600  # old enough for its hash to be trusted
    os.utime(path, (old, old))
    store.record_person()
    replacement = world.ws / "other-inode"
    replacement.write_text("BBBB\n")
    os.utime(replacement, (old, old))
    replacement.rename(path)  # same name, size and mtime; another inode
    store.record_person()
    assert show(store.gitdir, "HEAD:same.txt") == b"BBBB\n"


@SCANS
def test_a_file_replaced_by_a_link_is_never_taken_from_the_cache(
    world: World, fresh, watch: bool
):
    store = fresh(watch)
    path = world.ws / "cached.txt"
    path.write_text("innocent\n")
    old = time.time() - 3600
    os.utime(path, (old, old))
    store.record_person()
    path.unlink()
    path.symlink_to(world.secret)
    os.utime(path, (old, old), follow_symlinks=False)
    store.record_person()
    assert tree_modes(store)["cached.txt"] == "120000"
    assert not history_holds(store.gitdir, OUTSIDE_SECRET)


# -- another file system mounted inside the workspace --------------------------

_MOUNTED_CHILD = r"""
import json, sys
from pathlib import Path
from noema.security.history import Authors
from noema.security.history import ChangeNote
from noema.security.undo import restore
from noema.security.versioning import VersionStore
ws, gitdir, secret = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
(ws / "mnt" / "token.txt").write_text(secret)
(ws / "plain.txt").write_text("plain\n")
store = VersionStore(ws, gitdir, authors=Authors("a", "a@l", "n", "n@l"), watch_changes=False)
store.record_person()
print(json.dumps([[s.path, s.reason] for s in store.skipped]))
store.close()
"""


@pytest.mark.skipif(not BWRAP, reason="needs bubblewrap to mount a file system in a namespace")
def test_a_file_system_mounted_inside_the_workspace_is_not_recorded(world: World):
    (world.ws / "mnt").mkdir()
    gitdir = world.base / "mounted.git"
    done = subprocess.run(
        [
            "bwrap", "--dev-bind", "/", "/", "--tmpfs", str(world.ws / "mnt"), "--",
            sys.executable, "-c", _MOUNTED_CHILD, str(world.ws.resolve()), str(gitdir),
            OUTSIDE_SECRET,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["mnt", OTHER_FILE_SYSTEM]]
    modes = tree_modes(gitdir)
    assert "plain.txt" in modes and not [p for p in modes if p.startswith("mnt")]
    assert not history_holds(gitdir, OUTSIDE_SECRET)


# -- races against a separate swapping process ----------------------------------


def _decoy(world: World, where: str, kind: str) -> tuple[Path, Path, str]:
    """A workspace path that looks like the outside one: a folder holding an
    innocent `secret.txt`, or an innocent file; and a link to the outside twin."""
    base = world.ws / where if where else world.ws
    base.mkdir(parents=True, exist_ok=True)
    if kind == "folder":
        real = base / "d"
        real.mkdir()
        (real / "secret.txt").write_text("innocent\n")
        link = swapping_pair(real, world.outside)
        inner = f"{where}/d/secret.txt" if where else "d/secret.txt"
    else:
        real = base / "secret.txt"
        real.write_text("innocent\n")
        link = swapping_pair(real, world.secret)
        inner = f"{where}/secret.txt" if where else "secret.txt"
    return real, link, inner


RACES = pytest.mark.parametrize(
    "kind,where",
    [("folder", ""), ("folder", "a/b"), ("file", ""), ("file", "a/b")],
    ids=["folder-top", "folder-nested", "file-top", "file-nested"],
)


@RACES
def test_snapshots_stay_clean_while_a_path_and_a_link_trade_places(
    world: World, kind: str, where: str
):
    """The recorder alone, as after a shell command: full walks and walks of
    what the kernel reported, while the person keeps editing."""
    real, link, _ = _decoy(world, where, kind)
    walker = open_store(world, "walker", watch=False)
    watcher = open_store(world, "watcher", watch=True)
    rounds = 0
    try:
        with Swapper(real, link, limit=400_000, seconds=2.0) as swapper:
            end = time.monotonic() + 1.5
            while time.monotonic() < end and rounds < 2000:
                rounds += 1
                (world.ws / "edited.txt").write_text(f"{rounds}\n")
                walker.record_person()
                watcher.record_person()
        assert swapper.swaps > 0 and rounds > 0
        for store in (walker, watcher):
            assert not history_holds(store.gitdir, OUTSIDE_SECRET), store.gitdir
            store.record_person()  # once the names are back, the decoy is recorded
            assert b"innocent" in show(store.gitdir, f"HEAD:{_inner(kind, where)}")
    finally:
        walker.close()
        watcher.close()


def _inner(kind: str, where: str) -> str:
    name = "d/secret.txt" if kind == "folder" else "secret.txt"
    return f"{where}/{name}" if where else name


@RACES
async def test_history_stays_clean_while_a_path_and_a_link_trade_places(
    world: World, kind: str, where: str
):
    real, link, inner = _decoy(world, where, kind)
    first = await world.call("file_write", path="other.txt", content="0\n")
    assert not first.is_error, first.content
    innocent_version = world.git("log", "-1", "--format=%H").strip()
    store = agent_store(world)
    scanner = open_store(world, "scanner", watch=False)  # a full walk every time
    steps = [
        lambda n: world.call("file_write", path="other.txt", content=f"{n}\n"),
        lambda n: world.call("file_restore", path=inner, version=innocent_version),
        lambda n: world.call("file_write", path=inner, content=f"innocent {n}\n"),
    ]
    rounds = 0
    try:
        with Swapper(real, link, limit=400_000, seconds=2.0) as swapper:
            end = time.monotonic() + 1.5
            while time.monotonic() < end and rounds < 1000:
                rounds += 1
                result = await steps[rounds % len(steps)](rounds)
                assert OUTSIDE_SECRET not in result.content
                store.record_person()
                scanner.record_person()
        assert swapper.swaps > 0 and rounds > 0
        for gitdir in (world.gitdir(), scanner.gitdir):
            assert not history_holds(gitdir, OUTSIDE_SECRET), gitdir
        # Bringing back versions of the decoy (a spread of them) never yields
        # the outside file.
        versions = world.git("log", "--format=%H").split()
        for version in versions[:: max(1, len(versions) // 20)]:
            await world.call("file_restore", path=inner, version=version)
        assert workspace_holds(world.ws, OUTSIDE_SECRET) == []
        assert world.secret.read_text() == OUTSIDE_SECRET + "\n"
        assert not history_holds(world.gitdir(), OUTSIDE_SECRET)
    finally:
        scanner.close()
