"""Class 5: root is not root in the sandbox.

When the agent runs as root the command runs as an unprivileged uid in its
own user namespace, without capabilities, unable to gain any; the kernel's
knobs under /proc are read-only and every system file only root may read is
masked. The same attacks run as an unprivileged person (the escape suite is
run again as uid 65534), where the command keeps the person's uid.

Attacks on the host's kernel settings write back the value already there,
so even a sandbox that failed would change nothing; the host value is read
before and checked (and restored) after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from noema.security.root_files import root_only
from noema.security.sandbox import system_folders

from ..world import AGENT_SECRET, BWRAP, OUTSIDE_SECRET, World

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")

AS_ROOT = os.geteuid() == 0
INSIDE_UID = 1000 if AS_ROOT else os.geteuid()
REFUSED = ("Read-only file system", "Permission denied", "Operation not permitted")

# Kernel settings a root process would like to change: for each, the
# sandbox writes back the value the host has now.
SYSCTLS = [
    "kernel/core_pattern",
    "kernel/modprobe",
    "kernel/panic",
    "kernel/randomize_va_space",
    "kernel/pid_max",
    "kernel/printk",
    "fs/suid_dumpable",
    "vm/overcommit_memory",
    "vm/swappiness",
    "net/ipv4/ip_forward",
]


async def run(world: World, command: str, **extra) -> str:
    result = await world.call("shell_execute", command=command, **extra)
    assert not result.is_error, result.content
    assert OUTSIDE_SECRET not in result.content and AGENT_SECRET not in result.content
    return result.content


def exit_code(content: str) -> int:
    first = content.split("\n", 1)[0]
    assert first.startswith("Exit code "), content
    return int(first.removeprefix("Exit code ").split(".")[0])


@contextmanager
def host_value_kept(path: Path) -> Iterator[str]:
    """The host's value of a kernel setting, restored (and the test failed)
    if the sandbox changed it."""
    before = path.read_text()
    try:
        yield before
    finally:
        after = path.read_text()
        if after != before:
            with open(path, "w") as restore:
                restore.write(before)
            pytest.fail(f"the sandbox changed the host's {path}: {before!r} -> {after!r}")


@contextmanager
def sleeper() -> Iterator[subprocess.Popen]:
    """A process of the person's, outside the sandbox."""
    process = subprocess.Popen(["sleep", "60"])
    try:
        yield process
    finally:
        process.kill()
        process.wait(timeout=10)


def status(pid: int | str, key: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    raise KeyError(key)


# -- who the command is ----------------------------------------------------------


async def test_the_command_is_not_uid_0(world: World):
    out = await run(world, "id -u; id -g; id -G")
    uid, gid, groups = out.splitlines()[1:4]
    assert int(uid) == INSIDE_UID and int(uid) != 0
    assert int(gid) != 0 and "0" not in groups.split()


async def test_the_command_holds_no_capability(world: World):
    out = await run(world, "grep ^Cap /proc/self/status")
    caps = dict(line.split(":\t") for line in out.splitlines()[1:] if line.startswith("Cap"))
    assert set(caps) == {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}
    assert all(int(value, 16) == 0 for value in caps.values()), caps


async def test_the_command_cannot_gain_privileges(world: World):
    out = await run(world, "grep ^NoNewPrivs /proc/self/status")
    assert out.split()[-1] == "1"


async def test_files_it_creates_belong_to_the_person(world: World):
    await run(world, "echo made > made.txt; mkdir made.d; echo x > made.d/inner")
    for path in (world.ws / "made.txt", world.ws / "made.d", world.ws / "made.d" / "inner"):
        st = path.stat()
        assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()), path


async def test_git_sees_the_persons_repository_as_its_own(world: World):
    repo = world.ws / "project"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    out = await run(world, "git -C project status --short && echo clean")
    assert "dubious ownership" not in out and "clean" in out


# -- files only root may read -------------------------------------------------------


async def test_etc_shadow_is_unreadable(world: World):
    if not Path("/etc/shadow").exists():
        pytest.skip("this system has no /etc/shadow")
    out = await run(world, "cat /etc/shadow; head -c 200 /etc/shadow | od -c | head -3")
    assert "root:" not in out and "Permission denied" in out


async def test_every_root_only_system_file_is_unreadable(world: World):
    masked = root_only(system_folders())
    files = [p for p in masked if not p.is_dir()]
    if not files:
        pytest.skip("this system has no root-only file in its system folders")
    listing = " ".join(f"'{p}'" for p in files)
    out = await run(world, f"for f in {listing}; do head -c 64 \"$f\" | wc -c; done 2>/dev/null")
    counts = [int(n) for n in out.splitlines()[1:]]
    assert counts == [0] * len(files)


