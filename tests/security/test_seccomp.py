"""The system-call filter, run by a small BPF interpreter against a model of
what it must decide (x86_64 and its 32-bit calls), over generated calls.
The attacks under `attacks/` check the same filter in the real kernel."""

from __future__ import annotations

import errno
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.security.seccomp import FilterUnavailable, program

ALLOW = 0x7FFF0000
EPERM = 0x00050000 | errno.EPERM
ENOSYS = 0x00050000 | errno.ENOSYS
X86_64 = 0xC000003E
I386 = 0x40000003

# name: (x86_64 number, i386 number, index of the mode argument or None)
MODE_CALLS = {
    "chmod": (90, 15, 1), "fchmod": (91, 94, 1), "fchmodat": (268, 306, 2),
    "fchmodat2": (452, 452, 2), "creat": (85, 8, 1), "mknod": (133, 14, 1),
    "mknodat": (259, 297, 2),
}
OPEN_CALLS = {"open": (2, 5, 1), "openat": (257, 295, 2)}  # index of the flags
ABSENT = {"openat2": (437, 437), "io_uring_setup": (425, 425), "io_uring_enter": (426, 426),
          "io_uring_register": (427, 427)}
SOCKET = (41, 359)
SOCKETPAIR = (53, 360)
SOCKETCALL_I386 = 102
SECCOMP = (317, 354)  # refused when it asks for a listener (flag 8)
KEYS = {"add_key": (248, 286), "request_key": (249, 287), "keyctl": (250, 288)}  # absent
PTRACE = (101, 26)  # attaching (16) or seizing (0x4206) process 1 is refused
AT_INIT = {"process_vm_readv": (310, 347), "process_vm_writev": (311, 348),
           "pidfd_open": (434, 434)}  # refused on process 1 (the first argument)
KCMP = (312, 349)  # refused when either process is 1
PIDFD_GETFD = (438, 438)  # refused


def interpret(code: bytes, arch: int, nr: int, args: tuple[int, ...]) -> int:
    """The verdict of a classic BPF seccomp program on one call."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *args)
    program_ = [struct.unpack_from("=HBBI", code, at) for at in range(0, len(code), 8)]
    pc, acc = 0, 0
    for _ in range(len(program_)):  # forward jumps only: each step moves on
        op, jt, jf, k = program_[pc]
        if op == 0x20:
            acc, pc = struct.unpack_from("=I", data, k)[0], pc + 1
        elif op == 0x54:
            acc, pc = acc & k, pc + 1
        elif op in (0x15, 0x45, 0x35):
            taken = {0x15: acc == k, 0x45: bool(acc & k), 0x35: acc >= k}[op]
            pc += 1 + (jt if taken else jf)
        elif op == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {op:#x}")
    raise AssertionError("the program ran off its end")


def expected(arch: int, nr: int, args: tuple[int, ...], network: bool) -> int:
    if arch not in (X86_64, I386):
        return EPERM
    column = 0 if arch == X86_64 else 1
    low = [a & 0xFFFFFFFF for a in args]
    if arch == X86_64 and nr >= 0x40000000:
        return EPERM  # x32
    if nr in {v[column] for v in (*ABSENT.values(), *KEYS.values())}:
        return ENOSYS
    if nr == PIDFD_GETFD[column]:
        return EPERM
    if nr == PTRACE[column]:
        return EPERM if low[0] in (16, 0x4206) and low[1] == 1 else ALLOW
    if nr in {v[column] for v in AT_INIT.values()}:
        return EPERM if low[0] == 1 else ALLOW
    if nr == KCMP[column]:
        return EPERM if 1 in (low[0], low[1]) else ALLOW
    for numbers in MODE_CALLS.values():
        if nr == numbers[column]:
            return EPERM if low[numbers[2]] & 0o6000 else ALLOW
    for numbers in OPEN_CALLS.values():
        if nr == numbers[column]:
            flags = numbers[2]
            creating = low[flags] & (0o100 | 0o20000000)
            return EPERM if creating and low[flags + 1] & 0o6000 else ALLOW
    if nr == SECCOMP[column]:
        return EPERM if low[1] & 8 else ALLOW
    if network:
        return ALLOW
    if nr == SOCKET[column]:
        return ALLOW if low[0] in (2, 10, 16) else EPERM
    if nr == SOCKETPAIR[column]:
        return ALLOW if low[0] == 1 and low[1] & 0xF in (1, 5) else EPERM
    if arch == I386 and nr == SOCKETCALL_I386:
        return ENOSYS if low[0] in (1, 8) else ALLOW
    return ALLOW


INTERESTING_NR = sorted(
    {n for v in (*MODE_CALLS.values(), *OPEN_CALLS.values()) for n in v[:2]}
    | {n for v in (*ABSENT.values(), *KEYS.values(), *AT_INIT.values()) for n in v}
    | {*PTRACE, *KCMP, *PIDFD_GETFD}
    | {*SOCKET, *SOCKETPAIR, *SECCOMP, SOCKETCALL_I386, 0, 1, 42, 44, 46, 0x40000029, 0x40000000}
)
ARG = st.one_of(
    st.sampled_from([0, 1, 2, 5, 8, 9, 10, 16, 0x4206, 40, 0o100, 0o4755, 0o2755, 0o755, 0o644,
                     0o6000, 0o20000000, 0o100 | 0o2, 0x80001, 0x800 | 1, 0o100755, 0o104755,
                     (1 << 32) | 1, (1 << 32) | 0o4755]),
    st.integers(0, 2**64 - 1),
)


@settings(max_examples=3000, deadline=None)
@given(
    arch=st.sampled_from([X86_64, I386, 0xC00000B7, 0x12345678]),
    nr=st.one_of(st.sampled_from(INTERESTING_NR), st.integers(0, 2**31 - 1)),
    args=st.tuples(*[ARG] * 6),
    network=st.booleans(),
)
def test_the_filter_decides_as_the_model_says(arch, nr, args, network):
    verdict = interpret(program(network=network, machine="x86_64"), arch, nr, args)
    assert verdict == expected(arch, nr, args, network)


@pytest.mark.parametrize("network", [False, True])
def test_the_arm_filter_knows_only_arm(network):
    code = program(network=network, machine="aarch64")
    assert interpret(code, X86_64, 41, (1, 1, 0, 0, 0, 0)) == EPERM
    assert interpret(code, 0xC00000B7, 52, (3, 0o4755, 0, 0, 0, 0)) == EPERM  # fchmod
    assert interpret(code, 0xC00000B7, 52, (3, 0o755, 0, 0, 0, 0)) == ALLOW
    socket_unix = interpret(code, 0xC00000B7, 198, (1, 1, 0, 0, 0, 0))
    assert socket_unix == (ALLOW if network else EPERM)
    assert interpret(code, 0xC00000B7, 219, (0, 0, 0, 0, 0, 0)) == ENOSYS  # keyctl
    assert interpret(code, 0xC00000B7, 117, (16, 1, 0, 0, 0, 0)) == EPERM  # attach to init
    assert interpret(code, 0xC00000B7, 117, (16, 7, 0, 0, 0, 0)) == ALLOW  # its own child
    assert interpret(code, 0xC00000B7, 270, (1, 0, 0, 0, 0, 0)) == EPERM  # init's memory


def test_an_unknown_machine_is_refused_by_name():
    with pytest.raises(FilterUnavailable, match="riscv64"):
        program(network=False, machine="riscv64")
