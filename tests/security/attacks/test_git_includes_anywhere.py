"""A file that any git configuration the person's git reads would include is
never written by the file tools.

Git reads, as its own configuration, every file that an `[include]` or
`[includeIf]` names: in the person's global and system configuration, in
the configuration of every repository, and in the files those include in
turn. A repository anywhere in the roots (not only one on the way to the
file written) can name a file elsewhere in a writable root; the model
writing `[core] fsmonitor = <program>` there would have the person's next
`git status` in that repository run the program. The verdict comes from
evidence: the person's git reads the included file before the attack (its
`user.name` shows), the write is refused, the tree is byte for byte what it
was, and the person's `git status` runs no canary.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from noema.security.settings import RootSettings
from noema.tools.registry import ToolContext, ToolError

from ...mail.conftest import accounts, mail, make_rig, smtp  # noqa: F401
from ...mail.servers import Dovecot, available
from ..world import World

INCLUDED_NAME = "Included Person"


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    """The person's home (their global git configuration), outside the roots."""
    folder = tmp_path / "person-home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / ".config"))
    for name in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"):
        monkeypatch.delenv(name, raising=False)
    return folder


@pytest.fixture(scope="session")
def dovecot():
    """The mail tests' Dovecot, for the attachment; the suite run as an
    unprivileged user (whose group Dovecot may not find) goes without it."""
    problem = available()
    if problem:
        pytest.skip(problem)
    server = Dovecot.create()
    try:
        server.start()
    except RuntimeError as exc:
        if os.geteuid() == 0:
            raise
        pytest.skip(f"the tests' Dovecot does not start as this user: {exc}")
    yield server
    server.stop()


@pytest.fixture
def canary(tmp_path: Path) -> tuple[Path, Path]:
    """A program that leaves a mark when run, and the mark."""
    mark = tmp_path / "CANARY-RAN"
    program = tmp_path / "canary.sh"
    program.write_text(f"#!/bin/sh\ntouch {mark}\n")
    program.chmod(0o755)
    return program, mark


def person_git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """The person's own git, with their environment (no GIT_* overrides)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)


def tree_hash(folder: Path) -> str:
    """One digest of every name and byte below `folder` (links as their target)."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        if path.is_symlink():
            digest.update(b"->" + os.fsencode(os.readlink(path)))
        elif path.is_file():
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def repository(folder: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(folder)], check=True, timeout=30)
    return folder


def include(config: Path, value: str, section: str = "include") -> None:
    with config.open("a") as handle:
        handle.write(f"[{section}]\n\tpath = {value}\n")


def hostile(program: Path) -> str:
    return f"[core]\n\tfsmonitor = {program}\n"


def seen_by_git(repo: Path) -> str:
    return person_git(repo, "config", "user.name").stdout.strip()


async def write(world: World, path: str, content: str) -> str:
    result = await world.call("file_write", path=path, content=content)
    return ("REFUSED " if result.is_error else "") + result.content


async def test_a_deep_repository_including_a_file_beside_it(world, home, canary):
    """`code/app` is two folders down: no folder on the way to `notes/inc.cfg`
    holds it, yet its configuration includes that file."""
    program, mark = canary
    app = repository(world.ws / "code" / "app")
    notes = world.ws / "notes"
    notes.mkdir()
    (notes / "inc.cfg").write_text(f"[user]\n\tname = {INCLUDED_NAME}\n")
    include(app / ".git" / "config", "../../../notes/inc.cfg")
    assert seen_by_git(app) == INCLUDED_NAME  # the person's git reads it
    before = tree_hash(world.ws)
    said = await write(world, "notes/inc.cfg", hostile(program))
    assert said.startswith("REFUSED") and "includes" in said, said
    result = await world.call("file_search_and_replace", path="notes/inc.cfg",
                              old_text=f"name = {INCLUDED_NAME}",
                              new_text=f"fsmonitor = {program}")
    assert result.is_error, result.content
    assert tree_hash(world.ws) == before
    person_git(app, "status")
    assert not mark.exists()
    said = await write(world, "notes/other.txt", "an ordinary note\n")
    assert not said.startswith("REFUSED"), said


async def test_a_repository_in_another_root_names_a_file_in_the_workspace(
    tmp_path, home, canary
):
    """A read-only root's repository, with a conditional include that is not
    active today (another folder, another branch): every condition counts,
    since what it depends on can change under the person."""
    program, _ = canary
    world = World.make(tmp_path)
    projects = tmp_path / "projects"
    app = repository(projects / "app")
    include(app / ".git" / "config", str(world.ws / "notes" / "cond.cfg"),
            'includeIf "gitdir:/nowhere/"')
    include(app / ".git" / "config", "~/../ws/notes/branch.cfg", 'includeIf "onbranch:other"')
    world.extra_roots = (RootSettings(path=projects, mode="read-only"),)
    try:
        (world.ws / "notes").mkdir()
        before = tree_hash(world.ws)
        for path in ("notes/cond.cfg", "notes/branch.cfg"):
            said = await write(world, path, hostile(program))
            assert said.startswith("REFUSED") and "includes" in said, (path, said)
        assert tree_hash(world.ws) == before
    finally:
        world.close()


