"""Class 7: names git reads as `.git` (case variants, NTFS trailing dots and
spaces, 8.3 short names, alternate data streams, HFS+-ignorable code points).

Each name is tried through the real file tools, for reading and writing, at
the top of the workspace, deep inside it and in a second root; every one must
be refused and leave the disk as it was.
"""

from __future__ import annotations

import os

import pytest

from noema.security.policy import Access, AccessPolicy, Root, is_git_link_name, is_git_name
from noema.security.settings import RootSettings

from ..world import World, tree_snapshot

HIDDEN = "GITLIKE-CONTENT-5521"

# Each spelling a file system (or git's own checks) would take for `.git`.
GIT_NAMES = [
    ".GIT",
    ".Git",
    ".gIT",
    ".git.",
    ".git ",
    ".git . .",
    ".GIT...",
    "git~1",
    "GIT~1",
    "Git~1 .",
    "git~2",
    ".git::$INDEX_ALLOCATION",
    ".git:zone",
    ".g\u200cit",
    ".gi\u200dt",
    "\u200e.git",
    ".git\ufeff",
    ".G\u202eIT",
    ".g\u206ait.",
    "x\\.git",
]

# Names that look close but that git checks out happily: the person's own.
ORDINARY = [".github", ".gitignore", ".gitkeep", "git", "legit", ".gitx", "git~", "digit~1", "g.it"]


def _plant(world: World, name: str, depth: str = "") -> str:
    """A folder with the name (below `depth`), holding a config file; its relative path."""
    folder = world.ws / depth / name
    folder.mkdir(parents=True)
    (folder / "config").write_text(HIDDEN + "\n")
    return f"{depth}{name}/config"


def _refused_as_git(result) -> None:
    assert result.is_error, result.content
    assert "names git reads as .git" in result.content or "git folders" in result.content
    assert HIDDEN not in result.content


@pytest.mark.parametrize("name", GIT_NAMES)
def test_the_policy_names_it_git(name: str):
    assert is_git_name(name)


@pytest.mark.parametrize("name", ORDINARY)
def test_ordinary_names_are_not_git(name: str):
    assert not is_git_name(name)


@pytest.mark.parametrize("name", GIT_NAMES)
async def test_reading_inside_is_refused(world: World, name: str):
    rel = _plant(world, name)
    _refused_as_git(await world.call("file_read", path=rel))


@pytest.mark.parametrize("name", GIT_NAMES)
async def test_writing_a_hook_inside_is_refused(world: World, name: str):
    before = tree_snapshot(world.ws)
    result = await world.call("file_write", path=f"{name}/hooks/pre-commit", content="#!/bin/sh\n")
    _refused_as_git(result)
    assert tree_snapshot(world.ws) == before


@pytest.mark.parametrize("name", GIT_NAMES)
async def test_creating_the_folder_is_refused(world: World, name: str):
    _refused_as_git(await world.call("file_mkdir", path=f"deep/{name}"))
    assert not (world.ws / "deep" / name).exists()


@pytest.mark.parametrize("name", [".GIT", "git~1", ".git. ", ".g\u200cit"])
@pytest.mark.parametrize(
    "tool, extra",
    [
        ("file_search_and_replace", {"old_text": HIDDEN, "new_text": "x"}),
        ("file_patch", {"unified_diff": "@@ -1 +1 @@\n-x\n+y\n"}),
        ("file_history", {}),
        ("file_restore", {"version": "HEAD"}),
    ],
)
async def test_every_file_tool_refuses_it_deep_inside(world: World, name: str, tool: str, extra):
    rel = _plant(world, name, depth="a/b/")
    _refused_as_git(await world.call(tool, path=rel, **extra))
    assert (world.ws / "a" / "b" / name / "config").read_text() == HIDDEN + "\n"


@pytest.mark.parametrize("name", [".GIT", "GIT~1", ".git::$INDEX_ALLOCATION", ".\ufeffgit"])
async def test_search_tools_never_show_it(world: World, name: str):
    _plant(world, name, depth="sub/")
    (world.ws / "sub" / "ok").mkdir()
    (world.ws / "sub" / "ok" / "config").write_text("visible\n")
    found = await world.call("file_find", pattern="**/config")
    assert not found.is_error and found.content.splitlines()[1:] == ["sub/ok/config"]
    grep = await world.call("file_grep", query=f"{HIDDEN}|visible")
    assert not grep.is_error and grep.content == "sub/ok/config:1: visible"


@pytest.mark.parametrize("name", [".GIT", "git~1", ".g\u200dit"])
async def test_a_second_root_refuses_it_too(world: World, tmp_path, name: str):
    other = tmp_path / "library"
    (other / name).mkdir(parents=True)
    (other / name / "config").write_text(HIDDEN + "\n")
    world.extra_roots = (RootSettings(path=other, mode="read-write"),)
    world.build()
    _refused_as_git(await world.call("file_read", path=str(other / name / "config")))
    _refused_as_git(
        await world.call("file_write", path=str(other / name / "hooks" / "hook"), content="x")
    )
    assert not (other / name / "hooks").exists()


@pytest.mark.parametrize("name", [".GIT", "git~1"])
async def test_a_link_to_it_is_refused(world: World, name: str):
    _plant(world, name)
    os.symlink(world.ws / name, world.ws / "innocent")
    _refused_as_git(await world.call("file_read", path="innocent/config"))
    _refused_as_git(await world.call("file_write", path="innocent/hooks/pre-push", content="x"))
    assert not (world.ws / name / "hooks").exists()


async def test_the_refusal_shows_the_hidden_code_point(world: World):
    rel = _plant(world, ".g\u200cit")
    result = await world.call("file_read", path=rel)
    _refused_as_git(result)
    assert "\\u200c" in result.content and "\u200c" not in result.content


@pytest.mark.parametrize(
    "name", [".gitmodules", ".GITMODULES", "gitmod~1", "gi7eba~1", ".gitattributes"]
)
def test_git_refuses_these_names_as_links(name: str):
    assert is_git_link_name(name) and not is_git_name(name)


async def test_a_gitmodules_link_is_refused_but_the_file_is_the_persons(world: World):
    (world.ws / "real.txt").write_text("[submodule]\n")
    os.symlink("real.txt", world.ws / ".gitmodules")
    result = await world.call("file_read", path=".gitmodules")
    assert result.is_error and "symbolic link" in result.content
    (world.ws / "sub").mkdir()
    (world.ws / "sub" / ".gitmodules").write_text("[submodule \"x\"]\n")
    ok = await world.call("file_read", path="sub/.gitmodules")
    assert not ok.is_error and "submodule" in ok.content
    edited = await world.call("file_write", path="sub/.gitattributes", content="* text=auto\n")
    assert not edited.is_error, edited.content


@pytest.mark.parametrize("name", ORDINARY)
async def test_near_names_stay_usable(world: World, name: str):
    written = await world.call("file_write", path=f"{name}/notes.md", content="fine\n")
    assert not written.is_error, written.content
    read = await world.call("file_read", path=f"{name}/notes.md")
    assert not read.is_error and "fine" in read.content


def test_denial_is_the_one_place_for_every_access(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = AccessPolicy([Root(ws.resolve(), True)])
    for name in GIT_NAMES:
        for access in Access:
            assert policy.denial(ws.resolve() / "a" / name / "f", access), (name, access)
