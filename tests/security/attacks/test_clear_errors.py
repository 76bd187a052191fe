"""Class 9: what goes wrong with a path comes back as one short sentence that
says what to do, never as "failed unexpectedly (OSError ...)" with raw errno
text, and never with a 4 KB path echoed whole."""

from __future__ import annotations

import errno
import os
import time

import pytest

from noema.providers.base import ToolCall
from noema.tools.errors import explain, shorten, tidy
from noema.tools.registry import ToolContext, ToolError, ToolRegistry, tool

from ..world import OUTSIDE_SECRET, World

# Every file tool that takes a path, with the other arguments it needs.
PATH_TOOLS = [
    ("file_read", {}),
    ("file_write", {"content": "x"}),
    ("file_mkdir", {}),
    ("file_search_and_replace", {"old_text": "a", "new_text": "b"}),
    ("file_patch", {"unified_diff": "@@ -0,0 +1 @@\n+x\n"}),
    ("file_history", {}),
    ("file_restore", {"version": "abcdef1"}),
]
TOOL_IDS = [name for name, _ in PATH_TOOLS]


def clear(result, *, longest: int = 1500) -> None:
    """An error, in plain words, of reasonable length."""
    assert result.is_error, result.content
    assert "failed unexpectedly" not in result.content
    assert "[Errno" not in result.content and "Traceback" not in result.content
    assert len(result.content) <= longest, len(result.content)


@pytest.mark.parametrize("tool_name, extra", PATH_TOOLS, ids=TOOL_IDS)
async def test_an_over_long_name(world: World, tool_name: str, extra: dict):
    name = "n" * 300
    result = await world.call(tool_name, path=f"sub/{name}", **extra)
    clear(result, longest=400)
    assert "at most 255 bytes" in result.content and "shorter name" in result.content
    assert name not in result.content


@pytest.mark.parametrize("tool_name, extra", PATH_TOOLS, ids=TOOL_IDS)
async def test_an_over_long_path(world: World, tool_name: str, extra: dict):
    path = "folder/" * 700 + "f.txt"
    result = await world.call(tool_name, path=path, **extra)
    clear(result, longest=400)
    assert "at most 4095 bytes" in result.content and path not in result.content


@pytest.mark.parametrize("tool_name, extra", PATH_TOOLS, ids=TOOL_IDS)
async def test_a_nul_byte(world: World, tool_name: str, extra: dict):
    result = await world.call(tool_name, path="notes\x00.txt", **extra)
    clear(result, longest=200)
    assert "NUL character" in result.content


@pytest.mark.parametrize("tool_name, extra", PATH_TOOLS, ids=TOOL_IDS)
async def test_a_lone_surrogate(world: World, tool_name: str, extra: dict):
    result = await world.call(tool_name, path="notes\ud800.txt", **extra)
    clear(result, longest=300)
    assert "lone surrogate" in result.content


@pytest.mark.parametrize("tool_name, extra", PATH_TOOLS[:5], ids=TOOL_IDS[:5])
async def test_a_file_used_as_a_folder(world: World, tool_name: str, extra: dict):
    result = await world.call(tool_name, path="notes.txt/child", **extra)
    clear(result, longest=300)
    assert "not a folder" in result.content


@pytest.mark.parametrize("tool_name, extra", PATH_TOOLS, ids=TOOL_IDS)
async def test_a_loop_of_links(world: World, tool_name: str, extra: dict):
    os.symlink("two", world.ws / "one")
    os.symlink("one", world.ws / "two")
    result = await world.call(tool_name, path="one/inner.txt", **extra)
    clear(result, longest=400)
    assert "loop" in result.content


