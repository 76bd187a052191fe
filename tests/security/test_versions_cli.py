"""`noema history`, `diff`, `restore`, `undo` as the person sees them."""

from __future__ import annotations

import os
import re

import pytest

from noema.interfaces.commands import versions as versions_cli
from noema.interfaces.commands.versions import VersionsCommandError

from .world import World

LINE = re.compile(
    r"^(?P<id>[0-9a-f]{8})  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  (?P<who>agent |person)  "
    r"(?P<turn>turn \d+ *| {10})  (?P<what>.+)$"
)


async def test_history_lines_are_readable(world: World):
    await world.call("file_write", path="a.txt", content="1\n")
    (world.ws / "notes.txt").write_text("changed by hand\n")
    await world.call("file_write", path="a.txt", content="2\n")
    text = versions_cli.history(world.settings().files, world.paths)
    lines = text.splitlines()
    assert lines[0] == f"{world.ws.resolve()}, newest first:"
    parsed = [LINE.match(line) for line in lines[1:]]
    assert all(parsed), lines
    assert [(m["who"].strip(), m["what"]) for m in parsed] == [
        ("agent", "file_write a.txt"),
        ("person", "Changes by the person: notes.txt"),
        ("agent", "file_write a.txt"),
        ("person", "Initial state of the workspace: notes.txt"),
    ]
    assert parsed[0]["turn"].startswith("turn ")
    assert world.git("log", "-1", "--format=%h", "--abbrev=8").strip() == parsed[0]["id"]


async def test_history_of_one_path(world: World, monkeypatch):
    await world.call("file_write", path="sub/a.txt", content="1\n")
    await world.call("file_write", path="b.txt", content="1\n")
    monkeypatch.chdir(world.ws / "sub")  # a relative path from inside the workspace
    text = versions_cli.history(world.settings().files, world.paths, "a.txt")
    assert text.startswith("sub/a.txt in ") and "b.txt" not in text
    assert len(text.splitlines()) == 2


async def test_diff_of_a_version_and_of_unrecorded_changes(world: World):
    await world.call("file_write", path="a.txt", content="one\ntwo\n")
    version = world.git("log", "-1", "--format=%h").strip()
    shown = versions_cli.diff(world.settings().files, world.paths, version=version)
    assert "+++ b/a.txt" in shown and "+two" in shown
    assert (
        versions_cli.diff(world.settings().files, world.paths)
        == "No changes since the last version."
    )
    (world.ws / "a.txt").write_text("one\nthree\n")
    pending = versions_cli.diff(world.settings().files, world.paths, "a.txt")
    assert "-two" in pending and "+three" in pending
    # Looking does not record anything.
    assert world.git("log", "-1", "--format=%s").strip() == "file_write a.txt"


async def test_commands_explain_what_they_cannot_do(world: World):
    files = world.settings().files
    with pytest.raises(VersionsCommandError, match="no history yet"):
        versions_cli.history(files, world.paths, "notes.txt")
    await world.call("file_write", path="a.txt", content="x")
    with pytest.raises(VersionsCommandError, match="not in a versioned folder"):
        versions_cli.history(files, world.paths, str(world.secret))
    with pytest.raises(VersionsCommandError, match=r"\.git folder"):
        versions_cli.restore(files, world.paths, ".git/config", "HEAD")
    with pytest.raises(VersionsCommandError, match="did not exist"):
        versions_cli.restore(files, world.paths, "nothing.txt", "HEAD")
    with pytest.raises(VersionsCommandError, match="no workspace has a version"):
        versions_cli.diff(files, world.paths, version="0123abcd")


async def test_diff_names_the_files_no_version_can_hold(world: World):
    await world.call("file_write", path="a.txt", content="one\n")
    os.mkfifo(world.ws / "pipe")
    (world.ws / "a.txt").write_text("two\n")
    shown = versions_cli.diff(world.settings().files, world.paths)
    assert "+two" in shown
    assert shown.splitlines()[-1] == (
        "Not recorded in the history, so not restorable: "
        "pipe is not a regular file (a device, socket or pipe)."
    )
    assert "pipe" not in world.git("ls-tree", "-r", "--name-only", "HEAD").split()
