"""Undo and restore never lose the person's edits."""

from __future__ import annotations

from pathlib import Path

import pytest

from noema.interfaces.commands import versions as versions_cli
from noema.interfaces.commands.versions import VersionsCommandError

from .world import BWRAP, World


def files_of(world: World):
    return world.settings().files


def undo(world: World) -> str:
    return versions_cli.undo(files_of(world), world.paths)


async def test_undo_reverts_the_agent_edit_to_the_person_version(world: World):
    (world.ws / "notes.txt").write_text("person's text\n")
    await world.call("file_write", path="notes.txt", content="agent's text\n")
    message = undo(world)
    assert "file_write notes.txt" in message
    assert (world.ws / "notes.txt").read_text() == "person's text\n"


async def test_undo_refuses_when_the_person_edited_the_file_since(world: World):
    await world.call("file_write", path="notes.txt", content="agent's text\n")
    (world.ws / "notes.txt").write_text("agent's text\nplus the person's line\n")
    with pytest.raises(VersionsCommandError) as refused:
        undo(world)
    assert "notes.txt was changed after it by the person" in str(refused.value)
    assert "Nothing was changed" in str(refused.value)
    assert (world.ws / "notes.txt").read_text() == "agent's text\nplus the person's line\n"
    # The refusal recorded the person's edit: it is in the history now.
    assert "plus the person's line" in world.git("show", "HEAD:notes.txt")


async def test_undo_refuses_when_the_person_deleted_the_file_since(world: World):
    await world.call("file_write", path="draft.txt", content="agent's draft\n")
    (world.ws / "draft.txt").unlink()
    with pytest.raises(
        VersionsCommandError, match=r"draft\.txt was changed after it by the person"
    ):
        undo(world)
    assert not (world.ws / "draft.txt").exists()


async def test_undo_keeps_the_person_edits_to_other_files(world: World):
    await world.call("file_write", path="a.txt", content="agent\n")
    (world.ws / "notes.txt").write_text("the person kept working\n")
    (world.ws / "fresh.txt").write_text("a new file of the person\n")
    undo(world)
    assert not (world.ws / "a.txt").exists()
    assert (world.ws / "notes.txt").read_text() == "the person kept working\n"
    assert (world.ws / "fresh.txt").read_text() == "a new file of the person\n"


async def test_successive_undos_walk_back_and_then_stop(world: World):
    await world.call("file_write", path="a.txt", content="1\n")
    await world.call("file_write", path="a.txt", content="2\n")
    await world.call("file_search_and_replace", path="a.txt", old_text="2", new_text="3")
    undo(world)
    assert (world.ws / "a.txt").read_text() == "2\n"
    undo(world)
    assert (world.ws / "a.txt").read_text() == "1\n"
    undo(world)
    assert not (world.ws / "a.txt").exists()
    with pytest.raises(VersionsCommandError, match="nothing to undo"):
        undo(world)
    assert (world.ws / "notes.txt").read_text() == "hello\nworld\n"


async def test_undo_after_a_refusal_works_once_the_person_restores(world: World):
    await world.call("file_write", path="a.txt", content="agent\n")
    (world.ws / "a.txt").write_text("person\n")
    with pytest.raises(VersionsCommandError):
        undo(world)
    (world.ws / "a.txt").write_text("agent\n")  # the person puts it back as the agent left it
    undo(world)
    assert not (world.ws / "a.txt").exists()
    # The person's intermediate edit is still in the history.
    assert "person\n" in world.git("log", "-p", "--", "a.txt")


@pytest.mark.skipif(not BWRAP, reason="needs bubblewrap")
async def test_undo_of_a_shell_command_reverts_all_its_files(world: World):
    (world.ws / "keep.txt").write_text("keep\n")
    result = await world.call(
        "shell_execute", command="echo one > one.txt; echo two >> notes.txt; rm keep.txt"
    )
    assert "Files changed" in result.content
    undo(world)
    assert not (world.ws / "one.txt").exists()
    assert (world.ws / "notes.txt").read_text() == "hello\nworld\n"
    assert (world.ws / "keep.txt").read_text() == "keep\n"


async def test_restore_by_the_person_brings_back_a_version(world: World):
    await world.call("file_write", path="a.txt", content="first\n")
    first = world.git("log", "-1", "--format=%h").strip()
    await world.call("file_write", path="a.txt", content="second\n")
    message = versions_cli.restore(files_of(world), world.paths, "a.txt", first)
    assert "Restored a.txt" in message
    assert (world.ws / "a.txt").read_text() == "first\n"
    assert world.git("log", "-1", "--format=%an").strip() != "Noema (t)"


async def test_restore_of_a_link_brings_the_link_back(world: World):
    (world.ws / "link").symlink_to("notes.txt")
    await world.call("file_write", path="other.txt", content="x")  # records the link
    version = world.git("log", "-1", "--format=%h").strip()
    (world.ws / "link").unlink()
    (world.ws / "link").write_text("now a file\n")
    versions_cli.restore(files_of(world), world.paths, "link", version)
    assert (world.ws / "link").is_symlink() and (world.ws / "link").readlink() == Path("notes.txt")


async def test_restore_of_unknown_version_is_refused(world: World):
    await world.call("file_write", path="a.txt", content="x")
    with pytest.raises(VersionsCommandError, match="no version"):
        versions_cli.restore(files_of(world), world.paths, "a.txt", "deadbeef")
    assert (world.ws / "a.txt").read_text() == "x"