@pytest.mark.parametrize("tool_name, extra", PATH_TOOLS[:5], ids=TOOL_IDS[:5])
async def test_a_long_missing_folder_is_named_briefly(world: World, tool_name: str, extra: dict):
    path = "abcdefgh/" * 400 + "f.txt"  # legal, but nothing of it exists
    if tool_name in ("file_write", "file_patch", "file_mkdir"):
        (world.ws / "abcdefgh").write_text("a file in the way\n")
    result = await world.call(tool_name, path=path, **extra)
    clear(result, longest=400)
    assert path not in result.content
    assert "…" in result.content or "is a file, not a folder" in result.content


@pytest.mark.parametrize("tool_name", ["file_read", "file_write"])
async def test_a_refusal_does_not_echo_a_long_path(world: World, tool_name: str):
    path = "../" + "abcdefghij/" * 300 + "secret"
    extra = {"content": "x"} if tool_name == "file_write" else {}
    result = await world.call(tool_name, path=path, **extra)
    clear(result)
    assert "outside the folders you may use" in result.content
    assert "abcdefghij/" * 20 not in result.content


async def test_a_file_the_system_will_not_open(world: World):
    if os.geteuid() == 0:
        pytest.skip("root reads any file; the refusal needs an unprivileged user")
    locked = world.ws / "locked.txt"
    locked.write_text("private\n")
    locked.chmod(0)
    try:
        result = await world.call("file_read", path="locked.txt")
    finally:
        locked.chmod(0o644)
    clear(result, longest=300)
    assert "does not allow access" in result.content and "'locked.txt'" in result.content


# -- every tool, through the registry ---------------------------------------------


@pytest.mark.parametrize(
    "code, words",
    [
        (errno.ENAMETOOLONG, "shorter name"),
        (errno.ENOENT, "does not exist"),
        (errno.ENOTDIR, "not a folder"),
        (errno.EISDIR, "is a folder"),
        (errno.ELOOP, "symbolic link"),
        (errno.EACCES, "does not allow access"),
        (errno.EPERM, "does not allow"),
        (errno.ENXIO, "special file"),
        (errno.ENOSPC, "disk is full"),
        (errno.EROFS, "read-only file system"),
        (errno.EMFILE, "too many files"),
        (errno.EIO, "input/output error"),
        (errno.ECONNRESET, "connection reset by peer"),  # no advice of its own: the reason
    ],
)
async def test_an_os_error_from_any_tool_becomes_advice(code: int, words: str):
    long_path = "/data/" + "x" * 4000 + "/end.txt"

    @tool(side_effects=False)
    def broken(ctx: ToolContext) -> str:
        """A tool that meets the operating system's refusal."""
        raise OSError(code, os.strerror(code), long_path)

    registry = ToolRegistry([broken])
    result = await registry.call(ToolCall("c1", "broken", "{}"), ToolContext("c1", 1, 1))
    clear(result, longest=400)
    assert words in result.content
    assert "x" * 200 not in result.content
    if code not in (errno.ENOSPC, errno.EMFILE):  # these are about the system, not a path
        assert "/data/xxxx" in result.content and "/end.txt" in result.content


@pytest.mark.parametrize(
    "exc, words",
    [
        (ValueError("embedded null byte"), "NUL character"),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), "lone surrogate"),
        (OverflowError("Python int too large to convert to C long"), "too large"),
    ],
)
async def test_impossible_values_from_any_tool_become_advice(exc: Exception, words: str):
    @tool(side_effects=False)
    def broken(ctx: ToolContext) -> str:
        """A tool that passes an impossible value to the system."""
        raise exc

    registry = ToolRegistry([broken])
    result = await registry.call(ToolCall("c1", "broken", "{}"), ToolContext("c1", 1, 1))
    clear(result, longest=300)
    assert words in result.content


async def test_a_bug_is_still_reported_as_one_but_briefly():
    @tool(side_effects=False)
    def buggy(ctx: ToolContext) -> str:
        """A tool with a bug."""
        raise RuntimeError("state lost: " + "y" * 5000)

    registry = ToolRegistry([buggy])
    result = await registry.call(ToolCall("c1", "buggy", "{}"), ToolContext("c1", 1, 1))
    assert result.is_error and "failed unexpectedly (RuntimeError: state lost" in result.content
    assert len(result.content) < 400


