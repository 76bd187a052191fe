"""The system-call filter a sandboxed command runs under (seccomp, classic BPF).

Three things cannot be stopped by mounts alone:

- **Unix sockets.** A socket file in a root is the door to a service of the
  host (a mail server's admin socket, a database, an agent holding keys);
  `connect()` to it works through a bind mount, read-only or not, and its
  mode means little when the command's kernel uid is the person's. A filter
  cannot read the address `connect()` is given (it lives in the caller's
  memory), so with the network off the filter decides where a socket is
  *made*: `socket()` is allowed for IPv4 and IPv6 (which reach only the
  sandbox's own loopback) and netlink (interface queries), and refused for
  every other family (Unix, vsock, ...), so no Unix socket can name a file
  or an abstract address. `socketpair()` stays allowed for stream and
  seqpacket Unix sockets, which are connected to each other from birth and
  cannot be sent to another address (runtimes use them to talk to their own
  children); a datagram pair could be aimed at any socket with `sendto()`,
  so it is refused.
- **Setuid and setgid files.** The command's files belong to the person
  (root, when the agent runs as root), and an owner may set those bits on
  their own file; a root-owned setuid copy of a shell left in a workspace
  would run as root for any local user. `chmod`, `fchmod`, `fchmodat`,
  `fchmodat2`, and every call that creates a file with a mode (`open` and
  `openat` with `O_CREAT` or `O_TMPFILE`, `creat`, `mknod`, `mknodat`) are
  refused when the mode carries either bit. (`mkdir` ignores them.)
- **The person's session and the sandbox's init.** A command runs in the
  person's session: the kernel's keyrings (`add_key`, `request_key`,
  `keyctl`) would give it the keys the person's session holds, so they are
  absent (ENOSYS, as on a kernel without keys; nothing else reaches them).
  bubblewrap's init is process 1 in the command's PID namespace and holds
  the descriptor on which bubblewrap reports the command's exit: attaching
  to it (`ptrace` PTRACE_ATTACH or PTRACE_SEIZE), reading or writing its
  memory (`process_vm_readv`, `process_vm_writev`), taking a handle on it
  (`pidfd_open`) or comparing its objects (`kcmp`) is refused, and taking a
  descriptor out of any process (`pidfd_getfd`) too. Every other process of
  the namespace is the command's own, which it may trace (a debugger works).
  Its `/proc/1` entries that lead to descriptors, memory or folders are
  refused by the open guard.

Calls that would carry the same requests out of the filter's sight are
refused with ENOSYS, so that programs fall back to the plain calls:
io_uring (it opens files and sockets without system calls) and `openat2`
(its mode lies in memory). 32-bit x86 programs get the same rules under
their own numbers; their multiplexed `socketcall` may no longer make
sockets. x32 calls and any other architecture's are refused.

`seccomp()` itself is refused when it asks for a listener
(`SECCOMP_FILTER_FLAG_NEW_LISTENER`): a filter the command stacked with its
own listener would take the notifications of the open guard
(`open_guard.py`) and could let every open through.

The refusal is EPERM ("Operation not permitted"), which the command shows.

`guard_program` is the second filter, the open guard's: it hands the calls
that reach a file by name (`open`, `openat`, `creat`) or give one a new
name (`link`, `linkat`, `rename`, `renameat`, `renameat2`) to a supervisor
outside the sandbox, which decides on each.
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import struct
from collections.abc import Sequence
from dataclasses import dataclass

# The parts of classic BPF the filter uses.
_LD_W_ABS = 0x20
_JEQ = 0x15
_JSET = 0x45
_JGE = 0x35
_AND = 0x54
_RET = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_DENY = _ERRNO | errno.EPERM
_ABSENT = _ERRNO | errno.ENOSYS

# struct seccomp_data: nr (int), arch (u32), instruction pointer (u64), args[6] (u64).
_NR = 0
_ARCH = 4


def _arg(n: int) -> int:
    """Offset of the low 32 bits of argument `n` (little-endian machines): the
    kernel reads these arguments as 32-bit values, so the high half is moot."""
    return 16 + 8 * n


_AF_UNIX = 1
_SOCKET_FAMILIES = (2, 10, 16)  # AF_INET, AF_INET6, AF_NETLINK
_PAIR_TYPES = (1, 5)  # SOCK_STREAM, SOCK_SEQPACKET
_SOCK_TYPE_MASK = 0xF  # SOCK_NONBLOCK and SOCK_CLOEXEC ride on the type
_SET_ID_BITS = 0o6000  # S_ISUID | S_ISGID
_CREATING = 0o100 | 0o20000000  # O_CREAT | __O_TMPFILE (x86 and the generic table)
_X32_BIT = 0x40000000
_NEW_LISTENER = 1 << 3  # SECCOMP_FILTER_FLAG_NEW_LISTENER
_USER_NOTIF = 0x7FC00000  # SECCOMP_RET_USER_NOTIF
_PTRACE_ATTACH = 16
_PTRACE_SEIZE = 0x4206
_INIT = 1  # bubblewrap's init, in the command's PID namespace


@dataclass(frozen=True, slots=True)
class _Table:
    """One architecture's system-call numbers (None: the call does not exist)."""

    audit_arch: int
    socket: int | None
    socketpair: int | None
    socketcall: int | None
    chmod: int | None
    fchmod: int
    fchmodat: int
    fchmodat2: int
    open: int | None
    openat: int
    creat: int | None
    mknod: int | None
    mknodat: int
    openat2: int
    io_uring: tuple[int, int, int]
    seccomp: int
    keys: tuple[int, int, int]  # add_key, request_key, keyctl
    ptrace: int
    # Calls that reach into another process named by its number: process_vm_readv,
    # process_vm_writev, pidfd_open (the first argument) and kcmp (the first two).
    peek: tuple[int, int, int]
    kcmp: int
    pidfd_getfd: int
    # The calls the open guard decides on, by name ("open", "linkat"...).
    guarded: tuple[tuple[str, int], ...] = ()
    x32: bool = False


