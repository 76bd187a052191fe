"""`noema diff PATH` of a file that never existed says so, and one that did
(or does) is still shown as before."""

from __future__ import annotations

import pytest

from noema.interfaces.commands import versions as versions_cli
from noema.interfaces.commands.versions import VersionsCommandError

from .world import World


async def test_a_file_that_never_existed_is_said_so(world: World):
    files = world.settings().files
    await world.call("file_write", path="a.txt", content="one\n")
    with pytest.raises(VersionsCommandError, match=r"typo\.txt has never existed in .*no version"):
        versions_cli.diff(files, world.paths, "typo.txt")
    with pytest.raises(VersionsCommandError, match="has never existed"):
        versions_cli.diff(files, world.paths, "no/such/folder")


async def test_unchanged_deleted_and_new_files_are_not_called_never_existing(world: World):
    files = world.settings().files
    await world.call("file_write", path="a.txt", content="one\n")
    assert versions_cli.diff(files, world.paths, "a.txt") == "No changes since the last version."
    (world.ws / "a.txt").unlink()  # deleted since: the diff shows it going
    assert "-one" in versions_cli.diff(files, world.paths, "a.txt")
    await world.call("file_write", path="a.txt", content="one\n")
    (world.ws / "fresh.txt").write_text("new\n")  # on disk, in no version yet
    assert "+new" in versions_cli.diff(files, world.paths, "fresh.txt")