async def test_includes_of_includes_and_links_are_followed_as_git_does(
    world, home, canary
):
    """The global configuration includes a file outside the roots that
    includes one in the workspace; a repository's include goes through a
    link and then `..`, which the kernel takes from where the link leads."""
    program, mark = canary
    notes = world.ws / "notes"
    (notes / "deep").mkdir(parents=True)
    (home / "git").mkdir()
    (home / ".gitconfig").write_text("[include]\n\tpath = git/common.inc\n")
    (home / "git" / "common.inc").write_text(
        f'[includeIf "hasconfig:remote.*.url:https://x/**"]\n\tpath = {notes}/chained.cfg\n')
    app = repository(world.ws / "code" / "app")
    (app / ".git" / "hop").symlink_to(notes / "deep")
    include(app / ".git" / "config", "hop/../linked.cfg")
    (notes / "linked.cfg").write_text(f"[user]\n\tname = {INCLUDED_NAME}\n")
    assert seen_by_git(app) == INCLUDED_NAME  # git found notes/linked.cfg, not .git/linked.cfg
    before = tree_hash(world.ws)
    for path in ("notes/chained.cfg", "notes/linked.cfg"):
        said = await write(world, path, hostile(program))
        assert said.startswith("REFUSED") and "includes" in said, (path, said)
    assert tree_hash(world.ws) == before
    person_git(app, "status")
    assert not mark.exists()


async def test_a_repository_made_after_the_agent_started_is_seen(world, home, canary):
    """The configurations are remembered between writes; a repository that
    appears later, or an include added to one already known, still counts."""
    program, mark = canary
    said = await write(world, "notes/first.txt", "warm the memory\n")
    assert not said.startswith("REFUSED"), said
    app = repository(world.ws / "later" / "app")
    include(app / ".git" / "config", "../../../notes/late.cfg")
    said = await write(world, "notes/late.cfg", hostile(program))
    assert said.startswith("REFUSED") and "includes" in said, said
    include(app / ".git" / "config", "../../../notes/later-still.cfg")
    said = await write(world, "notes/later-still.cfg", hostile(program))
    assert said.startswith("REFUSED") and "includes" in said, said
    person_git(app, "status")
    assert not mark.exists()


async def test_a_saved_attachment_never_lands_on_an_included_file(accounts, tmp_path,  # noqa: F811
                                                                  home, canary):
    program, mark = canary
    rig = await make_rig(accounts, tmp_path)
    try:
        await rig.until(lambda: rig.channel.sensor.looks >= 1, "the first look")
        ws = tmp_path / "ws"
        app = repository(ws / "code" / "app")
        include(app / ".git" / "config", "../../../notes/inc.cfg")
        (ws / "notes").mkdir()
        rig.accounts.deliver(mail("Bob <bob@outside.test>", rig.accounts.agent_address,
                                  "Config", "see attached",
                                  attachments=(("inc.cfg", "text/plain",
                                                hostile(program).encode()),)))
        await rig.until(lambda: any(e.payload.get("subject") == "Config" for e in rig.events),
                        "the mail")
        uid = next(e for e in rig.events if e.payload.get("subject") == "Config").payload["uid"]
        before = tree_hash(ws)
        tool = next(t for t in rig.channel.tools() if t.name == "email_save_attachment")
        gated = rig.channel.ctx.hands.gate.wrap(tool)
        with pytest.raises(ToolError, match="includes"):
            await gated.handler(ToolContext(call_id="c1", turn_id=7, cycle_id=1), uid=uid,
                                name="inc.cfg", path="notes/inc.cfg")
        assert tree_hash(ws) == before
        person_git(app, "status")
        assert not mark.exists()
        # The same attachment is saved where no git configuration looks.
        saved = await gated.handler(ToolContext(call_id="c2", turn_id=7, cycle_id=1), uid=uid,
                                    name="inc.cfg", path="notes/kept.cfg")
        assert "Saved" in str(saved) and (ws / "notes" / "kept.cfg").exists()
    finally:
        await rig.stop()


async def test_bare_repositories_submodules_and_worktrees_count(world, home, canary):
    """A bare repository's configuration, a submodule's (in `.git/modules/`)
    and a linked worktree's `.git` file leading to its git folder: each
    include among them is refused."""
    program, mark = canary
    notes = world.ws / "notes"
    notes.mkdir()
    bare = world.ws / "store.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True, timeout=30)
    include(bare / "config", "../notes/bare.cfg")
    app = repository(world.ws / "code" / "app")
    module = app / ".git" / "modules" / "lib"
    subprocess.run(["git", "init", "-q", "--bare", str(module)], check=True, timeout=30)
    include(module / "config", str(notes / "module.cfg"))
    person_git(app, "-c", "user.name=P", "-c", "user.email=p@x", "commit", "-q",
               "--allow-empty", "-m", "first")
    tree = world.ws / "elsewhere" / "app-tree"
    done = person_git(app, "worktree", "add", "-q", str(tree))
    assert done.returncode == 0, done.stderr
    [worktree] = (app / ".git" / "worktrees").iterdir()
    include(worktree / "config.worktree", str(notes / "worktree.cfg"))
    before = tree_hash(world.ws)
    for path in ("notes/bare.cfg", "notes/module.cfg", "notes/worktree.cfg"):
        said = await write(world, path, hostile(program))
        assert said.startswith("REFUSED") and "includes" in said, (path, said)
    assert tree_hash(world.ws) == before
    for folder in (bare, app, tree):
        person_git(folder, "status")
    assert not mark.exists()
