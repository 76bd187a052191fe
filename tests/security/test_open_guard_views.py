"""What the open guard sees of a command's opens, and what it hands back.

The files inside the roots a command opened (read or written) come back in
`Finished.opened`, once each, as the agent sees them on the host; a command
run without the guard lists none, and a long list is capped and says so.
An O_PATH open gets a descriptor (the kernel takes no O_PATH one from the
guard), judged like any other open.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import noema.security.open_guard as open_guard
from noema.security.open_guard import Opened, policy_secrets
from noema.security.policy import AccessPolicy, Root
from noema.security.sandbox import Finished, Layout, Output, Sandbox
from noema.security.settings import DEFAULT_DENY, ShellSettings

from .world import BWRAP

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")


def _layout(ws: Path, outside: Path) -> Layout:
    policy = AccessPolicy([Root(ws, True), Root(outside, False)], DEFAULT_DENY)
    return Layout(ws, (ws,), (outside,), secrets=policy_secrets(policy))


async def _run(ws: Path, outside: Path, command: str) -> Finished:
    sandbox = Sandbox(ShellSettings())
    finished = await sandbox.run(_layout(ws, outside), command, 30, Output(20_000))
    assert finished.exit_code == 0, finished.output
    return finished


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    ws, outside = tmp_path / "ws", tmp_path / "docs"
    ws.mkdir()
    outside.mkdir()
    (ws / "a.txt").write_text("a\n")
    (ws / "read-only.txt").write_text("r\n")
    (outside / "page.txt").write_text("from a read-only root\n")
    return ws, outside


def _entry(path: Path, wrote: bool) -> Opened:
    info = path.stat()
    return Opened(str(path), info.st_dev, info.st_ino, wrote)


async def test_the_files_a_command_opened_in_the_roots_are_listed_once_each(places):
    ws, outside = places
    finished = await _run(ws, outside, (
        f"cat read-only.txt a.txt {outside}/page.txt /etc/hostname > /dev/null; "
        "echo more >> a.txt; cat a.txt > /dev/null; echo new > b.txt; "
        "mkdir -p sub; : > /tmp/scratch; cat read-only.txt > /dev/null"
    ))
    assert finished.opened_capped is False
    listed = {entry.path: entry for entry in finished.opened}
    assert set(listed) == {str(ws / "read-only.txt"), str(ws / "a.txt"),
                           str(outside / "page.txt"), str(ws / "b.txt")}, finished.opened
    assert listed[str(ws / "read-only.txt")] == _entry(ws / "read-only.txt", False)
    assert listed[str(ws / "a.txt")] == _entry(ws / "a.txt", True)  # read, then appended to
    assert listed[str(outside / "page.txt")] == _entry(outside / "page.txt", False)
    assert listed[str(ws / "b.txt")] == _entry(ws / "b.txt", True)  # made by the command


async def test_a_long_list_is_capped_and_says_so(places, monkeypatch):
    ws, outside = places
    monkeypatch.setattr(open_guard, "MAX_OPENED", 3)
    finished = await _run(ws, outside, "for i in 1 2 3 4 5; do echo $i > f$i; done")
    assert len(finished.opened) == 3 and finished.opened_capped is True
    assert [Path(e.path).name for e in finished.opened] == ["f1", "f2", "f3"]


async def test_a_command_run_without_the_guard_says_its_opens_were_not_seen(places):
    # None, not an empty list: a reader must never take "unseen" for "nothing".
    ws, _ = places
    sandbox = Sandbox(ShellSettings())
    finished = await sandbox.run(Layout(ws, (ws,)), "cat a.txt", 30, Output(1000))
    assert finished.exit_code == 0 and finished.opened is None


O_PATH_CHECK = r"""
import os, stat
def tried(name, path, flags):
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        print(name, "error", exc.errno)
        return None
    print(name, "ok", stat.S_IFMT(os.fstat(fd).st_mode))
    return fd
folder = tried("folder", ".", os.O_PATH)
print("listed", sorted(os.listdir(f"/proc/self/fd/{folder}")))
tried("file", "a.txt", os.O_PATH)
tried("system", "/usr/bin", os.O_PATH | os.O_DIRECTORY)
tried("not-a-folder", "a.txt", os.O_PATH | os.O_DIRECTORY)
os.symlink("a.txt", "link")
tried("link", "link", os.O_PATH | os.O_NOFOLLOW)
tried("secret", ".env", os.O_PATH)
"""


async def test_an_o_path_open_gets_a_descriptor_judged_like_any_open(places):
    ws, outside = places
    (ws / ".env").write_text("KEY=1\n")
    (ws / "check.py").write_text(O_PATH_CHECK)
    finished = await _run(ws, outside, "python3 check.py")
    out = finished.output
    assert f"folder ok {0o040000}" in out and f"file ok {0o100000}" in out, out
    assert f"system ok {0o040000}" in out, out
    assert "listed ['.env', 'a.txt', 'check.py', 'read-only.txt']" in out, out
    assert f"not-a-folder error {20}" in out and f"link error {40}" in out, out  # ENOTDIR, ELOOP
    assert f"secret error {13}" in out, out  # EACCES
    assert os.path.islink(ws / "link")


async def test_the_shell_tool_hands_what_a_command_opened_to_its_listener(world):
    import json

    from noema.providers.base import ToolCall
    from noema.tools.registry import ToolContext, ToolRegistry
    from noema.tools.shell import shell_tools

    hands = world.build()
    told = []
    tools = shell_tools(hands.sandbox, hands.policy, hands.versions, world.paths.agents_dir,
                        on_opened=lambda ctx, finished: told.append((ctx.call_id, finished)))
    call = ToolCall("c1", "shell_execute", json.dumps({"command": "cat notes.txt > copy.txt"}))
    result = await ToolRegistry(tools).call(call, ToolContext("c1", 7, 1))
    assert not result.is_error, result.content
    [(call_id, finished)] = told
    assert call_id == "c1"
    assert {(Path(e.path).name, e.wrote) for e in finished.opened} == {
        ("notes.txt", False), ("copy.txt", True)}