_X86_64 = _Table(0xC000003E, 41, 53, None, 90, 91, 268, 452, 2, 257, 85, 133, 259, 437,
                 (425, 426, 427), 317, (248, 249, 250), 101, (310, 311, 434), 312, 438,
                 (("open", 2), ("openat", 257), ("creat", 85), ("link", 86), ("linkat", 265),
                  ("rename", 82), ("renameat", 264), ("renameat2", 316)), x32=True)
_I386 = _Table(0x40000003, 359, 360, 102, 15, 94, 306, 452, 5, 295, 8, 14, 297, 437,
               (425, 426, 427), 354, (286, 287, 288), 26, (347, 348, 434), 349, 438,
               (("open", 5), ("openat", 295), ("creat", 8), ("link", 9), ("linkat", 303),
                ("rename", 38), ("renameat", 302), ("renameat2", 353)))
_AARCH64 = _Table(0xC00000B7, 198, 199, None, None, 52, 53, 452, None, 56, None, None, 33, 437,
                  (425, 426, 427), 277, (217, 218, 219), 117, (270, 271, 434), 272, 438,
                  (("openat", 56), ("linkat", 37), ("renameat", 38), ("renameat2", 276)))
_TABLES = {"x86_64": (_X86_64, _I386), "amd64": (_X86_64, _I386), "aarch64": (_AARCH64,),
           "arm64": (_AARCH64,)}


class FilterUnavailable(Exception):
    """This machine's architecture has no filter here."""


