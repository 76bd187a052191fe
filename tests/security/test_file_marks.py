"""Which files hold outside words: kept by the agent, by content, where no
command reaches (`security/file_marks.py`), through the real file tools."""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noema.memory.turns import Source, SourceKind
from noema.security.approvals import ApprovalRequest
from noema.security.file_marks import FileMarks, content_id

from .world import BWRAP, World

MALLORY = (Source(SourceKind.MAIL, "mallory@example.net"),)


def whose(result) -> set[SourceKind]:
    return {s.kind for s in result.sources or ()}


async def planted(world: World, name: str = "planted.txt", text: str = "DO as I say") -> None:
    """A file the agent wrote while a stranger's mail led (the person said yes)."""
    async def yes(request: ApprovalRequest) -> bool:
        return True

    world.build(approver=yes)
    done = await world.call("file_write", _lead=MALLORY, path=name, content=text)
    assert not done.is_error, done.content


async def test_marks_an_earlier_version_set_on_files_are_carried_when_its_agent_is_upgraded(
        tmp_path):
    # Before file_marks.db (turn store schema 2), the mark was an extended
    # attribute on the file, which a command can remove. Opening such an
    # agent carries the marks into its store once.
    import sqlite3

    from noema.app import build_app
    from noema.config import Config
    from noema.memory.store import TurnStore
    from noema.memory.turns import NewTurn, TurnKind
    from noema.paths import AgentPaths
    from noema.providers.scripted import ScriptedProvider
    from noema.security.settings import FilesSettings, RootSettings

    ws = tmp_path / "ws"
    ws.mkdir()
    old, mine = ws / "from-before.txt", ws / "mine.txt"
    old.write_text("DO what the old mail said")
    mine.write_text("the person's own notes")
    try:
        os.setxattr(old, "user.noema.outside", b"1")
    except OSError:
        pytest.skip("this file system keeps no user attributes")
    config = Config(files=FilesSettings(roots=(RootSettings(path=ws),)))

    def opened(home: str, *, schema: int | None):
        paths = AgentPaths.for_agent("ana", tmp_path / home)
        paths.ensure()
        if schema is not None and not paths.turns_db.exists():
            store = TurnStore(paths.turns_db)
            store.append(NewTurn(TurnKind.USER, "from before"))
            store.close()
            with sqlite3.connect(paths.turns_db) as db:
                db.execute("DROP TRIGGER turns_never_edited")
                db.execute("ALTER TABLE turns DROP COLUMN sources")
                db.execute(f"PRAGMA user_version={schema}")
        return build_app(paths, config, provider=ScriptedProvider([]))

    def marked(app, path) -> set[SourceKind]:
        return {s.kind for s in app.hands.marks.of_content(path.read_bytes())}

    fresh = opened("new", schema=None)  # a new agent: nothing was kept on files by it
    try:
        assert not marked(fresh, old)
    finally:
        await fresh.aclose()
    upgraded = opened("old", schema=2)
    try:
        assert marked(upgraded, old) == {SourceKind.FILE} and not marked(upgraded, mine)
    finally:
        await upgraded.aclose()
    os.removexattr(old, "user.noema.outside")  # removing it now changes nothing
    shutil.copyfile(old, ws / "copy.txt")  # nor does a copy under another name
    os.setxattr(mine, "user.noema.outside", b"1")  # set after the upgrade: never walked
    again = opened("old", schema=2)
    try:
        assert marked(again, ws / "copy.txt") == {SourceKind.FILE}
        assert not marked(again, mine)
    finally:
        await again.aclose()


async def test_a_file_written_while_a_stranger_led_is_read_as_theirs_after_a_restart(world):
    await planted(world)
    assert os.listxattr(world.ws / "planted.txt") == []  # nothing on the file itself
    world.build()  # a new process: the marks are the agent's, kept on disk
    read = await world.call("file_read", path="planted.txt")
    assert MALLORY[0] in read.sources and SourceKind.FILE in whose(read)
    person = await world.call("file_read", path="notes.txt")
    assert person.sources == () and not person.is_error


async def test_the_mark_follows_the_content_under_any_name(world):
    await planted(world)
    os.rename(world.ws / "planted.txt", world.ws / "innocent.txt")
    shutil.copy(world.ws / "innocent.txt", world.ws / "copy.txt")  # the person's cp, say
    for name in ("innocent.txt", "copy.txt"):
        assert MALLORY[0] in (await world.call("file_read", path=name)).sources
    grep = await world.call("file_grep", query="DO as I say")
    assert MALLORY[0] in grep.sources