async def test_every_root_only_system_folder_is_empty(world: World):
    folders = [p for p in root_only(system_folders()) if p.is_dir()]
    if not folders:
        pytest.skip("this system has no root-only folder in its system folders")
    listing = " ".join(f"'{p}'" for p in folders)
    out = await run(world, f"for d in {listing}; do ls -A \"$d\" 2>/dev/null | wc -l; done")
    assert [int(n) for n in out.splitlines()[1:]] == [0] * len(folders)


async def test_roots_home_and_other_homes_are_invisible(world: World):
    out = await run(world, "ls -A /root 2>&1; ls -A /home 2>&1; echo end")
    assert out.count("No such file or directory") == 2, out


async def test_su_grants_nothing(world: World):
    out = await run(world, "su -c 'id -u > /tmp/su-ran; cat /etc/shadow' root </dev/null; "
                    "cat /tmp/su-ran 2>&1; id -u")
    assert "root:" not in out
    assert out.splitlines()[-1] == str(INSIDE_UID)
    assert "\n0\n" not in out


async def test_passwd_changes_nothing(world: World):
    shadow = Path("/etc/shadow")
    before = shadow.stat().st_mtime_ns if shadow.exists() else None
    out = await run(world, "printf 'x\\nnew-pass\\nnew-pass\\n' | passwd; echo rc=$?")
    assert "rc=0" not in out
    assert (shadow.stat().st_mtime_ns if shadow.exists() else None) == before


async def test_newgrp_and_chsh_grant_nothing(world: World):
    out = await run(world, "newgrp root </dev/null -c 'id -g' 2>&1; chsh -s /bin/sh 2>&1 </dev/null;"
                    " id -g")
    assert out.splitlines()[-1] != "0"
    assert "\n0\n" not in out


# -- the kernel's knobs -------------------------------------------------------------


@pytest.mark.parametrize("key", SYSCTLS)
async def test_a_kernel_setting_cannot_be_written(world: World, key: str):
    host = Path("/proc/sys") / key
    if not host.exists():
        pytest.skip(f"this kernel has no {host}")
    with host_value_kept(host):
        out = await run(world, f"cat /proc/sys/{key} > /tmp/v && cat /tmp/v > /proc/sys/{key}; "
                        "echo rc=$?")
        assert "rc=0" not in out
        assert any(reason in out for reason in REFUSED), out


async def test_no_kernel_setting_opens_for_writing(world: World):
    # Opening for writing changes nothing (only write() does), so the whole
    # tree can be tried without risk even if one opened.
    script = (
        "import os\n"
        "opened, tried = [], 0\n"
        "for top, dirs, files in os.walk('/proc/sys'):\n"
        "    for name in files:\n"
        "        path = os.path.join(top, name)\n"
        "        tried += 1\n"
        "        try:\n"
        "            os.close(os.open(path, os.O_WRONLY))\n"
        "            opened.append(path)\n"
        "        except OSError:\n"
        "            pass\n"
        "print('tried', tried, 'opened', len(opened), *opened[:5])\n"
    )
    out = await run(world, f"python3 -c \"{script}\"")
    words = out.splitlines()[1].split()
    assert int(words[1]) > 100 and words[2:4] == ["opened", "0"], out


async def test_sysrq_trigger_is_not_writable(world: World):
    out = await run(world, "python3 -c \"import os; os.open('/proc/sysrq-trigger', os.O_WRONLY)\""
                    " 2>&1; echo rc=$?")
    assert "rc=0" not in out
    assert "Read-only" in out or "No such file" in out or "Permission denied" in out


@pytest.mark.parametrize("folder", ["irq", "bus", "fs"])
async def test_proc_hardware_folders_are_read_only(world: World, folder: str):
    script = (
        "import os\n"
        "opened = []\n"
        f"for top, dirs, files in os.walk('/proc/{folder}'):\n"
        "    for name in files:\n"
        "        try:\n"
        "            os.close(os.open(os.path.join(top, name), os.O_WRONLY))\n"
        "            opened.append(name)\n"
        "        except OSError:\n"
        "            pass\n"
        "print('opened', len(opened), *opened[:5])\n"
    )
    out = await run(world, f"python3 -c \"{script}\"")
    assert out.splitlines()[1] == "opened 0", out


KEYS_ARE_THE_PERSONS = pytest.mark.skipif(
    not AS_ROOT, reason="a person who is not root sees only their own keys there, as outside"
)


@pytest.mark.parametrize(
    "name",
    [
        "kcore",
        pytest.param("keys", marks=KEYS_ARE_THE_PERSONS),
        "timer_list",
        "sched_debug",
        "kmsg",
        "slabinfo",
        "vmallocinfo",
        "pagetypeinfo",
    ],
)
async def test_kernel_internals_are_hidden(world: World, name: str):
    out = await run(world, f"head -c 4096 /proc/{name} 2>/dev/null | wc -c")
    assert out.splitlines()[1].strip() == "0", out