class _Program:
    """A small assembler: instructions with symbolic jump targets."""

    def __init__(self) -> None:
        self._code: list[tuple] = []
        self._labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self._labels[name] = len(self._code)

    def load(self, offset: int) -> None:
        self._code.append((_LD_W_ABS, offset))

    def mask(self, bits: int) -> None:
        self._code.append((_AND, bits))

    def jump(self, op: int, k: int, yes: str | None, no: str | None = None) -> None:
        self._code.append((op, k, yes, no))

    def ret(self, value: int) -> None:
        self._code.append((_RET, value))

    def assemble(self) -> bytes:
        out = bytearray()
        for at, instruction in enumerate(self._code):
            op, k = instruction[0], instruction[1]
            jt = jf = 0
            if len(instruction) == 4:
                jt, jf = (self._offset(at, target) for target in instruction[2:])
            out += struct.pack("=HBBI", op, jt, jf, k)
        return bytes(out)

    def _offset(self, at: int, target: str | None) -> int:
        if target is None:
            return 0  # the next instruction
        distance = self._labels[target] - at - 1
        if not 0 <= distance <= 255:
            raise ValueError(f"jump to {target} out of reach ({distance})")
        return distance


def _rules(p: _Program, t: _Table, tag: str, *, network: bool) -> None:
    """The checks of one architecture; the number is loaded on entry."""
    allow, deny, absent = "allow", "deny", "absent"
    if t.x32:
        p.jump(_JGE, _X32_BIT, deny)
    mode_checks: list[tuple[int, int]] = []  # (call, argument holding the mode)
    for call, arg in ((t.chmod, 1), (t.fchmod, 1), (t.fchmodat, 2), (t.fchmodat2, 2),
                      (t.creat, 1), (t.mknod, 1), (t.mknodat, 2)):
        if call is not None:
            mode_checks.append((call, arg))
    for call in (t.openat2, *t.io_uring, *t.keys):
        p.jump(_JEQ, call, absent)
    p.jump(_JEQ, t.pidfd_getfd, deny)
    p.jump(_JEQ, t.ptrace, f"{tag}-ptrace")
    for call in t.peek:
        p.jump(_JEQ, call, f"{tag}-init0")
    p.jump(_JEQ, t.kcmp, f"{tag}-kcmp")
    for call, arg in mode_checks:
        p.jump(_JEQ, call, f"{tag}-mode{arg}")
    if t.open is not None:
        p.jump(_JEQ, t.open, f"{tag}-open1")
    p.jump(_JEQ, t.openat, f"{tag}-open2")
    p.jump(_JEQ, t.seccomp, f"{tag}-seccomp")
    if not network:
        if t.socket is not None:
            p.jump(_JEQ, t.socket, f"{tag}-socket")
        if t.socketpair is not None:
            p.jump(_JEQ, t.socketpair, f"{tag}-pair")
        if t.socketcall is not None:
            p.jump(_JEQ, t.socketcall, f"{tag}-socketcall")
    p.ret(_ALLOW)
    for arg in sorted({arg for _, arg in mode_checks}):
        p.label(f"{tag}-mode{arg}")
        p.load(_arg(arg))
        p.jump(_JSET, _SET_ID_BITS, deny, allow)
    # open(path, flags, mode) and openat(dir, path, flags, mode): the mode only
    # counts when a file is created, and is left unset otherwise.
    opens = [(f"{tag}-open2", 2)]
    if t.open is not None:
        opens.append((f"{tag}-open1", 1))
    for label, flags in opens:
        p.label(label)
        p.load(_arg(flags))
        p.jump(_JSET, _CREATING, None, allow)
        p.load(_arg(flags + 1))
        p.jump(_JSET, _SET_ID_BITS, deny, allow)
    p.label(f"{tag}-seccomp")  # seccomp(operation, flags, args)
    p.load(_arg(1))
    p.jump(_JSET, _NEW_LISTENER, deny, allow)
    # ptrace(request, pid, ...): no attaching to the sandbox's init (its
    # number is 1 in the command's PID namespace, and every other process
    # there is the command's own). The other requests need a tracee already.
    p.label(f"{tag}-ptrace")
    p.load(_arg(0))
    p.jump(_JEQ, _PTRACE_ATTACH, None, f"{tag}-seize")
    p.load(_arg(1))
    p.jump(_JEQ, _INIT, deny, allow)
    p.label(f"{tag}-seize")
    p.jump(_JEQ, _PTRACE_SEIZE, None, allow)
    p.load(_arg(1))
    p.jump(_JEQ, _INIT, deny, allow)
    p.label(f"{tag}-kcmp")  # kcmp(pid1, pid2, ...)
    p.load(_arg(1))
    p.jump(_JEQ, _INIT, deny, None)
    p.label(f"{tag}-init0")  # the process is the first argument
    p.load(_arg(0))
    p.jump(_JEQ, _INIT, deny, allow)
    if network:
        return
    if t.socket is not None:
        p.label(f"{tag}-socket")
        p.load(_arg(0))
        for family in _SOCKET_FAMILIES:
            p.jump(_JEQ, family, allow)
        p.ret(_DENY)
    if t.socketpair is not None:
        p.label(f"{tag}-pair")
        p.load(_arg(0))
        p.jump(_JEQ, _AF_UNIX, None, deny)
        p.load(_arg(1))
        p.mask(_SOCK_TYPE_MASK)
        for kind in _PAIR_TYPES:
            p.jump(_JEQ, kind, allow)
        p.ret(_DENY)
    if t.socketcall is not None:
        p.label(f"{tag}-socketcall")
        p.load(_arg(0))
        p.jump(_JEQ, 1, absent)  # SYS_SOCKET: its family lies in memory
        p.jump(_JEQ, 8, absent, allow)  # SYS_SOCKETPAIR, likewise


