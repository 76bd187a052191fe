"""Class 2: a file with other hard links follows one rule on every path.

Another name of a hard-linked file may lie outside the folders the agent may
use (the person's `~/.config`, say). Its content is never read, replaced or
recorded, whether by a file tool, a restore, an undo or the history, unless
the person allowed hard links; then the link is broken, never written through.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path, PurePosixPath

import pytest

from noema.interfaces.commands import versions as versions_cli
from noema.interfaces.commands.versions import VersionsCommandError
from noema.security import fsafe
from noema.security.policy import AccessDenied
from noema.security.settings import FilesSettings

from ..world import BWRAP, OUTSIDE_SECRET, World
from .history_scan import (
    agent_store,
    agent_write,
    history_holds,
    open_store,
    show,
    tree_modes,
    workspace_holds,
)

SCANS = pytest.mark.parametrize("watch", [True, False], ids=["notifications", "full-scan"])


def _outside_untouched(world: World) -> None:
    assert world.secret.read_text() == OUTSIDE_SECRET + "\n"
    assert world.secret.stat().st_nlink == 2  # the person's link is not broken either


# -- the rule itself -----------------------------------------------------------


def test_the_rule_accepts_a_plain_file(tmp_path: Path):
    path = tmp_path / "plain.txt"
    path.write_text("x")
    assert fsafe.unsafe_file(path.lstat()) is None


@pytest.mark.parametrize("kind", ["folder", "fifo", "socket"])
def test_the_rule_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str):
    path = tmp_path / "thing"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))
    refusal = fsafe.unsafe_file(path.lstat())
    assert refusal is not None and not refusal.denied
    assert ("folder" if kind == "folder" else "not a regular file") in refusal.reason


def test_the_rule_refuses_a_second_hard_link_unless_allowed(tmp_path: Path):
    path = tmp_path / "a.txt"
    path.write_text("x")
    os.link(path, tmp_path / "b.txt")
    refusal = fsafe.unsafe_file(path.lstat())
    assert refusal is not None and refusal.denied and "2 hard links" in refusal.reason
    assert isinstance(refusal.error("a.txt"), AccessDenied)
    assert fsafe.unsafe_file(path.lstat(), allow_hard_links=True) is None


def test_the_rule_refuses_another_file_system(tmp_path: Path):
    path = tmp_path / "a.txt"
    path.write_text("x")
    info = path.lstat()
    refusal = fsafe.unsafe_file(info, device=info.st_dev + 1)
    assert refusal is not None and refusal.denied and "another file system" in refusal.reason
    assert fsafe.unsafe_file(info, device=info.st_dev) is None


# -- the history ---------------------------------------------------------------


@SCANS
def test_the_recorder_leaves_out_a_hard_link_to_an_outside_file(world: World, watch: bool):
    store = open_store(world, "s", watch=watch)
    try:
        agent_write(store, "start.txt", b"start\n")
        os.link(world.secret, world.ws / "token.txt")
        (world.ws / "plain.txt").write_text("plain\n")
        version = store.record_person()
        assert version is not None and "plain.txt" in version.paths
        assert "token.txt" not in tree_modes(store)
        assert not history_holds(store.gitdir, OUTSIDE_SECRET)
        assert [s.path for s in store.skipped] == ["token.txt"]
        assert "2 hard links" in store.skipped[0].reason
        assert [s.path for s in store.left_out()] == ["token.txt"]
    finally:
        store.close()
    _outside_untouched(world)


def test_a_tracked_file_that_becomes_a_hard_link_leaves_the_history(world: World):
    store = open_store(world, "s", watch=True)
    try:
        agent_write(store, "a.txt", b"mine\n")
        os.link(world.ws / "a.txt", world.ws / "b.txt")
        store.record_person()
        modes = tree_modes(store)
        assert "a.txt" not in modes and "b.txt" not in modes
        assert {s.path for s in store.skipped} == {"a.txt", "b.txt"}
        assert show(store.gitdir, "HEAD~1:a.txt") == b"mine\n"  # the earlier version stays
    finally:
        store.close()


def test_the_person_may_allow_hard_links_in_the_history(world: World):
    store = open_store(world, "s", watch=False, allow_hard_links=True)
    try:
        agent_write(store, "start.txt", b"start\n")
        (world.outside / "shared.txt").write_text("shared on purpose\n")
        os.link(world.outside / "shared.txt", world.ws / "shared.txt")
        store.record_person()
        assert show(store.gitdir, "HEAD:shared.txt") == b"shared on purpose\n"
        assert store.skipped == ()
    finally:
        store.close()


def test_a_left_out_hard_link_is_named_once_not_on_every_scan(world: World):
    store = open_store(world, "s", watch=False)
    try:
        agent_write(store, "start.txt", b"start\n")
        os.link(world.secret, world.ws / "token.txt")
        store.record_person()
        assert [s.path for s in store.skipped] == ["token.txt"]
        (world.ws / "start.txt").write_text("edited\n")
        store.record_person()
        assert store.skipped == ()
        os.link(world.secret, world.outside / "third-name")  # its state changes
        store.record_person()
        assert [s.reason for s in store.skipped] == [store.left_out()[0].reason]
        assert "3 hard links" in store.skipped[0].reason
    finally:
        store.close()


# -- the file tools, restore and undo ------------------------------------------

REFUSING_TOOLS = {
    "file_read": lambda v: {"path": "token.txt"},
    "file_write": lambda v: {"path": "token.txt", "content": "pwned"},
    "file_search_and_replace": lambda v: {
        "path": "token.txt", "old_text": "TOP", "new_text": "X",
    },
    "file_patch": lambda v: {
        "path": "token.txt",
        "unified_diff": f"@@ -1 +1 @@\n-{OUTSIDE_SECRET}\n+pwned\n",
    },
    "file_restore": lambda v: {"path": "token.txt", "version": v},
}


@pytest.mark.parametrize("tool", list(REFUSING_TOOLS))
async def test_every_file_tool_refuses_a_hard_linked_file(world: World, tool: str):
    (world.ws / "token.txt").write_text("innocent\n")
    await world.call("file_write", path="other.txt", content="1")
    innocent = world.git("log", "-1", "--format=%H").strip()
    (world.ws / "token.txt").unlink()
    os.link(world.secret, world.ws / "token.txt")
    result = await world.call(tool, **REFUSING_TOOLS[tool](innocent))
    assert result.is_error and "hard link" in result.content, result.content
    assert OUTSIDE_SECRET not in result.content
    _outside_untouched(world)
    assert not history_holds(world.gitdir(), OUTSIDE_SECRET)


async def test_restore_no_longer_hands_back_a_hard_linked_file(world: World):
    """The reported attack: restore recorded the linked file first, broke the
    link, and a second restore brought its content into the workspace."""
    (world.ws / "token.txt").write_text("innocent\n")
    await world.call("file_write", path="other.txt", content="1")
    innocent = world.git("log", "-1", "--format=%H").strip()
    (world.ws / "token.txt").unlink()
    os.link(world.secret, world.ws / "token.txt")
    first = await world.call("file_restore", path="token.txt", version=innocent)
    assert first.is_error
    for version in world.git("log", "--format=%H").split():
        await world.call("file_restore", path="token.txt", version=version)
    (world.ws / "token.txt").unlink()  # the person removes the link
    for version in world.git("log", "--format=%H").split():
        await world.call("file_restore", path="token.txt", version=version)
    assert workspace_holds(world.ws, OUTSIDE_SECRET) == []
    assert not history_holds(world.gitdir(), OUTSIDE_SECRET)
    assert world.secret.read_text() == OUTSIDE_SECRET + "\n"


async def test_file_history_of_a_hard_linked_file_records_no_content(world: World):
    await world.call("file_write", path="other.txt", content="1")
    os.link(world.secret, world.ws / "token.txt")
    result = await world.call("file_history", path="token.txt")
    assert not result.is_error and OUTSIDE_SECRET not in result.content
    assert not history_holds(world.gitdir(), OUTSIDE_SECRET)


def test_restoring_a_link_over_a_hard_linked_file_is_refused(world: World):
    store = open_store(world, "s", watch=False)
    try:
        (world.ws / "x").symlink_to("elsewhere")
        agent_write(store, "start.txt", b"start\n")
        version = store.head()
        (world.ws / "x").unlink()
        os.link(world.secret, world.ws / "x")
        from noema.security.history import ChangeNote
        from noema.security.undo import restore

        with pytest.raises(AccessDenied, match="hard links"):
            restore(store, "x", str(version.id), ChangeNote("agent", "file_restore x"))
        assert (world.ws / "x").stat().st_nlink == 2 and not (world.ws / "x").is_symlink()
    finally:
        store.close()
    _outside_untouched(world)


async def test_undo_refuses_when_the_file_became_a_hard_link(world: World):
    await world.call("file_write", path="a.txt", content="agent\n")
    (world.ws / "a.txt").unlink()
    os.link(world.secret, world.ws / "a.txt")
    world.close()
    with pytest.raises(VersionsCommandError, match="has 2 hard links.*Nothing was changed"):
        versions_cli.undo(world.settings().files, world.paths)
    _outside_untouched(world)
    assert (world.ws / "a.txt").stat().st_nlink == 2
    assert not history_holds(world.gitdir(), OUTSIDE_SECRET)


async def test_noema_restore_refuses_a_hard_linked_file(world: World):
    await world.call("file_write", path="a.txt", content="agent\n")
    version = world.git("log", "-1", "--format=%h").strip()
    (world.ws / "a.txt").unlink()
    os.link(world.secret, world.ws / "a.txt")
    world.close()
    with pytest.raises(VersionsCommandError, match="hard links"):
        versions_cli.restore(world.settings().files, world.paths, "a.txt", version)
    _outside_untouched(world)
    assert not history_holds(world.gitdir(), OUTSIDE_SECRET)


async def test_noema_restore_breaks_the_link_when_hard_links_are_allowed(world: World):
    await world.call("file_write", path="a.txt", content="agent\n")
    version = world.git("log", "-1", "--format=%h").strip()
    (world.outside / "shared.txt").write_text("shared\n")
    (world.ws / "a.txt").unlink()
    os.link(world.outside / "shared.txt", world.ws / "a.txt")
    world.close()
    files = world.settings().files
    allowed = FilesSettings(**{**files.model_dump(), "allow_hard_links": True})
    versions_cli.restore(allowed, world.paths, "a.txt", version)
    assert (world.ws / "a.txt").read_text() == "agent\n"
    assert (world.outside / "shared.txt").read_text() == "shared\n"  # never written through
    assert (world.ws / "a.txt").stat().st_nlink == 1


def test_atomic_write_refuses_a_special_file_at_the_name(tmp_path: Path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(fsafe.ToolError, match="not a regular file"):
        fsafe.atomic_write(tmp_path, PurePosixPath("pipe"), b"x")
    assert stat.S_ISFIFO((tmp_path / "pipe").lstat().st_mode)


@pytest.mark.skipif(not BWRAP, reason="needs bubblewrap for the sandboxed shell")
async def test_a_hard_link_made_by_a_command_is_left_out_and_named(world: World):
    await world.call("file_write", path="a.txt", content="agent\n")
    result = await world.call("shell_execute", command="ln a.txt b.txt && echo done")
    assert not result.is_error and "done" in result.content, result.content
    store = agent_store(world)
    # The new name is left out and named; the kernel does not report the old
    # name's new link count, so its earlier (legitimate) version stays until
    # something looks at it again, and nothing reads it meanwhile.
    assert [s.path for s in store.skipped] == ["b.txt"]
    assert "b.txt" not in tree_modes(world.gitdir())
    refused = await world.call("file_write", path="a.txt", content="again\n")
    assert refused.is_error and "hard link" in refused.content
    world.close()
    shown = versions_cli.diff(world.settings().files, world.paths)
    assert "a.txt has 2 hard links" in shown and "b.txt has 2 hard links" in shown