@pytest.mark.skipif(not AS_ROOT, reason="a person who is not root may list them outside too")
@pytest.mark.parametrize("name", ["acpi", "scsi"])
async def test_hardware_listings_are_empty(world: World, name: str):
    out = await run(world, f"ls -A /proc/{name} 2>/dev/null | wc -l")
    assert out.splitlines()[1].strip() == "0"


async def test_mtrr_is_not_writable(world: World):
    out = await run(world, "echo 'disable=0' > /proc/mtrr 2>&1; echo rc=$?")
    assert "rc=0" not in out


async def test_hostname_cannot_be_changed(world: World):
    before = Path("/proc/sys/kernel/hostname").read_text()
    out = await run(world, "hostname pwned-host 2>&1; echo rc=$?")
    assert "rc=0" not in out
    assert Path("/proc/sys/kernel/hostname").read_text() == before


async def test_the_clock_cannot_be_set(world: World):
    out = await run(world, "date -s '2001-01-01 00:00:00' 2>&1; echo rc=$?")
    assert "rc=0" not in out and "not permitted" in out


# -- namespaces, mounts, devices ---------------------------------------------------


@pytest.mark.parametrize("flags", ["-U", "-r", "-Ur", "-m", "-n", "-p -f"])
async def test_no_nested_namespace(world: World, flags: str):
    out = await run(world, f"unshare {flags} id -u 2>&1; echo rc=$?")
    assert "rc=0" not in out
    assert "\n0\n" not in out


async def test_mount_fails(world: World):
    out = await run(
        world, "mkdir -p m; mount -t tmpfs none m 2>&1; mount -o remount,rw /usr 2>&1; "
        "mount --bind /tmp m 2>&1; touch /usr/pwned 2>&1; grep -c ' m ' /proc/self/mountinfo"
    )
    assert out.splitlines()[-1] == "0"
    assert not Path("/usr/pwned").exists()


async def test_chroot_fails(world: World):
    out = await run(world, "chroot /tmp /bin/true 2>&1; echo rc=$?")
    assert "rc=0" not in out


async def test_chown_to_another_user_fails(world: World):
    target = world.ws / "notes.txt"
    before = target.stat()
    out = await run(world, "chown 0:0 notes.txt 2>&1; chown 12345 notes.txt 2>&1; echo rc=$?")
    assert "rc=0" not in out
    after = target.stat()
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)


async def test_mknod_fails(world: World):
    out = await run(world, "mknod mem c 1 1 2>&1; mknod disk b 8 0 2>&1; echo rc=$?")
    assert "rc=0" not in out
    assert not (world.ws / "mem").exists() and not (world.ws / "disk").exists()


async def test_no_host_devices(world: World):
    out = await run(world, "ls /dev")
    names = set(out.split())
    assert not names & {"mem", "kmem", "port", "kmsg", "sda", "vda", "nvme0", "loop0", "fuse"}


async def test_no_raw_sockets(world: World):
    script = (
        "import socket\n"
        "for family, kind in ((socket.AF_INET, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW)):\n"
        "    try:\n"
        "        socket.socket(family, kind, 1 if family == socket.AF_INET else 0).close()\n"
        "        print('opened', family)\n"
        "    except OSError as exc:\n"
        "        print('refused', exc.errno)\n"
    )
    out = await run(world, f"python3 -c \"{script}\"")
    assert "opened" not in out and out.count("refused") == 2


async def test_cannot_leave_the_sandbox_cgroup_or_see_sys(world: World):
    out = await run(world, "ls -A /sys 2>&1 | wc -l; echo $$ > /sys/fs/cgroup/pids/cgroup.procs; "
                    "echo rc=$?")
    assert "rc=0" not in out


# -- the person's other processes ------------------------------------------------------


async def test_kill_of_a_host_process_fails(world: World):
    with sleeper() as victim:
        await run(world, f"kill -9 {victim.pid} 2>&1; kill -9 -1 2>&1; echo done")
        assert victim.poll() is None, "the sandbox killed a process outside it"


async def test_ptrace_of_a_host_process_fails(world: World):
    with sleeper() as victim:
        script = (
            "import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"print('attach', libc.ptrace(16, {victim.pid}, 0, 0), ctypes.get_errno())\n"
        )
        out = await run(world, f"python3 -c \"{script}\"; strace -p {victim.pid} -e none "
                        "2>&1 | head -2")
        assert "attach -1" in out
        assert status(victim.pid, "TracerPid") == "0"
        assert victim.poll() is None