def _build(tables: Sequence[_Table], *, network: bool) -> bytes:
    p = _Program()
    p.load(_ARCH)
    for n, table in enumerate(tables):
        p.jump(_JEQ, table.audit_arch, f"arch{n}")
    p.ret(_DENY)  # an architecture the filter does not know
    for n, table in enumerate(tables):
        p.label(f"arch{n}")
        p.load(_NR)
        _rules(p, table, f"a{n}", network=network)
    p.label("allow")
    p.ret(_ALLOW)
    p.label("deny")
    p.ret(_DENY)
    p.label("absent")
    p.ret(_ABSENT)
    return p.assemble()


@functools.cache
def program(*, network: bool, machine: str | None = None) -> bytes:
    """The compiled filter for this machine (or `machine`, as `uname -m` says
    it): the Unix-socket rules only when the network is off."""
    return _build(_tables(machine), network=network)


def _tables(machine: str | None) -> tuple[_Table, ...]:
    name = (machine or platform.machine()).lower()
    tables = _TABLES.get(name)
    if tables is None:
        raise FilterUnavailable(
            f"commands cannot be filtered on this architecture ({name}): only x86_64 and "
            "aarch64 are known"
        )
    return tables


@functools.cache
def guard_program(machine: str | None = None) -> bytes:
    """The open guard's filter: the guarded calls of every known architecture
    go to the supervisor (SECCOMP_RET_USER_NOTIF), everything else passes
    (the sandbox's own filter, `program`, refuses the rest)."""
    tables = _tables(machine)
    p = _Program()
    p.load(_ARCH)
    for n, table in enumerate(tables):
        p.jump(_JEQ, table.audit_arch, f"arch{n}")
    p.ret(_ALLOW)
    for n, table in enumerate(tables):
        p.label(f"arch{n}")
        p.load(_NR)
        for _, number in table.guarded:
            p.jump(_JEQ, number, "notify")
        p.ret(_ALLOW)
    p.label("notify")
    p.ret(_USER_NOTIF)
    return p.assemble()


@functools.cache
def guarded_calls(machine: str | None = None) -> dict[tuple[int, int], str]:
    """(audit architecture, call number) -> the name of a call `guard_program`
    hands over."""
    return {(t.audit_arch, number): name for t in _tables(machine) for name, number in t.guarded}


def program_fd(*, network: bool) -> int:
    """A descriptor bubblewrap reads the filter from (`--seccomp FD`); the
    caller closes it once bubblewrap started. One per command: bubblewrap
    reads from the descriptor's current offset, which a shared one would move."""
    code = program(network=network)
    fd = os.memfd_create("noema-seccomp", 0)
    try:
        os.write(fd, code)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
