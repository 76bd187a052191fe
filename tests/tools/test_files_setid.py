"""A write over a setuid or setgid file drops the bits, as the kernel does on a
write by someone without CAP_FSETID, whoever the agent runs as (these run as
root when the suite does: the case that matters)."""

from __future__ import annotations

import os
import stat

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noema.security.fsafe import written_mode
from tests.security.world import World

SETUID_PROGRAM = 0o4755


def mode_of(world: World, name: str) -> int:
    return stat.S_IMODE(os.stat(world.ws / name).st_mode)


def setid_file(world: World, name: str, mode: int, text: str = "one\ntwo\n") -> None:
    path = world.ws / name
    path.write_text(text)
    os.chmod(path, mode)
    assert mode_of(world, name) == mode  # a real setuid file, not one the umask trimmed


WRITES = {
    "file_write": {"content": "echo agent\n"},
    "file_search_and_replace": {"old_text": "two", "new_text": "2"},
    "file_patch": {"unified_diff": "@@ -2 +2 @@\n-two\n+2\n"},
}


@pytest.mark.parametrize("tool", WRITES)
async def test_every_write_of_the_file_tools_drops_setuid(world: World, tool):
    setid_file(world, "door", SETUID_PROGRAM)
    result = await world.call(tool, path="door", **WRITES[tool])
    assert not result.is_error, result.content
    assert mode_of(world, "door") == 0o755


async def test_a_restore_over_a_setuid_file_drops_it(world: World):
    await world.call("file_write", path="door", content="first\n")
    oldest = (await world.call("file_history", path="door")).content.splitlines()[1].split()[0]
    setid_file(world, "door", SETUID_PROGRAM, "person's program\n")
    restored = await world.call("file_restore", path="door", version=oldest)
    assert not restored.is_error, restored.content
    assert (world.ws / "door").read_text() == "first\n"
    assert not mode_of(world, "door") & (stat.S_ISUID | stat.S_ISGID)


async def test_setgid_goes_with_group_execute_and_stays_without_it(world: World):
    setid_file(world, "group-door", 0o2755)
    setid_file(world, "locking", 0o2644)  # mandatory locking's mark: no privilege in it
    for name in ("group-door", "locking"):
        await world.call("file_write", path=name, content="new\n")
    assert mode_of(world, "group-door") == 0o755
    assert mode_of(world, "locking") == 0o2644


@given(st.integers(min_value=0, max_value=0o7777))
def test_a_written_mode_never_runs_as_the_owner_and_keeps_the_rest(mode):
    kept = written_mode(mode | stat.S_IFREG)
    assert not kept & stat.S_ISUID
    assert not (kept & stat.S_ISGID and kept & stat.S_IXGRP)
    assert kept & 0o1777 == mode & 0o1777  # sticky and the permission bits are untouched
