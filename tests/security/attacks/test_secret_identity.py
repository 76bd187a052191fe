"""A secret is decided at the open by what the file is then, and keeps being
one under any name.

The attacks: the command makes an empty `.env` and reads it once the person
has written their secret into it; it makes and deletes hundreds of files so
that the person's new `.env` is given an inode number the command's own file
had; the person gives a masked secret another name (a hard link) while the
command runs; the person renames `.env` to `env.old` between two commands,
and the shell, `file_read` and the version history are each asked for it.
"""

from __future__ import annotations

import os

import pytest

from ..world import BWRAP, World
from .history_scan import history_holds
from .person import WAIT_DONE, Person

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")

CANARY = "CANARY-IDENTITY-5802"


async def shell(world: World, command: str) -> str:
    result = await world.call("shell_execute", command=command)
    assert not result.is_error, result.content
    return result.content


async def test_a_file_the_command_made_is_refused_once_it_holds_the_person_s_secret(world):
    with Person(world.ws, "create", ".env", CANARY):
        out = await shell(world, ": > .env; " + WAIT_DONE + "; cat .env; cp .env c; echo end")
    assert "end" in out, out
    assert CANARY not in out and "Permission denied" in out, out
    assert (world.ws / ".env").read_text().startswith(CANARY)  # written in the command's file


async def test_a_reused_inode_number_does_not_make_the_person_s_secret_the_command_s(world):
    churn = "mkdir churn && for i in $(seq 400); do : > churn/f$i; done && rm -r churn; "
    with Person(world.ws, "create", ".env", CANARY):
        out = await shell(world, churn + WAIT_DONE + "; cat .env; echo end")
    assert "end" in out, out
    assert CANARY not in out, out


@pytest.mark.parametrize("action", ["link", "rename"])
async def test_another_name_the_person_gives_a_masked_secret_is_refused(world, action):
    (world.ws / ".env").write_text(CANARY + "\n")
    with Person(world.ws, action, ".env", "notes.bak"):
        out = await shell(world, WAIT_DONE + "; cat notes.bak; echo end")
    assert "end" in out, out
    assert CANARY not in out and "Permission denied" in out, out


async def test_a_secret_renamed_between_commands_stays_one_for_every_tool(world):
    (world.ws / ".env").write_text(CANARY + "\n")
    out = await shell(world, "cat .env; echo first")  # the masks meet it under its name
    assert "first" in out and CANARY not in out, out
    os.rename(world.ws / ".env", world.ws / "env.old")
    out = await shell(world, "cat env.old; cp env.old copied; echo second")
    assert "second" in out and CANARY not in out, out
    read = await world.call("file_read", path="env.old")
    assert read.is_error and CANARY not in read.content, read.content
    await world.call("file_write", path="later.txt", content="a version after the rename\n")
    assert not history_holds(world.gitdir(), CANARY)
    assert (world.ws / "env.old").read_text() == CANARY + "\n"  # left alone


async def test_a_secret_the_file_tools_refused_stays_refused_under_a_new_name(world):
    (world.ws / ".env").write_text(CANARY + "\n")
    refused = await world.call("file_read", path=".env")
    assert refused.is_error
    os.rename(world.ws / ".env", world.ws / "env.old")
    read = await world.call("file_read", path="env.old")
    assert read.is_error and CANARY not in read.content, read.content
    out = await shell(world, "cat env.old; echo end")
    assert "end" in out and CANARY not in out, out


async def test_nothing_new_is_made_in_a_secret_folder_that_appears(world):
    with Person(world.ws, "create", ".ssh/id_rsa", CANARY):
        out = await shell(world, WAIT_DONE + "; echo planted > .ssh/authorized_keys; "
                                             "cat .ssh/id_rsa; echo end")
    assert "end" in out and CANARY not in out, out
    assert out.count("Permission denied") == 2, out
    assert not (world.ws / ".ssh" / "authorized_keys").exists()
