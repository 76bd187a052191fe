"""Commands run with the person's umask, not the agent's private one: what a
command makes in the workspace has the modes the person's own shell gives."""

from __future__ import annotations

import pytest

from noema.privacy import shell_with_person_umask
from noema.security.settings import ShellSettings

from .world import BWRAP, World


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
