"""Nothing the file tools write becomes git metadata the person's git obeys.

The shell's check after a command does not see what `file_write`,
`file_edit` or a saved attachment put down, so the policy refuses the
writes themselves: into a folder git takes for a repository (a bare one, a
`--separate-git-dir` store), the one write that would make a plain folder
into one, the person's global configuration and the files it (or an
enclosing repository's configuration) includes. The verdict: the person's
own git, run afterwards in every folder, never runs the payload, and the
refused files are byte for byte what they were.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from noema.security.masks import looks_like_repository

from ..world import World

PERSON = ["-c", "user.name=Person", "-c", "user.email=p@example.org"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    """The person's home (for their global git configuration), outside the roots."""
    folder = tmp_path / "person-home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / ".config"))
    return folder


def person_git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", *PERSON, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()
    }


def payload(marker: Path) -> str:
    return f"#!/bin/sh\ntouch {marker}\n"


async def write(world: World, path: str, content: str) -> str:
    result = await world.call("file_write", path=path, content=content)
    return ("REFUSED " if result.is_error else "") + result.content


async def test_a_bare_repository_in_a_root_is_not_written(world, home, tmp_path):
    marker = tmp_path / "MARKER"
    bare = world.ws / "store.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True, timeout=30)
    before = digest(bare)
    for name in ("hooks/post-update", "hooks/pre-receive", "config", "info/attributes"):
        said = await write(world, f"store.git/{name}", payload(marker))
        assert said.startswith("REFUSED") and "repository" in said, said
    assert digest(bare) == before
    clone = tmp_path / "clone"
    person_git(tmp_path, "clone", "-q", str(bare), str(clone))
    person_git(clone, "commit", "--allow-empty", "-qm", "x")
    person_git(clone, "push", "-q", "origin", "HEAD")
    assert not marker.exists()


async def test_a_separate_git_folder_is_not_written(world, home, tmp_path):
    marker = tmp_path / "MARKER"
    project, store = world.ws / "proj", world.ws / "meta" / "proj.git"
    store.parent.mkdir()
    subprocess.run(["git", "init", "-q", f"--separate-git-dir={store}", str(project)],
                   check=True, timeout=30)
    said = await write(world, "meta/proj.git/hooks/pre-commit", payload(marker))
    assert said.startswith("REFUSED"), said
    said = await write(world, "meta/proj.git/config",
                       f"[core]\n\tfsmonitor = {tmp_path / 'evil.sh'}\n")
    assert said.startswith("REFUSED"), said
    (store / "hooks" / "pre-commit").unlink(missing_ok=True)
    person_git(project, "status")
    person_git(project, "commit", "--allow-empty", "-qm", "x")
    assert not marker.exists()


async def test_a_plain_folder_is_not_made_a_repository(world, home, tmp_path):
    """HEAD, objects/, refs/ and a config written one by one: the write that
    would complete the shape is refused, so no folder is taken for the
    person's repository by the next command's check, or by git."""
    marker = tmp_path / "MARKER"
    evil = tmp_path / "evil.sh"
    evil.write_text(payload(marker))
    evil.chmod(0o755)
    writes = [
        ("fake/config", f"[core]\n\tbare = false\n\tworktree = ..\n\tfsmonitor = {evil}\n"),
        ("fake/HEAD", "ref: refs/heads/main\n"),
        ("fake/objects/info/packs", ""),
        ("fake/refs/heads/main", "0" * 40 + "\n"),
        ("fake/commondir", "..\n"),
    ]
    said = [await write(world, path, text) for path, text in writes]
    for folder in ("fake/objects", "fake/refs"):  # made empty, as git init would
        result = await world.call("file_mkdir", path=folder)
        said.append(("REFUSED " if result.is_error else "") + result.content)
    assert any(s.startswith("REFUSED") for s in said), said
    fake = world.ws / "fake"
    assert not looks_like_repository(set(os.listdir(fake)))
    person_git(world.ws, "status")
    person_git(fake, "status")
    assert not marker.exists()


async def test_the_persons_git_configuration_and_its_includes_are_not_written(
    world, home, tmp_path
):
    marker = tmp_path / "MARKER"
    evil = tmp_path / "evil.sh"
    evil.write_text(payload(marker))
    evil.chmod(0o755)
    (home / ".gitconfig").write_text(f"[include]\n\tpath = {world.ws / 'shared.inc'}\n")
    (world.ws / "shared.inc").write_text("[user]\n\tname = Person\n")
    repo = world.ws / "proj"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    subprocess.run(["git", "-C", str(repo), "config", "include.path", "../../local.inc"],
                   check=True, timeout=30)
    (world.ws / "local.inc").write_text("")
    before = digest(world.ws)
    hostile = f"[core]\n\tfsmonitor = {evil}\n"
    for path in ("shared.inc", "local.inc"):
        said = await write(world, path, hostile)
        assert said.startswith("REFUSED") and "includes" in said, said
    result = await world.call("file_search_and_replace", path="shared.inc", old_text="Person",
                              new_text="x")
    assert result.is_error
    assert digest(world.ws) == before
    person_git(repo, "status")
    assert not marker.exists()


async def test_a_home_root_keeps_the_global_configuration_out_of_reach(world, tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("HOME", str(world.ws))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for path in (".gitconfig", ".config/git/config"):
        said = await write(world, path, "[alias]\n\tst = !touch /tmp/x\n")
        assert said.startswith("REFUSED") and "git configuration" in said, said
    assert not (world.ws / ".gitconfig").exists()


async def test_ordinary_files_next_to_repositories_are_still_written(world, home):
    """The rule refuses git's files only: work-tree files, a `config` or
    `HEAD` in an ordinary folder, and files named like git's elsewhere."""
    subprocess.run(["git", "init", "-q", str(world.ws / "proj")], check=True, timeout=30)
    for path in ("proj/src/main.py", "proj/config", "notes/HEAD", "objects/refs/x",
                 "proj/hooks/readme"):
        said = await write(world, path, "ok\n")
        assert not said.startswith("REFUSED"), (path, said)
