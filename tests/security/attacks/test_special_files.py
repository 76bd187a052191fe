"""Class 8 (second half): sockets, pipes and devices in the workspace.

One special file anywhere must not make a search fail as a whole: it is
skipped and counted. Reading one is a clear, prompt refusal; a pipe never
blocks the agent.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from noema.security.settings import RootSettings

from ..world import World

BOUND = 20  # seconds: a blocked open would never return


def _fifo(path: Path) -> None:
    os.mkfifo(path)


@pytest.fixture
def sockets() -> Iterator[Callable[[Path], None]]:
    """Bind Unix sockets (closed at the end); the path must stay short for AF_UNIX."""
    opened: list[socket.socket] = []

    def bind(path: Path) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        here = os.getcwd()
        os.chdir(path.parent)  # a relative name: tmp paths can pass the 108-byte limit
        try:
            sock.bind(path.name)
        finally:
            os.chdir(here)
        opened.append(sock)

    yield bind
    for sock in opened:
        sock.close()


def _device(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root (CAP_MKNOD)")
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # like /dev/null
    except PermissionError:
        pytest.skip("this container does not allow device nodes")


KINDS = ["fifo", "socket", "device"]
PLACES = ["top.py", "deep/er/inner.py"]


def _make(kind: str, path: Path, sockets) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    {"fifo": _fifo, "socket": sockets, "device": _device}[kind](path)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("kind", KINDS)
async def test_grep_skips_it_and_says_so(world: World, sockets, kind: str, place: str):
    _make(kind, world.ws / place, sockets)
    (world.ws / "code.py").write_text("needle = 1\n")
    result = await asyncio.wait_for(world.call("file_grep", query="needle"), BOUND)
    assert not result.is_error, result.content
    assert result.content.startswith("code.py:1: needle = 1")
    assert "1 special file(s) (sockets, pipes, devices) skipped" in result.content


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("kind", KINDS)
async def test_find_skips_it_and_says_so(world: World, sockets, kind: str, place: str):
    _make(kind, world.ws / place, sockets)
    result = await asyncio.wait_for(world.call("file_find", pattern="*.py"), BOUND)
    assert not result.is_error, result.content
    assert Path(place).name not in result.content
    assert "special file(s)" in result.content


@pytest.mark.parametrize("kind", KINDS)
async def test_grep_with_a_file_pattern_naming_it(world: World, sockets, kind: str):
    _make(kind, world.ws / "x.log", sockets)
    result = await asyncio.wait_for(
        world.call("file_grep", query="anything", file_pattern="*.log"), BOUND
    )
    assert not result.is_error and "No line matches" in result.content


@pytest.mark.parametrize(
    "tool, extra",
    [
        ("file_read", {}),
        ("file_search_and_replace", {"old_text": "a", "new_text": "b"}),
        ("file_patch", {"unified_diff": "@@ -1 +1 @@\n-a\n+b\n"}),
    ],
)
@pytest.mark.parametrize("kind", KINDS)
async def test_reading_it_is_a_prompt_clear_refusal(
    world: World, sockets, kind: str, tool: str, extra: dict
):
    _make(kind, world.ws / "special", sockets)
    result = await asyncio.wait_for(world.call(tool, path="special", **extra), BOUND)
    assert result.is_error, result.content
    assert "failed unexpectedly" not in result.content
    assert "regular file" in result.content or "special file" in result.content


@pytest.mark.parametrize("kind", ["fifo", "socket"])
async def test_a_link_to_it_is_skipped_by_grep(world: World, sockets, kind: str):
    _make(kind, world.ws / "special", sockets)
    os.symlink("special", world.ws / "alias.txt")
    (world.ws / "a.txt").write_text("needle\n")
    result = await asyncio.wait_for(world.call("file_grep", query="needle"), BOUND)
    assert not result.is_error and result.content.startswith("a.txt:1: needle")


async def test_a_pipe_with_no_writer_never_blocks_a_read(world: World):
    _fifo(world.ws / "pipe.txt")
    result = await asyncio.wait_for(world.call("file_read", path="pipe.txt"), BOUND)
    assert result.is_error and "regular file" in result.content


async def test_special_files_in_a_second_root_are_skipped_too(world: World, sockets, tmp_path):
    other = tmp_path / "library"
    other.mkdir()
    _make("fifo", other / "f.md", sockets)
    _make("socket", other / "s.md", sockets)
    (other / "real.md").write_text("needle\n")
    world.extra_roots = (RootSettings(path=other, mode="read-only"),)
    world.build()
    result = await asyncio.wait_for(world.call("file_grep", query="needle"), BOUND)
    assert not result.is_error, result.content
    assert f"{other}/real.md:1: needle" in result.content
    assert "2 special file(s)" in result.content


async def test_an_unlistable_folder_does_not_fail_the_search(world: World):
    if os.geteuid() == 0:
        pytest.skip("root lists any folder; the refusal needs an unprivileged user")
    locked = world.ws / "locked"
    locked.mkdir()
    (world.ws / "a.txt").write_text("needle\n")
    locked.chmod(0)
    try:
        result = await world.call("file_grep", query="needle")
        assert not result.is_error and result.content.startswith("a.txt:1: needle")
        assert "unreadable" in result.content
    finally:
        locked.chmod(0o755)


@pytest.mark.parametrize("kind", KINDS)
async def test_writes_and_history_go_on_beside_it(world: World, sockets, kind: str):
    _make(kind, world.ws / "deep" / "special", sockets)
    written = await asyncio.wait_for(world.call("file_write", path="a.txt", content="x\n"), BOUND)
    assert not written.is_error, written.content
    assert (world.ws / "a.txt").read_text() == "x\n"
    listed = await asyncio.wait_for(world.call("file_history", path="."), BOUND)
    assert not listed.is_error and "file_write a.txt" in listed.content
    restored = await asyncio.wait_for(
        world.call("file_restore", path="deep/special", version="HEAD"), BOUND
    )
    assert restored.is_error and "failed unexpectedly" not in restored.content


async def test_a_special_file_under_a_denied_name_is_not_even_counted(world: World, sockets):
    _make("socket", world.ws / "id_rsa", sockets)
    (world.ws / "a.txt").write_text("needle\n")
    result = await asyncio.wait_for(world.call("file_grep", query="needle"), BOUND)
    assert result.content == "a.txt:1: needle"