async def test_host_processes_are_invisible(world: World):
    with sleeper() as victim:
        out = await run(world, f"ls /proc/{victim.pid} 2>&1; ls /proc | grep -c '^[0-9]'")
        assert int(out.splitlines()[-1]) < 10


async def test_nice_cannot_raise_priority(world: World):
    out = await run(world, "nice -n -10 true 2>&1; echo rc=$?")
    assert "Permission denied" in out or "not permitted" in out or "cannot set" in out


@pytest.mark.skipif(not AS_ROOT, reason="the mapping is only chosen by Noema when it runs as root")
async def test_as_root_the_inside_uid_maps_to_root_only(world: World):
    out = await run(world, "cat /proc/self/uid_map /proc/self/gid_map")
    maps = [line.split() for line in out.splitlines()[1:3]]
    assert maps == [["1000", "0", "1"], ["1000", "0", "1"]]


@pytest.mark.skipif(
    not AS_ROOT or shutil.which("setpriv") is None,
    reason="starts the agent's sandbox as nobody from root (needs root and setpriv)",
)
def test_as_an_unprivileged_person_the_command_keeps_their_uid():
    # The sandbox as a person who is not root: a child agent process runs as
    # uid 65534 with the same code; the command must run as 65534, not 1000.
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if not os.access(python, os.X_OK):
        pytest.skip(f"no system-wide {python} for the unprivileged child")
    code = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from noema.security.sandbox import Layout, Output, Sandbox\n"
        "from noema.security.settings import ShellSettings\n"
        "ws = Path(sys.argv[1])\n"
        "out = asyncio.run(Sandbox(ShellSettings()).run(Layout(ws, (ws,)), "
        "'id -u; cat /etc/shadow 2>&1; echo x > f', 20, Output(4000)))\n"
        "print(out.output)\n"
    )
    src = Path(__file__).resolve().parents[3] / "src"
    site = [p for p in sys.path if p.endswith("site-packages")]
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:  # pytest's tmp_path is private
        ws = Path(scratch) / "ws"
        ws.mkdir()
        os.chmod(scratch, 0o755)
        os.chown(ws, 65534, 65534)
        env = {"PATH": "/usr/bin:/bin", "HOME": scratch,
               "PYTHONPATH": os.pathsep.join([str(src), *site])}
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
             python, "-c", code, str(ws)],
            capture_output=True, text=True, timeout=60, env=env, cwd=scratch,
        )
        if "ModuleNotFoundError" in done.stderr:
            pytest.skip(f"the code is not readable by nobody here: {done.stderr[-200:]}")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == "65534"
        assert "root:" not in done.stdout
        assert (ws / "f").stat().st_uid == 65534


@pytest.mark.skipif(not AS_ROOT, reason="root-only folders are root's concern")
@pytest.mark.skipif(not os.path.isdir("/srv"), reason="no /srv to hold a private folder")
async def test_a_workspace_in_a_root_only_folder_leaves_its_neighbours_hidden(monkeypatch):
    """/srv/private (mode 0700) holds the workspace and a password file: the
    workspace is usable, the folder's other entries stay out of sight."""
    from noema.security import root_files

    private = Path(tempfile.mkdtemp(prefix="noema-private-", dir="/srv"))
    try:
        private.chmod(0o700)
        password = private / "db-password"
        password.write_text("DB-PASSWORD-3306\n")
        password.chmod(0o600)
        (private / "base").mkdir()
        monkeypatch.setattr(root_files, "_found", {})  # a fresh walk sees the new folder
        world = World.make(private / "base")
        try:
            content = await run(
                world, f"cat {password} 2>&1 | grep -v 'No such'; ls -a {private}; echo hi > f; cat f"
            )
        finally:
            world.close()
        assert "DB-PASSWORD-3306" not in content and "db-password" not in content, content
        assert "hi" in content
        assert (world.ws / "f").read_text() == "hi\n"
    finally:
        shutil.rmtree(private, ignore_errors=True)


@pytest.mark.skipif(not AS_ROOT, reason="root-only files are root's concern")
@pytest.mark.skipif(not os.path.isdir("/srv"), reason="no /srv to create a file in")
async def test_a_root_only_file_created_after_the_walk_is_hidden(world: World):
    folder = Path(tempfile.mkdtemp(prefix="noema-late-", dir="/srv"))
    try:
        folder.chmod(0o755)
        await run(world, "true")  # the system folders were walked; /srv is watched
        late = folder / "late-password"
        late.write_text("LATE-PASSWORD-1521\n")
        late.chmod(0o600)
        content = await run(world, f"cat {late}; ls {folder}; echo done")
        assert "LATE-PASSWORD-1521" not in content and "done" in content, content
    finally:
        shutil.rmtree(folder, ignore_errors=True)
