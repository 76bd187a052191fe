"""The file tools as the model uses them."""

from __future__ import annotations

from tests.security.world import World


async def test_read_is_paginated(world: World):
    (world.ws / "long.txt").write_text("".join(f"row {n}\n" for n in range(1, 1201)))
    first = await world.call("file_read", path="long.txt")
    assert first.content.startswith("long.txt: lines 1-500 of 1200\nrow 1\n")
    assert first.content.endswith("[more: call file_read with offset=501]")
    page = await world.call("file_read", path="long.txt", offset=1190, limit=50)
    assert page.content.startswith("long.txt: lines 1190-1200 of 1200")
    assert "more:" not in page.content
    past = await world.call("file_read", path="long.txt", offset=5000)
    assert past.is_error and "1200 lines" in past.content


async def test_read_caps_huge_lines(world: World):
    (world.ws / "min.js").write_text("x" * 100_000 + "\nnext\n")
    result = await world.call("file_read", path="min.js")
    assert "[... line cut: 100000 characters in all]" in result.content
    assert len(result.content) < 10_000


async def test_read_refuses_binary_clearly(world: World):
    (world.ws / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (world.ws / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    png = await world.call("file_read", path="img.png")
    assert png.is_error and "looks binary" in png.content and "text" in png.content
    latin = await world.call("file_read", path="latin.txt")
    assert latin.is_error and "not UTF-8" in latin.content


async def test_write_creates_folders_and_reports_the_version(world: World):
    result = await world.call("file_write", path="a/b/c.md", content="# Title\n\ntext\n")
    assert result.content.startswith("Created a/b/c.md (14 bytes, 3 lines); version ")
    assert (world.ws / "a" / "b" / "c.md").read_text() == "# Title\n\ntext\n"
    again = await world.call("file_write", path="a/b/c.md", content="# Title\n\ntext\n")
    assert "no new version" in again.content


async def test_a_name_with_a_newline_is_refused_and_nothing_is_written(world: World):
    before = sorted(world.ws.iterdir())
    result = await world.call("file_write", path="notes\nfinal.txt", content="x")
    assert result.is_error and "control character (a newline)" in result.content
    assert sorted(world.ws.iterdir()) == before
    made = await world.call("file_mkdir", path="a\tb")
    assert made.is_error and "a tab" in made.content


async def test_write_onto_a_folder_is_refused(world: World):
    (world.ws / "dir").mkdir()
    result = await world.call("file_write", path="dir", content="x")
    assert result.is_error and "folder" in result.content and (world.ws / "dir").is_dir()


async def test_search_and_replace_needs_exactly_one_match(world: World):
    (world.ws / "code.py").write_text("a = 1\nb = 1\nc = 2\n")
    none = await world.call(
        "file_search_and_replace", path="code.py", old_text="d = 1", new_text="d = 3"
    )
    assert none.is_error and "not found" in none.content
    many = await world.call(
        "file_search_and_replace", path="code.py", old_text=" = 1", new_text=" = 5"
    )
    assert many.is_error and "occurs 2 times" in many.content and "lines 1, 2" in many.content
    one = await world.call(
        "file_search_and_replace", path="code.py", old_text="b = 1", new_text="b = 7"
    )
    assert one.content.startswith("Replaced the text at line 2 of code.py")
    assert (world.ws / "code.py").read_text() == "a = 1\nb = 7\nc = 2\n"


async def test_patch_applies_or_changes_nothing(world: World):
    (world.ws / "p.txt").write_text("one\ntwo\nthree\n")
    bad = await world.call("file_patch", path="p.txt", unified_diff="@@ -1 +1 @@\n-uno\n+1\n")
    assert bad.is_error and (world.ws / "p.txt").read_text() == "one\ntwo\nthree\n"
    good = await world.call("file_patch", path="p.txt", unified_diff="@@ -2 +2 @@\n-two\n+2\n")
    assert not good.is_error and (world.ws / "p.txt").read_text() == "one\n2\nthree\n"
    created = await world.call("file_patch", path="new.txt", unified_diff="@@ -0,0 +1 @@\n+fresh\n")
    assert not created.is_error and (world.ws / "new.txt").read_text() == "fresh\n"


async def test_find_and_grep(world: World):
    (world.ws / "src" / "pkg").mkdir(parents=True)
    (world.ws / "src" / "pkg" / "mod.py").write_text("def hello():\n    return 'hi'\n")
    (world.ws / "src" / "readme.md").write_text("hello there\n")
    (world.ws / "blob.bin").write_bytes(b"hello\x00\x01")
    found = await world.call("file_find", pattern="src/**/*.py")
    assert found.content.splitlines()[1:] == ["src/pkg/mod.py"]
    by_name = await world.call("file_find", pattern="*.md")
    assert "src/readme.md" in by_name.content
    grep = await world.call("file_grep", query=r"hel+o\(", file_pattern="*.py")
    assert grep.content == "src/pkg/mod.py:1: def hello():"
    everywhere = await world.call("file_grep", query="hello")
    assert (
        "src/readme.md:1: hello there" in everywhere.content
        and "blob.bin" not in everywhere.content
    )
    bad = await world.call("file_grep", query="hello(")
    assert bad.is_error and "regular expression" in bad.content


async def test_mkdir(world: World):
    made = await world.call("file_mkdir", path="x/y/z")
    assert made.content == "Created the folder x/y/z." and (world.ws / "x" / "y" / "z").is_dir()
    again = await world.call("file_mkdir", path="x/y/z")
    assert "already exists" in again.content


async def test_history_and_restore(world: World):
    await world.call("file_write", path="a.txt", content="first\n")
    await world.call("file_write", path="a.txt", content="second\n")
    history = await world.call("file_history", path="a.txt")
    lines = history.content.splitlines()
    assert lines[0] == "Versions of a.txt, newest first:" and len(lines) == 3
    assert "agent" in lines[1] and "file_write a.txt" in lines[1] and "turn" in lines[1]
    oldest = lines[2].split()[0]
    restored = await world.call("file_restore", path="a.txt", version=oldest)
    assert restored.content.startswith(f"Restored a.txt to version {oldest}")
    assert (world.ws / "a.txt").read_text() == "first\n"
    assert "file_restore a.txt" in world.git("log", "-1", "--format=%s")
    missing = await world.call("file_restore", path="a.txt", version="nope")
    assert missing.is_error and "no version" in missing.content


async def test_history_records_the_person_before_answering(world: World):
    await world.call("file_write", path="a.txt", content="agent\n")
    (world.ws / "a.txt").write_text("person\n")
    history = await world.call("file_history", path="a.txt")
    assert "person" in history.content.splitlines()[1]


async def test_descriptions_tell_the_model_where_it_may_work(world: World):
    tools = {t.name: t for t in world.build().tools}
    assert str(world.ws.resolve()) in tools["file_write"].description
    schema = tools["file_read"].spec.parameters
    assert set(schema["properties"]) == {"path", "offset", "limit"} and schema["required"] == [
        "path"
    ]


async def test_prepare_records_the_workspace_ahead_of_the_first_write(world: World):
    hands = world.build()
    await hands.prepare()
    assert world.git("log", "--format=%s").strip() == "Initial state of the workspace: notes.txt"


async def test_writes_name_what_the_history_left_out(world: World):
    world.build()
    (world.ws / "odd" / "git~1").mkdir(parents=True)  # a name git refuses, made by the person
    (world.ws / "odd" / "git~1" / "config").write_text("x\n")
    first = await world.call("file_write", path="a.txt", content="one\n")
    assert not first.is_error
    assert "Not recorded in the history, so not restorable: odd/git~1" in first.content
    again = await world.call("file_write", path="a.txt", content="two\n")
    assert "Not recorded" not in again.content  # said once, not on every write
    patched = await world.call("file_patch", path="a.txt", unified_diff="@@ -1 +1 @@\n-two\n+3\n")
    assert not patched.is_error and "Not recorded" not in patched.content


async def test_history_names_what_it_cannot_hold(world: World):
    world.build()
    await world.call("file_write", path="a.txt", content="one\n")
    (world.ws / "GIT~1").write_text("the person's file\n")
    listed = await world.call("file_history", path="a.txt")
    assert not listed.is_error
    assert listed.content.splitlines()[-1].startswith("Not recorded in the history")
    assert "GIT~1" in listed.content
