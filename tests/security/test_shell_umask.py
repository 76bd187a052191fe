"""Commands run with the person's umask, not the agent's private one: what a
command makes in the workspace has the modes the person's own shell gives."""

from __future__ import annotations

import os

import pytest

from noema.privacy import go_private, person_umask, shell_with_person_umask
from noema.security.settings import ShellSettings

from .world import BWRAP, World


@pytest.fixture
def private_process():
    """This process as the `noema` command runs it: under the umask 077, the
    person's own (the one the tests run with) remembered."""
    previous = os.umask(0o077)
    os.umask(previous)
    go_private()
    os.umask(0o077)
    try:
        assert person_umask() != 0o077
        yield person_umask()
    finally:
        os.umask(previous)


@pytest.mark.parametrize("sandbox", [
    pytest.param("bubblewrap", marks=pytest.mark.skipif(not BWRAP, reason="no sandbox here")),
    "none",
])
async def test_a_command_makes_files_with_the_persons_modes(world: World, private_process,
                                                            sandbox):
    world.build(shell=ShellSettings(sandbox=sandbox))
    result = await world.call("shell_execute", command="umask; mkdir made; echo x > made/f")
    assert not result.is_error, result.content
    assert f"{private_process:04o}" in result.content
    file_mode = 0o666 & ~private_process
    assert (world.ws / "made" / "f").stat().st_mode & 0o777 == file_mode
    assert (world.ws / "made").stat().st_mode & 0o777 == 0o777 & ~private_process


def test_the_command_is_unchanged_when_the_process_has_the_persons_umask():
    assert shell_with_person_umask("ls -la") == "ls -la"  # the tests' own umask is the person's
