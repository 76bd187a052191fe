"""The person's session and the sandbox's own init, out of a command's reach.

A command inherits the session of whoever started the agent: its keyring
(the person's keys: a Kerberos ticket, a disk key, a token a tool stored
there) would be read with `keyctl`. And bubblewrap's init (process 1 of the
command's namespace) runs as the same user: a command that attached to it,
read its memory or took its descriptors could change what the agent is told
about the command's end. Each route is tried from inside the sandbox.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets

import pytest

from ..world import BWRAP, World

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")

_KEY_SPEC_SESSION = -3
_KEYCTL_REVOKE = 3
_KEYCTL_UNLINK = 9

# Looks the key up in the session keyring it inherited and reads it.
KEY_THIEF = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
number = {"x86_64": 250, "aarch64": 219}[__import__("platform").machine()]
key = libc.syscall(number, 10, -3, b"user", sys.argv[1].encode(), 0)  # KEYCTL_SEARCH
print("search", key, ctypes.get_errno())
if key >= 0:
    buffer = ctypes.create_string_buffer(256)
    got = libc.syscall(number, 11, key, buffer, 256)  # KEYCTL_READ
    print("read", buffer.raw[:max(got, 0)])
session = libc.syscall(number, 0, -3, 1)  # KEYCTL_GET_KEYRING_ID, creating one
print("session", session, ctypes.get_errno())
"""


@pytest.fixture
def person_key():
    """A key in the session keyring of the agent's process, as a person's
    login or a tool of theirs leaves one; revoked afterwards."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    name = f"noema-test-{secrets.token_hex(4)}"
    canary = f"KEYRING-CANARY-{secrets.token_hex(6)}".encode()
    add_key = {"x86_64": 248, "aarch64": 217}.get(os.uname().machine)
    if add_key is None:
        pytest.skip("no key numbers for this machine")
    key = libc.syscall(add_key, b"user", name.encode(), canary, len(canary), _KEY_SPEC_SESSION)
    if key < 0:
        pytest.skip(f"no session keyring here ({os.strerror(ctypes.get_errno())})")
    keyctl = add_key + 2
    try:
        yield name, canary.decode()
    finally:
        libc.syscall(keyctl, _KEYCTL_UNLINK, key, _KEY_SPEC_SESSION)
        libc.syscall(keyctl, _KEYCTL_REVOKE, key)


async def test_a_command_cannot_read_the_keys_of_the_person_s_session(world: World, person_key):
    name, canary = person_key
    (world.ws / "thief.py").write_text(KEY_THIEF)
    result = await world.call("shell_execute", command=f"python3 thief.py {name}")
    assert canary not in result.content, result.content
    assert f"search -1 {errno.ENOSYS}" in result.content, result.content
    assert f"session -1 {errno.ENOSYS}" in result.content, result.content


# Every way into another process that the kernel offers a process of the
# same user, aimed at process 1 (bubblewrap's init); then the same kind of
# tracing of a child of its own, which must still work.
INIT_THIEF = r"""
import ctypes, os, platform, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.ptrace.restype = ctypes.c_long
arm = platform.machine() == "aarch64"
PROCESS_VM_READV, KCMP = (270, 272) if arm else (310, 312)
def tried(name, value):
    print(name, value, ctypes.get_errno() if value < 0 else 0)
    if value >= 0 and name in ("attach", "seize"):
        libc.ptrace(17, 1, 0, 0)  # PTRACE_DETACH
tried("attach", libc.ptrace(16, 1, 0, 0))
tried("seize", libc.ptrace(0x4206, 1, 0, 0))
buffer = ctypes.create_string_buffer(8)
class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = IoVec(ctypes.cast(buffer, ctypes.c_void_p), 8)
remote = IoVec(ctypes.c_void_p(0x400000), 8)
read = libc.syscall(PROCESS_VM_READV, 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
tried("vm_readv", read)
tried("kcmp", libc.syscall(KCMP, 1, os.getpid(), 0, 0, 0))
tried("pidfd_open", libc.syscall(434, 1, 0))
me = libc.syscall(434, os.getpid(), 0)
tried("pidfd_getfd", libc.syscall(438, me, 1, 0))
for entry in ("fd", "mem", "root", "task/1/fd"):
    try:
        os.listdir(f"/proc/1/{entry}") if entry != "mem" else open("/proc/1/mem", "rb")
        print(entry, "opened")
    except OSError as exc:
        print(entry, "refused", exc.errno)
child = os.fork()
if child == 0:
    signal.pause()  # a process to trace; killed below
    os._exit(0)
tried("own-child", libc.ptrace(16, child, 0, 0))
os.waitpid(child, 0x40000000)  # __WALL: its stop
libc.ptrace(17, child, 0, 0)
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
"""


async def test_a_command_cannot_reach_into_the_sandbox_s_init(world: World):
    (world.ws / "init_thief.py").write_text(INIT_THIEF)
    result = await world.call("shell_execute", command="python3 init_thief.py; exit 0")
    out = result.content
    assert out.startswith("Exit code 0."), out
    for call in ("attach", "seize", "vm_readv", "kcmp", "pidfd_open", "pidfd_getfd"):
        assert f"\n{call} -1 {errno.EPERM}\n" in out, out
    for entry in ("fd", "mem", "root", "task/1/fd"):
        assert f"\n{entry} refused {errno.EACCES}\n" in out, out
    assert "\nown-child 0 0\n" in out, out  # its own processes it may trace
