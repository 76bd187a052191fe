"""Deny rules follow things, not only their names.

A rule names a path; a rename moves what it covered. The attacks rename a
secret's parent folder, or the folder that holds the agents' data, inside
one command and read under the new name in the next one (and with the file
tools); a hard link in a read-only root gives the agent's `secrets.toml` a
second name. The verdict is whether the secret's bytes reach the model.
"""

from __future__ import annotations

import os

import pytest

from noema.security.settings import RootSettings

from ..world import AGENT_SECRET, BWRAP, World

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")

VAULT_SECRET = "VAULT-SECRET-5521"
CONVERSATION = "ANOTHER-AGENTS-CONVERSATION-7781"


async def shell(world: World, command: str) -> str:
    result = await world.call("shell_execute", command=command)
    assert not result.is_error, result.content
    return result.content


async def read(world: World, path: str) -> str:
    result = await world.call("file_read", path=path)
    return ("REFUSED " if result.is_error else "") + result.content


def _vault(world: World) -> None:
    world.deny_extra = ("projects/vault",)
    vault = world.ws / "projects" / "vault"
    vault.mkdir(parents=True)
    (vault / "key.txt").write_text(VAULT_SECRET + "\n")
    (world.ws / "projects" / "plan.txt").write_text("plan\n")


async def test_a_command_cannot_rename_a_secrets_folder(world):
    _vault(world)
    content = await shell(world, "mv projects projects2; mv projects/vault v2; "
                                 "cat projects*/vault/key.txt v2/key.txt; echo tried")
    assert VAULT_SECRET not in content and "tried" in content, content
    assert (world.ws / "projects" / "vault" / "key.txt").exists()  # nothing moved
    assert not (world.ws / "projects2").exists()
    # (mv copies what it cannot rename: at most the empty mask lands in v2)
    assert not (world.ws / "v2" / "key.txt").exists()


async def test_a_secrets_folder_renamed_by_the_person_stays_refused(world):
    """The person renames the folder between two commands: what the rule
    covered is still refused under its new name, by both kinds of tools."""
    _vault(world)
    first = await shell(world, "cat projects/plan.txt")
    assert "plan" in first
    os.rename(world.ws / "projects", world.ws / "projects2")
    second = await shell(world, "cat projects2/vault/key.txt; cat projects2/plan.txt")
    assert VAULT_SECRET not in second
    assert "plan" in second  # what was never secret stays readable
    said = await read(world, "projects2/vault/key.txt")
    assert said.startswith("REFUSED") and VAULT_SECRET not in said, said


async def test_a_command_cannot_move_the_agents_data(inner_world):
    world = inner_world
    agent = world.paths.root
    before = (agent / "secrets.toml").read_bytes()
    content = await shell(world, "mv .noema .noema2; mv .noema/agents .noema/a2; "
                                 "cat .noema*/*/t/secrets.toml; echo tried")
    assert AGENT_SECRET not in content and "tried" in content, content
    assert (agent / "secrets.toml").read_bytes() == before
    assert not (world.ws / ".noema2").exists()


async def test_the_agents_data_moved_by_the_person_stays_refused(inner_world):
    world = inner_world
    (world.paths.root / "turns.txt").write_text(CONVERSATION + "\n")  # no deny rule names it
    await shell(world, "true")
    os.rename(world.ws / ".noema", world.ws / ".noema2")
    renamed = world.ws / ".noema2" / world.paths.root.relative_to(world.ws / ".noema")
    for name in ("secrets.toml", "turns.txt"):
        said = await read(world, str(renamed / name))
        assert said.startswith("REFUSED") and AGENT_SECRET not in said, said
        assert CONVERSATION not in said
    result = await world.call("file_write", path=str(renamed / "config.toml"),
                              content='[shell]\nsandbox = "none"\n')
    assert result.is_error, result.content
    os.rename(world.ws / ".noema2", world.ws / ".noema")  # the agent's own data, put back


async def test_a_hard_link_to_the_agents_secrets_in_a_read_only_root(world):
    shelf = world.base / "shelf"
    shelf.mkdir()
    try:
        os.link(world.paths.root / "secrets.toml", shelf / "notes.toml")
    except OSError as exc:
        pytest.skip(f"no hard link here: {exc}")
    world.extra_roots = (RootSettings(path=shelf, mode="read-only"),)
    content = await shell(world, f"cat {shelf / 'notes.toml'}; echo done")
    assert AGENT_SECRET not in content and "done" in content, content
    said = await read(world, str(shelf / "notes.toml"))
    assert AGENT_SECRET not in said


async def test_another_noema_home_in_a_root_is_out_of_reach(world):
    """Someone else's Noema home lying in the workspace: neither tool reads
    it, and neither the start snapshot nor a command's version holds it."""
    bob = world.ws / "shared" / "bob-noema" / "agents" / "bob"
    bob.mkdir(parents=True)
    (bob / "turns.db").write_text(CONVERSATION + "\n")
    (bob / "config.toml").write_text("[shell]\nsandbox = 'bubblewrap'\n")
    hands = world.build()
    await hands.prepare()  # the start snapshot, in its child process
    await shell(world, "touch made-by-a-command")
    listed = world.git("ls-tree", "-r", "--name-only", "HEAD")
    assert "made-by-a-command" in listed
    assert "bob-noema" not in listed
    history = world.git("log", "-p", "--all")
    assert CONVERSATION not in history
    content = await shell(world, "cat shared/bob-noema/agents/bob/turns.db; "
                                 "grep -r ANOTHER shared; echo done")
    assert CONVERSATION not in content and "done" in content, content
    said = await read(world, "shared/bob-noema/agents/bob/turns.db")
    assert said.startswith("REFUSED") and CONVERSATION not in said, said
    result = await world.call("file_write", path="shared/bob-noema/agents/bob/config.toml",
                              content='[shell]\nsandbox = "none"\n')
    assert result.is_error, result.content
    assert "none" not in (bob / "config.toml").read_text()