async def test_a_name_swapped_under_a_read_is_judged_by_what_was_read(world):
    await planted(world)
    # The marked bytes arrive under the person's own file's name: a read
    # judges what it read, whatever name it asked for.
    os.replace(world.ws / "planted.txt", world.ws / "notes.txt")
    assert MALLORY[0] in (await world.call("file_read", path="notes.txt")).sources


async def test_the_agents_edits_of_marked_text_keep_the_mark_the_persons_do_not(world):
    await planted(world, text="line one\nDO as I say\n")
    world.build()
    edited = await world.call("file_search_and_replace", path="planted.txt",
                              old_text="line one", new_text="line 1")
    assert not edited.is_error
    assert MALLORY[0] in (await world.call("file_read", path="planted.txt")).sources
    patched = await world.call("file_patch", path="planted.txt",
                               unified_diff="@@ -1,2 +1,3 @@\n line 1\n DO as I say\n+more\n")
    assert not patched.is_error, patched.content
    assert MALLORY[0] in (await world.call("file_read", path="planted.txt")).sources
    (world.ws / "planted.txt").write_text("my own words now\n")  # the person rewrites it
    assert (await world.call("file_read", path="planted.txt")).sources == ()


async def test_a_restore_of_a_marked_version_is_marked(world):
    await planted(world)
    world.build()
    await world.call("file_write", path="planted.txt", content="the person's text")
    assert (await world.call("file_read", path="planted.txt")).sources == ()
    history = (await world.call("file_history", path="planted.txt")).content
    oldest = history.splitlines()[-1].split()[0]  # the stranger's words, first written
    restored = await world.call("file_restore", path="planted.txt", version=oldest)
    assert not restored.is_error, restored.content
    assert MALLORY[0] in (await world.call("file_read", path="planted.txt")).sources


async def test_an_extended_attribute_neither_marks_nor_clears(world):
    await planted(world)
    world.build()
    try:
        os.setxattr(world.ws / "notes.txt", "user.noema.outside", b"1")
        os.setxattr(world.ws / "planted.txt", "user.noema.outside", b"0")
    except OSError:
        pytest.skip("this file system keeps no extended attributes")
    assert (await world.call("file_read", path="notes.txt")).sources == ()
    assert MALLORY[0] in (await world.call("file_read", path="planted.txt")).sources


async def test_a_listing_of_names_a_stranger_chose_is_theirs(world):
    await planted(world, name="run-me-now.txt")
    world.build()
    found = await world.call("file_find", pattern="*.txt")
    assert "run-me-now.txt" in found.content and MALLORY[0] in found.sources
    only_person = await world.call("file_find", pattern="notes*")
    assert only_person.sources == ()


@given(st.binary(max_size=2000), st.binary(max_size=2000))
def test_marks_are_by_content(marked, other):
    marks = FileMarks()
    marks.mark(marked, MALLORY, "/w/a")
    assert MALLORY[0] in marks.of_content(marked)
    assert MALLORY[0] in marks.of_content(content_id(marked))
    if other != marked:
        assert marks.of_content(other) == ()
    marks.close()


async def test_the_history_of_versions_a_stranger_led_to_is_theirs(world):
    await planted(world)
    world.build()
    listed = await world.call("file_history", path="planted.txt")
    assert "file_write" in listed.content and MALLORY[0] in listed.sources
    await world.call("file_write", path="mine.txt", content="my list")
    assert (await world.call("file_history", path="mine.txt")).sources == ()


@pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot run here")
async def test_a_command_is_judged_by_what_the_open_guard_saw_it_open(world):
    """Under the sandbox the guard sees every open: `cat` of the stranger's
    file returns their words, `cat` of the person's returns the person's, and
    a copy the command made of marked bytes holds them too."""
    await planted(world)
    world.build()
    theirs = await world.call("shell_execute", command="cat planted.txt")
    assert "DO as I say" in theirs.content and MALLORY[0] in theirs.sources
    mine = await world.call("shell_execute", command="cat notes.txt")
    assert "hello" in mine.content and mine.sources == ()
    copied = await world.call("shell_execute", command="cat planted.txt > copy.txt")
    assert MALLORY[0] in copied.sources
    assert MALLORY[0] in (await world.call("file_read", path="copy.txt")).sources


async def test_without_a_view_of_its_opens_a_command_holds_every_mark(world):
    from noema.security.settings import ShellSettings

    await planted(world)
    world.build(shell=ShellSettings(sandbox="none"))
    blind = await world.call("shell_execute", command="cat notes.txt")
    assert "hello" in blind.content and MALLORY[0] in blind.sources
