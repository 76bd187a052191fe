"""Nothing a command leaves is setuid, setgid or someone else's.

A root-run agent's command that copies a binary and makes it setuid would
leave a root door for every local user. The verdict comes from the file's
own mode and owner after the command, and from an unprivileged local user
(uid 65534) running what was left: `id -u` made setuid root would print 0.
Under bubblewrap the system-call filter refuses the bits; with the sandbox
turned off by the person the check after the command repairs them.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from noema.security.ownership import OwnershipGuard
from noema.security.settings import ShellSettings

from ..world import BWRAP, World

NOBODY = 65534
AS_ROOT = os.geteuid() == 0
SET_ID = stat.S_ISUID | stat.S_ISGID
ID = shutil.which("id") or "/usr/bin/id"


@pytest.fixture
def open_world() -> Iterator[World]:
    """A world in folders any local user may cross, so that another user can
    try what a command left."""
    base = Path(tempfile.mkdtemp(prefix="noema-setid-"))
    base.chmod(0o755)
    world = World.make(base)
    world.ws.chmod(0o755)
    try:
        yield world
    finally:
        world.close()
        shutil.rmtree(base, ignore_errors=True)


# Who runs what a command left: uid 65534 when the suite runs as root; else
# the suite's own unprivileged user.
OTHER = NOBODY if AS_ROOT else os.geteuid()
REFUSED_TO_RUN = "Permission denied"


def run_as_nobody(program: Path) -> str:
    """What `id -u` prints when an unprivileged user runs `program` (or
    "Permission denied" when that user may not run it)."""
    argv = [str(program), "-u"]
    if AS_ROOT:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is missing")
        argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except PermissionError:
        return REFUSED_TO_RUN
    out = done.stdout.strip() or done.stderr.strip()
    return REFUSED_TO_RUN if out.endswith(REFUSED_TO_RUN) else out


async def shell(world: World, command: str) -> str:
    result = await world.call("shell_execute", command=command)
    assert not result.is_error, result.content
    return result.content


def assert_harmless(path: Path) -> None:
    info = path.lstat()
    assert not info.st_mode & SET_ID, oct(info.st_mode)
    assert info.st_uid == os.geteuid()


ATTEMPTS = {
    "chmod": f"cp {ID} door && chmod 4755 door",
    "symbolic chmod": f"cp {ID} door && chmod u+s,g+s door",
    "install": f"install -m 6755 {ID} door",
    "created with the bits": (
        "python3 -c \"import os, shutil\n"
        f"fd = os.open('door', os.O_CREAT | os.O_WRONLY, 0o4755)\n"
        f"os.write(fd, open('{ID}', 'rb').read()); os.close(fd)\""
    ),
    "fchmod": (
        f"cp {ID} door && python3 -c \"import os\n"
        "fd = os.open('door', os.O_RDONLY); os.fchmod(fd, 0o4755)\""
    ),
    "in a new ignored folder": (
        f"printf 'build/\\n' > .gitignore && mkdir -p build/bin && cp {ID} build/bin/door "
        "&& chmod 4755 build/bin/door && ln -s build/bin/door door"
    ),
}


@pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")
@pytest.mark.parametrize("how", sorted(ATTEMPTS))
async def test_a_sandboxed_command_cannot_leave_a_setuid_file(open_world, how):
    await shell(open_world, ATTEMPTS[how])
    door = open_world.ws / "door"
    if door.exists():  # (a refusal may leave a copy; install leaves it unreadable)
        assert_harmless(door.resolve())
        assert run_as_nobody(door) in (str(OTHER), REFUSED_TO_RUN)


@pytest.mark.skipif(not AS_ROOT, reason="only root can give files away or keep setuid root")
@pytest.mark.parametrize("how", sorted(ATTEMPTS))
async def test_without_the_sandbox_the_check_after_repairs_it(open_world, how):
    """The person turned the sandbox off: the command really made the file
    setuid root; the check after it takes the bits away, and says so."""
    open_world.build(shell=ShellSettings(sandbox="none"))
    content = await shell(open_world, ATTEMPTS[how])
    door = (open_world.ws / "door").resolve()
    assert door.exists(), content
    assert_harmless(door)
    assert run_as_nobody(door) == str(OTHER)
    assert "the bit was removed" in content


@pytest.mark.skipif(not AS_ROOT, reason="only root can give files away")
async def test_a_file_given_to_another_user_is_given_back(open_world):
    open_world.build(shell=ShellSettings(sandbox="none"))
    content = await shell(open_world, f"mkdir -p gift && cp {ID} gift/door && "
                                      f"chown {NOBODY}:{NOBODY} gift gift/door && chmod 6755 gift/door")
    for path in (open_world.ws / "gift", open_world.ws / "gift" / "door"):
        assert path.lstat().st_uid == 0, path
    assert_harmless(open_world.ws / "gift" / "door")
    assert "given back to uid 0" in content


@pytest.mark.skipif(not AS_ROOT, reason="only root can keep setuid root files")
async def test_the_persons_own_setuid_file_is_left_alone(open_world):
    """A setuid file the person had before the commands is theirs: a command
    that does not touch it leaves it as it was."""
    own = open_world.ws / "persons-tool"
    shutil.copy(ID, own)
    own.chmod(0o4755)
    open_world.build(shell=ShellSettings(sandbox="none"))
    await shell(open_world, "touch other && ls -l > listing")
    assert own.stat().st_mode & stat.S_ISUID


@pytest.mark.skipif(not AS_ROOT, reason="only root can keep setuid root files")
def test_a_full_walk_when_notifications_cannot_tell(tmp_path):
    """Without change notifications the guard walks the whole root and still
    finds a file made setuid deep down, but not the person's earlier one."""
    own = tmp_path / "own"
    shutil.copy(ID, own)
    own.chmod(0o4755)
    guard = OwnershipGuard([tmp_path])
    guard.before()
    for feed in guard._feeds.values():
        feed.close()
    guard._feeds.clear()  # as if inotify had been unavailable: EVERYTHING
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    shutil.copy(ID, deep / "door")
    (deep / "door").chmod(0o2755)
    done = guard.after()
    assert [r.path for r in done] == [deep / "door"]
    assert_harmless(deep / "door")
    assert own.stat().st_mode & stat.S_ISUID
    guard.close()
