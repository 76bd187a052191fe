"""Credentials and files a command must not see, whatever path leads to them.

A token in a git remote's URL (the person's repository and a nested one);
a hard link inside a root to a file outside the roots; the data of another
Noema agent lying in a root under any name, set up but never run; and the
agents of the Noema home after the folder above them was renamed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from noema.paths import AgentPaths

from ..world import BWRAP, OUTSIDE_SECRET, World
from .history_scan import history_holds

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")

TOKEN = "ghp_CANARYTOKEN8830"
HEADER = "Q0FOQVJZLUhFQURFUi0xMTc="
SIBLING = "SIBLING-CONFIG-4410"


async def shell(world: World, command: str) -> str:
    result = await world.call("shell_execute", command=command)
    assert not result.is_error, result.content
    return result.content


def remote(repo, url: str) -> None:
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", url], check=True,
                   timeout=30, capture_output=True)


async def test_a_token_in_a_remote_url_is_not_shown_to_a_command(world: World):
    subprocess.run(["git", "init", "-q", str(world.ws / "nested")], check=True, timeout=30)
    remote(world.ws / "nested", f"https://person:{TOKEN}@example.org/n.git")
    (world.ws / ".git" / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n"
        f'[remote "origin"]\n\turl = https://{TOKEN}@example.org/top.git\n'
        f'[http "https://example.org/"]\n\textraheader = AUTHORIZATION: basic {HEADER}\n'
    )
    # An O_PATH open is given a descriptor that reads: the same view.
    through = "python3 -c \"import os; print(os.read(os.open('.git/config', os.O_PATH), 4096))\"; "
    out = await shell(world, "cat .git/config nested/.git/config; git -C nested remote -v; "
                             "grep -r ghp_ .git nested/.git; " + through + "echo end")
    assert "end" in out, out
    assert TOKEN not in out and HEADER not in out, out
    assert "https://***@example.org/top.git" in out, out  # a redacted view, not a refusal
    assert "origin\thttps://***@example.org/n.git (fetch)" in out, out  # git reads it so too
    assert TOKEN in (world.ws / "nested" / ".git" / "config").read_text()  # left as it was


async def test_a_hard_link_to_a_file_outside_the_roots_is_refused_in_the_shell(world: World):
    os.link(world.secret, world.ws / "linked.txt")
    out = await shell(world, "cat linked.txt; echo appended >> linked.txt; "
                             "echo mine > a; ln a b; cat b; echo end")
    assert "end" in out and "mine" in out, out  # the command's own links stay its own
    assert OUTSIDE_SECRET not in out and out.count("Permission denied") == 2, out
    assert world.secret.read_text() == OUTSIDE_SECRET + "\n"
    refused = await world.call("file_read", path="linked.txt")  # the file tools' rule
    assert refused.is_error and OUTSIDE_SECRET not in refused.content
    out = await shell(world, "cat b; git init -q r1 && echo x > r1/f && git -C r1 add f && "
                             "git -C r1 -c user.name=a -c user.email=a@b commit -qm m && "
                             "git clone -q r1 r2 && git -C r2 log --format=%s; echo end")
    assert "mine\nm\nend" in out, out  # links a command made are the next one's too


def another_home(folder) -> AgentPaths:
    """An agent set up but never run (its settings, no lock, no conversation)."""
    paths = AgentPaths("alice", folder)
    paths.ensure()
    paths.config_file.write_text(f'# {SIBLING}\n[shell]\nsandbox = "bubblewrap"\n')
    return paths


async def test_another_agent_s_data_under_any_name_is_never_reachable(world: World):
    home = another_home(world.ws / "backup" / "people" / "alice")
    out = await shell(world, "cat backup/people/alice/config.toml; ls backup/people/alice; "
                             "echo end")
    assert "end" in out and SIBLING not in out and "identity" not in out, out
    for call, extra in (("file_read", {}), ("file_write", {"content": "sandbox = 'none'\n"})):
        result = await world.call(call, path="backup/people/alice/config.toml", **extra)
        assert result.is_error and SIBLING not in result.content, result.content
    assert SIBLING in home.config_file.read_text()
    assert not history_holds(world.gitdir(), SIBLING)


async def test_every_agent_of_the_noema_home_stays_out_of_reach_after_a_rename(
    world: World, monkeypatch
):
    noema = world.ws / "nh"
    monkeypatch.setenv("NOEMA_HOME", str(noema))
    sibling = another_home(noema / "agents" / "s")
    world.build()
    os.rename(noema, world.ws / "renamed-home")  # the folder above the agents, renamed
    moved = world.ws / "renamed-home" / "agents" / "s" / "config.toml"
    rel = moved.relative_to(world.ws).as_posix()
    write = await world.call("file_write", path=rel, content='[shell]\nsandbox = "none"\n')
    assert write.is_error, write.content
    out = await shell(world, f"cat {rel}; echo '[shell]' > {rel}; echo end")
    assert "end" in out and SIBLING not in out, out
    assert SIBLING in moved.read_text() and "none" not in moved.read_text()
    assert not history_holds(world.gitdir(), SIBLING)
    assert sibling.root.name == "s"


@pytest.mark.skipif(os.geteuid() != 0, reason="only a sandbox started by root reads root's files")
async def test_a_root_only_file_the_masks_missed_is_refused_at_the_open(world: World):
    """Made in a system folder after the sandbox laid its masks (while the
    command starts, or runs): the command's kernel uid is root's, so only
    the open guard stands between it and the file."""
    folder = Path(tempfile.mkdtemp(dir="/srv" if os.path.isdir("/srv") else "/opt",
                                   prefix="noema-test-"))
    os.chmod(folder, 0o755)
    key = folder / "host.key"

    def plant(argv: list[str]) -> None:
        if argv[-1].endswith("echo end"):  # the command's start, not the probe's
            key.write_text(TOKEN + "\n")
            os.chmod(key, 0o600)

    world.build().sandbox.before_start = plant
    try:
        out = await shell(world, f"cat {key}; echo end")
    finally:
        shutil.rmtree(folder)
    assert "end" in out and TOKEN not in out and "Permission denied" in out, out
