"""A sandbox start that fails before the command runs is made again.

Files come and go on a person's machine: one the sandbox was to mask may
vanish between the scan and bubblewrap's mounts, which then fail. The start
is made again from a fresh scan (at most three runs), and only when
bubblewrap says it did not start the command: a command that ran is never
run twice, even one that fails the way bubblewrap does. The moment between
the scan and the start is reached through `Sandbox.before_start`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from noema.security.sandbox import Layout, Output, Sandbox
from noema.security.settings import ShellSettings

from .world import BWRAP

pytestmark = [
    pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here"),
    pytest.mark.slow,
]


def _layout(tmp_path: Path) -> tuple[Layout, Path]:
    """A workspace and a read-only root holding a hidden file in a folder."""
    ws, ro = tmp_path / "ws", tmp_path / "ro"
    ws.mkdir()
    (ro / "keys").mkdir(parents=True)
    secret = ro / "keys" / "secret.txt"
    secret.write_text("SECRET-8812\n")
    return Layout(ws, (ws,), (ro,), (secret,)), ro


async def _ready(layout: Layout) -> tuple[Sandbox, list[list[str]]]:
    sandbox = Sandbox(ShellSettings())
    await sandbox.check(layout)  # its probe is not what these tests watch
    starts: list[list[str]] = []
    return sandbox, starts


async def test_a_hidden_file_that_vanishes_just_before_the_start_does_not_fail_the_command(
    tmp_path,
):
    layout, ro = _layout(tmp_path)
    sandbox, starts = await _ready(layout)

    def vanish_once(argv: list[str]) -> None:
        starts.append(argv)
        if len(starts) == 1:
            assert str(ro / "keys" / "secret.txt") in argv  # it was to be masked
            shutil.rmtree(ro / "keys")

    sandbox.before_start = vanish_once
    output = Output(4000)
    finished = await sandbox.run(layout, "echo ran >> ran.txt; echo done", 20, output)
    assert finished.exit_code == 0 and finished.output == "done\n", finished.output
    assert output.render() == "done\n"  # the failed start's words are gone
    assert len(starts) == 2 and str(ro / "keys" / "secret.txt") not in starts[1]
    assert (layout.workdir / "ran.txt").read_text() == "ran\n"


async def test_the_probe_is_made_again_too(tmp_path):
    layout, ro = _layout(tmp_path)
    sandbox = Sandbox(ShellSettings())
    starts: list[list[str]] = []

    def vanish_once(argv: list[str]) -> None:
        starts.append(argv)
        if len(starts) == 1:
            shutil.rmtree(ro / "keys")

    sandbox.before_start = vanish_once
    await sandbox.check(layout)  # would raise SandboxUnavailable
    assert len(starts) == 2


async def test_a_command_that_started_is_never_run_again(tmp_path):
    layout, _ = _layout(tmp_path)
    sandbox, starts = await _ready(layout)
    sandbox.before_start = starts.append
    lookalike = "bwrap: Cannot mkdir parents for /srv/x/y: Read-only file system"
    finished = await sandbox.run(
        layout, f"echo ran >> ran.txt; echo '{lookalike}' >&2; exit 1", 20, Output(4000)
    )
    assert finished.exit_code == 1 and lookalike in finished.output
    assert len(starts) == 1
    assert (layout.workdir / "ran.txt").read_text() == "ran\n"


async def test_a_start_that_keeps_failing_is_made_three_times_and_reported(tmp_path):
    layout, ro = _layout(tmp_path)
    sandbox, starts = await _ready(layout)

    def impossible_mount(argv: list[str]) -> None:
        starts.append(argv)
        at = argv.index("--chdir")  # bubblewrap's own options, after the roots
        argv[at:at] = ["--ro-bind", "/dev/null", str(ro / "never" / "there")]

    sandbox.before_start = impossible_mount
    finished = await sandbox.run(layout, "echo ran >> ran.txt", 20, Output(4000))
    assert len(starts) == 3
    assert finished.exit_code == 1
    assert finished.output.count("bwrap:") == 1 and "never/there" in finished.output
    assert not (layout.workdir / "ran.txt").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="root-only files are masked for root only")
async def test_a_root_only_file_removed_just_before_the_start_does_not_fail_the_command(
    tmp_path,
):
    """The case seen: another program removed its root-only file from /srv
    between the sandbox's scan and bubblewrap's mounts."""
    ws = tmp_path / "ws"
    ws.mkdir()
    layout = Layout(ws, (ws,))
    folder = Path(tempfile.mkdtemp(prefix="noema-late-", dir="/srv"))
    folder.chmod(0o755)  # listable: the file is what is masked, in a folder of its own
    try:
        late = folder / "late-password"
        late.write_text("LATE-PASSWORD-7730\n")
        late.chmod(0o600)
        sandbox, starts = await _ready(layout)

        def remove_once(argv: list[str]) -> None:
            starts.append(argv)
            if len(starts) == 1:
                assert str(late) in argv
                shutil.rmtree(folder)

        sandbox.before_start = remove_once
        finished = await sandbox.run(layout, "echo done", 20, Output(4000))
        assert finished.exit_code == 0 and finished.output == "done\n", finished.output
        assert len(starts) == 2
    finally:
        shutil.rmtree(folder, ignore_errors=True)