async def test_a_tool_error_with_a_huge_path_is_shortened():
    @tool(side_effects=False)
    def wordy(ctx: ToolContext) -> str:
        """A tool whose refusal quotes what it was given."""
        raise ToolError(f"the folder {'a/' * 2000!r} does not exist")

    registry = ToolRegistry([wordy])
    result = await registry.call(ToolCall("c1", "wordy", "{}"), ToolContext("c1", 1, 1))
    assert result.is_error and "does not exist" in result.content and len(result.content) < 300


def test_shorten_keeps_both_ends_and_shows_hidden_characters():
    text = "start-" + "m" * 500 + "-end"
    short = shorten(text)
    assert short.startswith("start-") and short.endswith("-end") and "…" in short
    assert len(short) == 101
    assert shorten("a\nb\u200c") == "a\\nb\\u200c"
    assert tidy("ok " + "p" * 300 + " ok").count("…") == 1


def test_explain_leaves_bugs_alone():
    assert explain(KeyError("x")) is None
    assert explain(ValueError("invalid literal for int()")) is None


# -- paths that change while a tool resolves them ----------------------------------

RACING_CALLS = [
    ("file_read", {"path": "docs/inner/page.txt"}),
    ("file_write", {"path": "docs/inner/page.txt", "content": "new\n"}),
    ("file_search_and_replace", {"path": "docs/inner/page.txt", "old_text": "x", "new_text": "y"}),
    ("file_mkdir", {"path": "docs/inner/made"}),
    ("file_grep", {"query": "page"}),
    ("file_find", {"pattern": "docs/**"}),
]


@pytest.mark.parametrize("swapped_with", ["link", "file"])
async def test_errors_stay_clear_while_a_folder_trades_places(world: World, swapped_with: str):
    """A folder swapped, again and again, with a link out of the workspace (the
    ELOOP side) or with a plain file (the ENOTDIR side)."""
    from .swapper import Swapper, swapping_pair

    docs = world.ws / "docs"
    (docs / "inner").mkdir(parents=True)
    (docs / "inner" / "page.txt").write_text("page x\n")
    (world.outside / "inner").mkdir()
    (world.outside / "inner" / "page.txt").write_text(OUTSIDE_SECRET + "\n")
    if swapped_with == "link":
        other = swapping_pair(docs, world.outside)
    else:
        other = world.ws / "docs.plain"
        other.write_text("a file where a folder was\n")
    world.build()
    rounds = errors = 0
    with Swapper(docs, other, limit=400_000, seconds=2.0) as swapper:
        end = time.monotonic() + 1.5
        while time.monotonic() < end and rounds < 600:
            name, arguments = RACING_CALLS[rounds % len(RACING_CALLS)]
            rounds += 1
            result = await world.call(name, **arguments)
            assert OUTSIDE_SECRET not in result.content
            if result.is_error:
                errors += 1
                clear(result)
    assert swapper.swaps > 0 and rounds > 0
    assert (world.outside / "inner" / "page.txt").read_text() == OUTSIDE_SECRET + "\n"


@pytest.mark.parametrize(
    "exc, words",
    [
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), "(connection reset"),
        (TimeoutError(), "timed out"),
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), "(broken pipe)"),
    ],
)
async def test_an_os_error_without_a_path_does_not_mention_one(exc: Exception, words: str):
    @tool(side_effects=False)
    def talker(ctx: ToolContext) -> str:
        """A tool that talks to a socket."""
        raise exc

    registry = ToolRegistry([talker])
    result = await registry.call(ToolCall("c1", "talker", "{}"), ToolContext("c1", 1, 1))
    clear(result, longest=200)
    assert words in result.content and "path" not in result.content
