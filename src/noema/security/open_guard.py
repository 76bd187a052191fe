"""Deciding at open time what a sandboxed command may open.

The masks of `masks.py` are laid when a command starts: a secret the person
creates while it runs, or re-saves the way editors and `sed -i` do (write a
copy, rename it over the old name, which takes the old name's mask away),
would be readable. So every call of the command that reaches a file by name
(`open`, `openat`, `creat`) or gives one another name (`link`, `linkat`,
`rename`, `renameat`, `renameat2`) is handed by a second system-call filter
(`seccomp.guard_program`, SECCOMP_RET_USER_NOTIF) to a supervisor thread of
the agent, which decides on it when it is made:

- it reads the path from the process's memory, and resolves it as the
  process sees it: from its root (`/proc/PID/root`) and its working folder
  or folder descriptor, links followed one at a time inside that root
  (`openat2` with RESOLVE_IN_ROOT), `/proc/self` read as the process's own
  number, descriptors under `/proc/PID/fd` followed to what they hold (but
  not those of process 1, bubblewrap's init, nor its memory or folders);
- it opens the file itself and judges what it opened, as it is at that
  moment (`Secrets`): the deny rules on its path, under every name a folder
  on the way had during the command, and its identity (`identity.py`:
  numbers and the file system's handle, which a new hard link or a rename
  keeps and a reused inode number does not) against the secrets known. A
  file refused by its name is known by its identity from then on, to the
  policy too (the file tools, the next command's masks, the history). A
  folder holds names, not bytes: what is opened in it is judged in turn.
  Whoever made a file, a secret's name refuses it: a command may create a
  file under such a name (it gets the new, empty file) but not open it
  again, and may create nothing in a folder a rule refuses. In the roots,
  a file with more hard links than the command gave it is refused as the
  file tools refuse it (another name may lie outside the roots), unless the
  person allowed hard links. For an agent running as root, a file of the
  system folders that others may not read is refused, as `root_files.py`
  masks those there when the command starts;
- it hands the descriptor to the process as the call's result
  (SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SEND), or answers
  EACCES. A git configuration that holds credentials is handed as a sealed
  copy without them (`gitredact.py`). ADDFD takes no O_PATH descriptor, so
  an O_PATH open gets what it found opened for reading instead (see
  `_path_reply`). A pipe's open waits for the other end: it is made in a
  thread of its own, which the guard's closing ends (it opens the pipe
  itself, without waiting, so that the waiting open returns, and drops what
  it opened). Links and renames it makes itself, after the same judgement,
  refusing to give a secret another name or anything a secret's name, and
  to move a mask or a frozen folder (mount points of the command's
  namespace, which the kernel checks only in the caller's).

It never lets a call of the command go on as asked (SECCOMP_USER_NOTIF_FLAG_CONTINUE):
another thread of the command could rewrite the path between the check and
the kernel reading it. The filter is installed on a fresh thread of the agent
just before it starts bubblewrap, so bubblewrap's own set-up goes through
the supervisor too; those calls continue unchanged, and only those: a process
is the command's once it runs under the sandbox's own filter as well (its
count of filters says so), and bubblewrap installs that filter last, just
before it starts the command. If the supervisor dies, the listener closes
and the guarded calls fail with ENOSYS: nothing is let through.

Since it sees every open, the guard also lists the regular files inside the
roots the command opened, read or written (`OpenGuard.opened`, which says
what it does not see).

The supervisor acts with the command's umask and without capabilities (the
command has none), so that it grants nothing the command's own open would
not. What it cannot stop: a file the command holds open (one it opened under an
allowed name, such as the copy an editor writes before renaming it over a
secret, or one it made itself) while the person renames it to a refused name
or writes secret bytes into it; a secret the person makes and renames to an
allowed name within one command, never opened under its secret name
meanwhile; a secret run as a program (`execve` is not guarded; only an ELF
file would run). And `/proc/sys` values, which the kernel shows by the
namespaces of whoever opens them, are the host's.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import select
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .gitredact import is_git_config, redacted
from .identity import FileId, of_fd
from .seccomp import guard_program, guarded_calls

log = logging.getLogger(__name__)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.ioctl.restype = ctypes.c_int

# seccomp(2)
_SYS_SECCOMP = {"x86_64": 317, "amd64": 317, "aarch64": 277, "arm64": 277}
_SYS_OPENAT2 = 437  # the same number on every architecture
_SYS_CAPGET_CAPSET = {"x86_64": (125, 126), "amd64": (125, 126), "aarch64": (90, 91),
                      "arm64": (90, 91)}
_SET_MODE_FILTER = 1
_FLAG_NEW_LISTENER = 1 << 3
_FLAG_WAIT_KILLABLE_RECV = 1 << 5
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_FS = 0x200

# ioctls on the listener: _IOWR('!', 0, 80 bytes), _IOWR('!', 1, 24), _IOW('!', 2, 8),
# _IOW('!', 3, 24), _IOW('!', 4, 8)
_NOTIF_RECV = 0xC0502100
_NOTIF_SEND = 0xC0182101
_NOTIF_ID_VALID = 0x40082102
_NOTIF_ADDFD = 0x40182103
_NOTIF_SET_FLAGS = 0x40082104
_FD_SYNC_WAKE_UP = 1  # the woken process runs on the supervisor's CPU at once (Linux 6.6)
_CONTINUE = 1  # SECCOMP_USER_NOTIF_FLAG_CONTINUE
_ADDFD_SEND = 2  # SECCOMP_ADDFD_FLAG_SEND

# openat2 resolve flags
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_IN_ROOT = 0x10
_IN_ROOT = _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS

_AT_FDCWD = -100
_AT_SYMLINK_FOLLOW = 0x400
_AT_EMPTY_PATH = 0x1000
_RENAME_EXCHANGE = 2
_O_TMPFILE = 0o20000000 | os.O_DIRECTORY
_MAX_LINKS = 40  # the kernel's limit on links followed in one path
_PATH_MAX = 4096
_PAGE = 4096
_TTY = os.makedev(5, 0)  # /dev/tty: the opener's terminal, which would be the agent's
_CLOSE_WAIT_S = 2.0  # for the guard's threads to end once it closes (they end at once)
MAX_OPENED = 20_000  # files listed as opened by one command
_MAX_LINKS_KEPT = 100_000  # files whose links the commands made are counted (then refused)
_GIT_CONFIG_MAX = 1 << 20  # a git configuration larger than this is refused, not shown
# Before 3.11.4 the thread that vforks a child holds the GIL until the child
# execs. A guarded call the child makes before its exec (closing descriptors
# can read /proc/self/fd) then waits for the supervisor, which waits for the
# GIL: the start would hang. There the child is forked instead.
_VFORK_HOLDS_GIL = sys.version_info < (3, 11, 4)


class GuardUnavailable(Exception):
    """The kernel here cannot hand a command's opens to a supervisor."""


class _Data(ctypes.Structure):
    _fields_ = [("nr", ctypes.c_int), ("arch", ctypes.c_uint32),
                ("ip", ctypes.c_uint64), ("args", ctypes.c_uint64 * 6)]


class _Notif(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("pid", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("data", _Data)]


class _Resp(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("val", ctypes.c_int64),
                ("error", ctypes.c_int32), ("flags", ctypes.c_uint32)]


class _AddFd(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("flags", ctypes.c_uint32), ("srcfd", ctypes.c_uint32),
                ("newfd", ctypes.c_uint32), ("newfd_flags", ctypes.c_uint32)]


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _check(result: int) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def openat2(dirfd: int, path: str, flags: int, mode: int = 0, resolve: int = _IN_ROOT) -> int:
    """openat2(2): `path` from `dirfd`, by default resolved with `dirfd` as
    the root (RESOLVE_IN_ROOT) and no magic links."""
    how = _OpenHow(flags | os.O_CLOEXEC, mode, resolve)
    return _check(_libc.syscall(_SYS_OPENAT2, dirfd, os.fsencode(path), ctypes.byref(how),
                                ctypes.sizeof(how)))


def _nowhere(path: str) -> bool:
    return False


def _forget(fd: int, info: os.stat_result) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Secrets:
    """What the guard refuses, and where it looks.

    `named` judges a path as the command sees it (absolute, links resolved);
    `known` a file by what it is (its descriptor, O_PATH, and status): a
    secret found under another name, by its identity. `note` is told of
    each file refused by its name, so that its identity is known from then
    on, wherever it goes. `inside` says whether a path lies in the roots:
    there a file with more hard links than the command made is refused
    (another of its names may lie outside the roots: a link the commands
    made is counted in `links`), unless `hard_links`,
    and the regular files opened there are listed (`Opened`). Below the
    folders of `root_only`, a file others may not read is refused."""

    named: Callable[[str], bool]
    known: Callable[[int, os.stat_result], bool]
    note: Callable[[int, os.stat_result], None] = _forget
    inside: Callable[[str], bool] = _nowhere
    hard_links: bool = False
    # Links the sandbox's commands made to each file (by identity), which its
    # count of links may hold without a name outside the roots: shared by
    # the commands of one policy, so that a link made by one (a local
    # clone's objects) is the next one's too.
    links: dict[FileId, int] = field(default_factory=dict)
    # Where a file others may not read is refused (the system folders, for
    # an agent running as root: see `root_files.py`); empty elsewhere.
    root_only: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Opened:
    """A regular file inside the roots that a command opened: its path as the
    agent sees it on the host (the roots lie at the same paths inside the
    sandbox), its numbers, and whether the command opened it for writing
    (or made it, or truncated it) at least once."""

    path: str
    dev: int
    ino: int
    wrote: bool


class Renames:
    """The folders a command renamed, newest last: a path under a new name is
    judged under every name it had, so that moving a folder does not free a
    secret that appears in it (or was in it) under the rule of its old name."""

    def __init__(self) -> None:
        self._moves: list[tuple[str, str]] = []  # (new, old)

    def note(self, old: str, new: str) -> None:
        self._moves.append((new, old))

    def names(self, path: str) -> list[str]:
        """`path` and the names it had before the command's renames."""
        found = [path]
        for new, old in reversed(self._moves):
            for name in list(found):
                if name == new or name.startswith(new + "/"):
                    found.append(old + name[len(new):])
        return found


def join(base: str, path: str) -> str:
    """The absolute path a process means by `path` from folder `base` (both as it sees them)."""
    if path.startswith("/"):
        return path
    return base.rstrip("/") + "/" + path


def parts_of(path: str) -> list[str]:
    """Components of a path as the kernel walks them ('' and '.' dropped, '..' kept)."""
    return [c for c in path.split("/") if c not in ("", ".")]


def as_path(parts: Sequence[str]) -> str:
    return "/" + "/".join(parts)


class _Task:
    """The process behind one notification (`pid` in the agent's PID
    namespace), from its status, read once and parsed as far as asked."""

    def __init__(self, pid: int, status: bytes) -> None:
        self.pid = pid
        self._status = status

    @property
    def ns_tid(self) -> str:
        """Its number in its own PID namespace (what its /proc shows)."""
        return _field(self._status, b"NSpid").split()[-1].decode()

    @property
    def ns_tgid(self) -> str:
        return _field(self._status, b"NStgid").split()[-1].decode()

    @property
    def umask(self) -> int:
        return int(_field(self._status, b"Umask"), 8)


def _status(pid: int) -> bytes:
    fd = os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 8192)
    finally:
        os.close(fd)


def _field(status: bytes, key: bytes) -> bytes:
    at = status.find(b"\n" + key + b":")
    if at < 0:
        raise ValueError(f"no {key!r} in a process status")
    start = at + len(key) + 2
    end = status.find(b"\n", start)
    return status[start:end if end >= 0 else None].strip()


@dataclass(slots=True)
class _Found:
    """A path resolved in the process's view: `fd` (O_PATH) when it exists,
    else the folder `parent` (O_PATH) and the missing `name`."""

    path: str  # absolute, as the process sees it
    fd: int | None = None
    parent: int | None = None
    name: str = ""

    def close(self) -> None:
        for fd in (self.fd, self.parent):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


_STATX_MNT_ID = 0x1000
_STATX_MNT_ID_OFFSET = 144  # of stx_mnt_id in struct statx (256 bytes)


def mount_id(fd: int) -> int:
    """The mount the object open on `fd` lies on (as its opener's namespace has it)."""
    buffer = ctypes.create_string_buffer(256)
    _check(_libc.statx(fd, b"", _AT_EMPTY_PATH, _STATX_MNT_ID, buffer))
    return int.from_bytes(buffer.raw[_STATX_MNT_ID_OFFSET:_STATX_MNT_ID_OFFSET + 8], "little")


# Entries of a process under /proc that lead to its descriptors, memory or
# folders. The sandbox's init (process 1 of the command's namespace, always
# bubblewrap's) holds the descriptor bubblewrap reports the command's exit
# on, and the supervisor may open more of it than the command could.
_INIT_ENTRIES = frozenset({"fd", "fdinfo", "mem", "map_files", "root", "cwd", "ns"})


def _of_init(done: list[str], name: str) -> bool:
    """Whether `name` in the folder `done` is such an entry of process 1 (or of a thread of it)."""
    if done[:2] != ["proc", "1"] or name not in _INIT_ENTRIES:
        return False
    return len(done) == 2 or (len(done) == 4 and done[2] == "task")


class _View:
    """A process's file system, seen from the supervisor."""

    def __init__(self, task: _Task) -> None:
        self.task = task
        self.root = os.open(f"/proc/{task.pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        os.close(self.root)

    def base(self, dirfd: int) -> str:
        """The folder a relative path starts from: the working folder or `dirfd`'s."""
        where = "cwd" if dirfd == _AT_FDCWD else f"fd/{dirfd}"
        try:
            found = os.readlink(f"/proc/{self.task.pid}/{where}")
        except FileNotFoundError:
            raise OSError(errno.EBADF, "no such descriptor") from None
        if not found.startswith("/"):
            raise OSError(errno.ENOTDIR, "not a folder")
        return found

    def resolve(self, path: str, *, follow: bool, existing: bool = False) -> _Found:
        """Resolve `path` (absolute, in the process's view) inside the
        process's root: by the kernel in one step where no link of /proc
        and no missing file is met, else by `walk`. With `existing`, a
        missing file is an error (FileNotFoundError), not a place to make it."""
        if not path.startswith(("/proc", "/dev")):
            try:
                fd = openat2(self.root, path, os.O_PATH | (0 if follow else os.O_NOFOLLOW))
            except FileNotFoundError:
                if existing and self._missing(path):
                    raise
            except OSError:
                pass  # a link the kernel will not follow here: walked
            else:
                found = _fd_path(fd)
                if found.startswith("/"):
                    return _Found(found.removesuffix(" (deleted)"), fd=fd)
                os.close(fd)
        return self.walk(path, follow=follow)

    def _missing(self, path: str) -> bool:
        """Whether `path` surely names nothing: its folder is found without the
        walk and holds no entry of that name (not even a dangling link, which
        a walk would follow, maybe into /proc/self). Most failed opens are
        programs probing for optional files."""
        folder, _, name = path.rpartition("/")
        if name in ("", ".", ".."):
            return False
        try:
            parent = openat2(self.root, folder or "/", os.O_PATH | os.O_DIRECTORY)
        except OSError:
            return False
        try:
            os.lstat(name, dir_fd=parent)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        finally:
            os.close(parent)
        return False

    def walk(self, path: str, *, follow: bool) -> _Found:
        """Walk `path` one component at a time, inside the process's root,
        reading `/proc/self` and following what `/proc/PID/fd` holds."""
        todo = parts_of(path)
        done: list[str] = []
        links = 0
        while todo:
            name = todo.pop(0)
            last = not todo
            if name == "..":
                if done:
                    done.pop()
                continue
            if done == ["proc"] and name in ("self", "thread-self"):
                # Its own /proc entries: the supervisor is not in its PID namespace.
                done = ["proc", self.task.ns_tgid]
                if name == "thread-self":
                    done += ["task", self.task.ns_tid]
                continue
            if _of_init(done, name):
                raise OSError(errno.EACCES, "bubblewrap's init is not the command's")
            here = as_path([*done, name])
            try:
                fd = openat2(self.root, here, os.O_PATH | os.O_NOFOLLOW)
            except FileNotFoundError:
                if not last:
                    raise
                parent = openat2(self.root, as_path(done), os.O_PATH | os.O_DIRECTORY)
                return _Found(here, parent=parent, name=name)
            info = os.fstat(fd)
            if not stat.S_ISLNK(info.st_mode):
                if not last:
                    os.close(fd)
                    if not stat.S_ISDIR(info.st_mode):
                        raise OSError(errno.ENOTDIR, "not a folder")
                    done.append(name)
                    continue
                return _Found(here, fd=fd)
            if last and not follow:
                return _Found(here, fd=fd)
            links += 1
            if links > _MAX_LINKS:
                os.close(fd)
                raise OSError(errno.ELOOP, "too many links")
            if len(done) >= 2 and done[0] == "proc" and done[1].isdigit():
                # A descriptor, working folder or root of a process: what it holds.
                try:
                    held = self._held(done, name)
                finally:
                    os.close(fd)
                target = _fd_path(held)
                if not target.startswith("/"):  # a pipe, a socket: no path of its own
                    if last:
                        return _Found(as_path([*done, name]), fd=held)
                    os.close(held)
                    raise OSError(errno.ENOTDIR, "not a folder")
                if last:
                    return _Found(target.removesuffix(" (deleted)"), fd=held)
                os.close(held)
                done = parts_of(target)
                continue
            target = os.readlink("", dir_fd=fd)
            os.close(fd)
            if target.startswith("/"):
                done = []
            todo = parts_of(target) + todo
            if not todo:  # a link to the root itself
                return _Found("/", fd=openat2(self.root, "/", os.O_PATH))
        return _Found(as_path(done), fd=openat2(self.root, as_path(done), os.O_PATH))

    def _held(self, done: list[str], name: str) -> int:
        folder = openat2(self.root, as_path(done), os.O_PATH | os.O_DIRECTORY)
        try:
            # Followed as the kernel follows it: the magic link jumps to the object.
            return os.open(name, os.O_PATH | os.O_CLOEXEC, dir_fd=folder)
        finally:
            os.close(folder)


@dataclass(frozen=True, slots=True)
class _Reply:
    """The answer to one call: a descriptor to hand over, a value, or an error."""

    fd: int | None = None
    cloexec: bool = False
    value: int = 0
    error: int = 0


_GONE = _Reply(error=errno.ESRCH)  # for a call whose caller is gone: nobody reads it


@dataclass(eq=False, slots=True)
class _PipeWait:
    """An open of a pipe waiting for its other end, in a thread of its own,
    for the call `notif_id`. `fifo` (O_PATH) is the guard's until the wait
    ends; `release` is the guard's own open of the pipe that ended it, held
    until then."""

    fifo: int
    flags: int
    cloexec: bool
    notif_id: int
    thread: threading.Thread | None = None  # set before the wait is listed
    release: int = -1


class OpenGuard:
    """The supervisor of one command: a thread answering its listener."""

    def __init__(self, secrets: Secrets, listener: int, baseline: int) -> None:
        self.secrets = secrets
        self.renames = Renames()
        self._listener = listener
        # Filters of the process that started bubblewrap: ours makes one more,
        # the sandbox's own another, which marks the command's processes.
        self._trusted_below = baseline + 2
        self._calls = guarded_calls()
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._serve, name="open-guard", daemon=True)
        self.answered = 0  # calls decided (not counting bubblewrap's set-up)
        self.refused = 0
        self.continued = 0  # bubblewrap's set-up calls, let through
        self._opened: dict[tuple[int, int, str], Opened] = {}
        self.opened_capped = False  # some opens were left out of `opened`
        self._page = ctypes.create_string_buffer(_PAGE)  # paths are read into it
        # Opens of pipes waiting in threads of their own. The lock also keeps
        # the listener open while one of them answers; once `_closing`, none does.
        self._lock = threading.Lock()
        self._waits: list[_PipeWait] = []
        self._closing = False
        # The thread that started the command, and the command's process: it
        # ends with that process.
        self.starter: tuple[threading.Thread, int] | None = None

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop answering, end the opens of pipes still waiting for their
        other end, and wait (briefly: they end at once) for the guard's
        threads to end. A process of the command still running then gets
        ENOSYS from its guarded calls, a waiting open among them.

        Every thread of the guard runs without the agent's capabilities: one
        left behind would make the C library abort the whole agent at its next
        change of user id (it changes every thread's, and that one may not)."""
        if self._stop_w < 0:
            return
        with self._lock:
            self._closing = True
            waits = list(self._waits)
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"x")
        os.close(self._stop_w)
        self._stop_w = -1
        if self._thread.ident is None:  # never started: nothing else holds these
            os.close(self._listener)
            os.close(self._stop_r)
            return
        deadline = time.monotonic() + _CLOSE_WAIT_S
        for wait in waits:
            self._release(wait, deadline)
        threads = [self._thread, *(w.thread for w in waits if w.thread is not None)]
        if self.starter is not None and _ended(self.starter[1]):
            threads.append(self.starter[0])  # else it ends with the process
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("a thread of the open guard (%s) did not end", thread.name)

    def join(self, timeout_s: float) -> None:
        """Wait for the supervisor's thread to end (tests)."""
        self._thread.join(timeout_s)

    def _release(self, wait: _PipeWait, deadline: float) -> None:
        """End a pipe's waiting open: the guard opens the pipe itself without
        waiting (both ends at once, which never waits; else the end the waiter
        lacks) and holds it until the waiter is done, so that an open not yet
        begun does not wait either."""
        while True:
            with self._lock:
                if wait not in self._waits or wait.release >= 0:
                    return
                try:
                    wait.release = _other_end(wait)
                    return
                except OSError as exc:
                    # ENXIO: no reader yet for our writing end; the waiter
                    # has not begun its open. Anything else: it stays.
                    if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                        log.warning("a pipe's open could not be ended (%s)", exc)
                        return
            time.sleep(0.001)

    # The loop

    def _serve(self) -> None:
        try:
            _confine_thread()
            self._loop()
        except OSError as exc:  # the listener closes with the thread: opens fail
            log.error("the open guard stopped (%s); the command's opens fail", exc)
        finally:
            with self._lock:  # no waiting open is answering meanwhile, nor will
                self._closing = True
                os.close(self._listener)
            os.close(self._stop_r)
            _unconfine_thread()

    def _loop(self) -> None:
        wake = ctypes.c_uint64(_FD_SYNC_WAKE_UP)
        # Best effort: older kernels answer EINVAL and wake the slower way.
        _libc.ioctl(self._listener, ctypes.c_ulong(_NOTIF_SET_FLAGS), ctypes.byref(wake))
        poller = select.poll()
        poller.register(self._listener, select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            events = dict(poller.poll())
            if self._stop_r in events:
                return
            if events.get(self._listener, 0) & (select.POLLHUP | select.POLLERR):
                return  # every process under the filter has ended
            notif = _Notif()
            if _libc.ioctl(self._listener, ctypes.c_ulong(_NOTIF_RECV), ctypes.byref(notif)) < 0:
                continue  # the caller died meanwhile (ENOENT), or a signal
            try:
                self._one(notif)
            except Exception:  # a bug of ours must refuse, not hang the command
                log.exception("the open guard failed on a call; it is refused")
                self._send(notif.id, _Reply(error=errno.EACCES))

    def _one(self, notif: _Notif) -> None:
        try:
            status = _status(notif.pid)
            filters = int(_field(status, b"Seccomp_filters"))
            if filters < self._trusted_below:
                # bubblewrap (or the agent's thread starting it): not yet the
                # command. (No ID_VALID needed: the answer reaches only the
                # waiting call, alive throughout if it is delivered at all,
                # so the status read was its own.)
                self.continued += 1
                self._respond(_Resp(notif.id, 0, 0, _CONTINUE))
                return
            task = _Task(notif.pid, status)
        except (OSError, ValueError):
            # Gone (nothing then waits for the answer), or unreadable: refused.
            self._send(notif.id, _Reply(error=errno.EACCES))
            return
        call = self._calls.get((notif.data.arch, notif.data.nr))
        if call is None:
            self._send(notif.id, _Reply(error=errno.ENOSYS))
            return
        args = list(notif.data.args)
        try:
            view = _View(task)
        except OSError:
            self._send(notif.id, _Reply(error=errno.EACCES))
            return
        try:
            reply = self._decide(call, args, view, notif.id)
        except OSError as exc:
            reply = _Reply(error=exc.errno or errno.EACCES)
        finally:
            view.close()
        if reply is not None:
            self._send(notif.id, reply)

    def _valid(self, notif_id: int) -> bool:
        token = ctypes.c_uint64(notif_id)
        request = ctypes.c_ulong(_NOTIF_ID_VALID)
        return _libc.ioctl(self._listener, request, ctypes.byref(token)) == 0

    def _respond(self, resp: _Resp) -> None:
        _libc.ioctl(self._listener, ctypes.c_ulong(_NOTIF_SEND), ctypes.byref(resp))

    def _send(self, notif_id: int, reply: _Reply) -> None:
        self.answered += 1
        if reply.error == errno.EACCES:
            self.refused += 1
        if reply.fd is None:
            self._respond(_Resp(notif_id, reply.value, -reply.error if reply.error else 0, 0))
            return
        try:
            add = _AddFd(notif_id, _ADDFD_SEND, reply.fd, 0, os.O_CLOEXEC if reply.cloexec else 0)
            # Installs the descriptor and answers with its number, in one step.
            if _libc.ioctl(self._listener, ctypes.c_ulong(_NOTIF_ADDFD), ctypes.byref(add)) < 0:
                code = ctypes.get_errno()
                if code != errno.ENOENT:  # (ENOENT: the caller is gone)
                    # No room for it (EMFILE under the command's limit): the call fails so.
                    self._respond(_Resp(notif_id, 0, -code, 0))
        finally:
            os.close(reply.fd)

    # The calls

    def _decide(self, call: str, a: list[int], view: _View, notif_id: int) -> _Reply | None:
        """The answer to a guarded call; None when another thread will give it."""
        mem = _Memory(view.task.pid, self._page)
        if call in ("open", "openat", "creat"):
            if call == "openat":
                dirfd, where, flags, mode = _int(a[0]), mem.path(a[1]), _int(a[2]), a[3]
            elif call == "open":
                dirfd, where, flags, mode = _AT_FDCWD, mem.path(a[0]), _int(a[1]), a[2]
            else:
                dirfd, where = _AT_FDCWD, mem.path(a[0])
                flags, mode = os.O_CREAT | os.O_WRONLY | os.O_TRUNC, a[1]
            path = join(view.base(dirfd), where) if not where.startswith("/") else where
            if not self._valid(notif_id):  # what we read belongs to the waiting call
                return _GONE
            return self._open(view, path, flags, mode & 0o7777, notif_id)
        if call in ("link", "linkat"):
            if call == "linkat":
                old = join(view.base(_int(a[0])), mem.path(a[1], empty=True))
                new = join(view.base(_int(a[2])), mem.path(a[3]))
                flags = _int(a[4])
            else:
                old = join(view.base(_AT_FDCWD), mem.path(a[0]))
                new = join(view.base(_AT_FDCWD), mem.path(a[1]))
                flags = 0
            if flags & _AT_EMPTY_PATH:
                return _Reply(error=errno.EPERM)
            if not self._valid(notif_id):
                return _GONE
            return self._link(view, old, new, follow=bool(flags & _AT_SYMLINK_FOLLOW))
        if call in ("rename", "renameat", "renameat2"):
            if call == "rename":
                old = join(view.base(_AT_FDCWD), mem.path(a[0]))
                new = join(view.base(_AT_FDCWD), mem.path(a[1]))
                flags = 0
            else:
                old = join(view.base(_int(a[0])), mem.path(a[1]))
                new = join(view.base(_int(a[2])), mem.path(a[3]))
                flags = _int(a[4]) if call == "renameat2" else 0
            if not self._valid(notif_id):
                return _GONE
            return self._rename(view, old, new, flags)
        return _Reply(error=errno.ENOSYS)

    def opened(self) -> tuple[Opened, ...]:
        """The regular files inside the roots the command opened, in the order
        of their first open: each (path, file) once, whether it was then
        read, written or both, at most `MAX_OPENED` of them (`opened_capped`
        says when more were left out).

        Seen: every open, creation and O_PATH open the guard answered for a
        process of the command. Not seen: descriptors it was given open (its
        standard streams) or opened before the guard started, a file's bytes
        mapped or run as a program (`mmap` and `execve` are not opens), what
        it reads through a descriptor it passed on, and links, renames and
        deletions (a file keeps its numbers under a new name)."""
        return tuple(self._opened.values())

    def _note_open(self, path: str, info: os.stat_result, wrote: bool) -> None:
        if not stat.S_ISREG(info.st_mode) or not self.secrets.inside(path):
            return
        key = (info.st_dev, info.st_ino, path)
        known = self._opened.get(key)
        if known is not None:
            if wrote and not known.wrote:
                self._opened[key] = Opened(path, info.st_dev, info.st_ino, True)
            return
        if len(self._opened) >= MAX_OPENED:
            self.opened_capped = True
            return
        self._opened[key] = Opened(path, info.st_dev, info.st_ino, wrote)

    def refuses(self, path: str, fd: int | None = None) -> bool:
        """Whether a path (under every name it had), or the file open on `fd`,
        is secret: by its name now, by the names its folders had, by its
        identity (a secret under another name). A folder holds names, not
        bytes: what is opened in it is judged in turn. A file refused by its
        name is known by its identity from then on."""
        names = self.renames.names(path)
        info: os.stat_result | None = None
        if fd is not None:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                return False
            with contextlib.suppress(OSError):
                now = _fd_path(fd)
                if now.startswith("/"):
                    names += self.renames.names(now.removesuffix(" (deleted)"))
            if self.secrets.known(fd, info):
                return True
        if not any(self.secrets.named(n) for n in names):
            return False
        if fd is not None and info is not None:
            self.secrets.note(fd, info)
        return True

    def _linked_out(self, path: str, fd: int, info: os.stat_result) -> bool:
        """Whether a regular file in the roots has more names than one plus
        those the command gave it: another may lie outside the roots, and the
        file tools leave such a file alone (`fsafe.unsafe_file`)."""
        if self.secrets.hard_links or info.st_nlink <= 1 or not stat.S_ISREG(info.st_mode):
            return False
        if not any(self.secrets.inside(n) for n in self.renames.names(path)):
            return False
        links = self.secrets.links
        made = links.get(of_fd(fd, info), 0) if links else 0
        return info.st_nlink > 1 + made

    def _root_only(self, path: str, info: os.stat_result) -> bool:
        """Whether a file of the system folders is one others may not read,
        made since the sandbox masked those (`root_files.py`), for a command
        whose kernel uid is root's."""
        if not self.secrets.root_only or not stat.S_ISREG(info.st_mode):
            return False
        if info.st_mode & stat.S_IROTH:
            return False
        return path.startswith(self.secrets.root_only) and not self.secrets.inside(path)

    def _open(self, view: _View, path: str, flags: int, mode: int, notif_id: int) -> _Reply | None:
        cloexec = bool(flags & os.O_CLOEXEC)
        if flags & os.O_PATH:
            flags &= _PATH_FLAGS  # as the kernel does: it creates nothing
        follow = not flags & os.O_NOFOLLOW
        found = view.resolve(path, follow=follow, existing=not flags & os.O_CREAT)
        try:
            if found.fd is None:
                if flags & os.O_CREAT and self.refuses(found.path.rpartition("/")[0] or "/"):
                    return _Reply(error=errno.EACCES)  # nothing new in a secret's folder
                reply = self._create(view, found, flags, mode, cloexec)
                if reply is not None:
                    return reply
                found.close()  # someone made it meanwhile: opened as it now is
                found = view.resolve(path, follow=follow)
                if found.fd is None:
                    return _Reply(error=errno.ENOENT)
            if self.refuses(found.path, found.fd):
                return _Reply(error=errno.EACCES)
            info = os.fstat(found.fd)
            if flags & os.O_CREAT and flags & os.O_EXCL:
                return _Reply(error=errno.EEXIST)
            if self._linked_out(found.path, found.fd, info) or self._root_only(found.path, info):
                return _Reply(error=errno.EACCES)
            writes = not flags & os.O_PATH and (
                flags & os.O_ACCMODE != os.O_RDONLY or bool(flags & os.O_TRUNC)
            )
            if stat.S_ISREG(info.st_mode) and is_git_config(found.path):
                # (O_PATH too: what it is given can be read.)
                shown = _git_config_view(found.fd, writes, cloexec)
                if shown is not None:
                    if shown.fd is not None:
                        self._note_open(found.path, info, False)
                    return shown
            if flags & os.O_PATH:
                reply = _path_reply(found, info, flags, cloexec)
                if reply.fd is not None:
                    self._note_open(found.path, info, False)
                return reply
            if stat.S_ISLNK(info.st_mode):
                return _Reply(error=errno.ELOOP)
            if stat.S_ISCHR(info.st_mode) and info.st_rdev == _TTY:
                return _Reply(error=errno.ENXIO)  # it has no terminal
            wanted = flags & ~(os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC)
            if flags & _O_TMPFILE == _O_TMPFILE:
                os.umask(view.task.umask)
                made = os.open(f"/proc/self/fd/{found.fd}", wanted | os.O_CLOEXEC, mode)
                return _Reply(fd=made, cloexec=cloexec)
            if stat.S_ISFIFO(info.st_mode) and not flags & os.O_NONBLOCK:
                return self._wait_for_pipe(found, wanted, cloexec, notif_id)
            # Open again what was found, by its descriptor: the same object,
            # whatever happened to its name meanwhile.
            again = os.open(f"/proc/self/fd/{found.fd}", wanted | os.O_CLOEXEC, mode)
            self._note_open(found.path, info, writes)
            return _Reply(fd=again, cloexec=cloexec)
        finally:
            found.close()

    def _wait_for_pipe(
        self, found: _Found, flags: int, cloexec: bool, notif_id: int
    ) -> _Reply | None:
        """Open a pipe, which waits for its other end, in a thread of its own
        (it has this one's rights); None once it is waiting."""
        assert found.fd is not None
        with self._lock:
            if self._closing:
                return _Reply(error=errno.ENOSYS)
            wait = _PipeWait(found.fd, flags, cloexec, notif_id)
            wait.thread = threading.Thread(
                target=self._open_pipe, args=(wait,), name="open-guard-pipe", daemon=True
            )
            self._waits.append(wait)
            try:
                wait.thread.start()
            except RuntimeError:  # no thread to be had
                self._waits.remove(wait)
                return _Reply(error=errno.EAGAIN)
            found.fd = None  # the wait's now
        return None

    def _open_pipe(self, wait: _PipeWait) -> None:
        opened, error = -1, 0
        try:
            with self._lock:
                closing = self._closing
            if not closing:
                opened = os.open(f"/proc/self/fd/{wait.fifo}", wait.flags | os.O_CLOEXEC)
        except OSError as exc:
            error = exc.errno or errno.EACCES
        finally:
            with self._lock:
                self._waits.remove(wait)
                for fd in (wait.fifo, wait.release):
                    if fd >= 0:
                        os.close(fd)
                if self._closing:
                    # Nobody takes the answer now; the kernel gives the call ENOSYS.
                    if opened >= 0:
                        os.close(opened)
                elif opened >= 0:
                    self._send(wait.notif_id, _Reply(fd=opened, cloexec=wait.cloexec))
                else:
                    self._send(wait.notif_id, _Reply(error=error))
            _unconfine_thread()

    def _create(
        self, view: _View, found: _Found, flags: int, mode: int, cloexec: bool
    ) -> _Reply | None:
        """Make the missing file `found` names; None when it exists after all."""
        if not flags & os.O_CREAT:
            return _Reply(error=errno.ENOENT)
        assert found.parent is not None
        os.umask(view.task.umask)  # this thread's own (see `_confine_thread`)
        # Exclusive, so that what is opened is surely the file made here.
        exclusive = flags | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(found.name, exclusive, mode, dir_fd=found.parent)
        except FileExistsError:
            if flags & os.O_EXCL:
                raise
            return None
        self._note_open(found.path, os.fstat(fd), True)
        return _Reply(fd=fd, cloexec=cloexec)

    def _link(self, view: _View, old: str, new: str, *, follow: bool) -> _Reply:
        source = view.resolve(old, follow=follow, existing=True)
        target = view.resolve(new, follow=False)
        try:
            if source.fd is None:
                return _Reply(error=errno.ENOENT)
            if target.fd is not None:
                return _Reply(error=errno.EEXIST)
            info = os.fstat(source.fd)
            # No secret gets another name, nor anything a secret's name.
            if self.refuses(source.path, source.fd) or self.refuses(target.path):
                return _Reply(error=errno.EACCES)
            if self._linked_out(source.path, source.fd, info):
                return _Reply(error=errno.EACCES)
            os.link(f"/proc/self/fd/{source.fd}", target.name, dst_dir_fd=target.parent,
                    follow_symlinks=True)
            links = self.secrets.links
            if stat.S_ISREG(info.st_mode) and len(links) < _MAX_LINKS_KEPT:
                made = of_fd(source.fd, info)
                links[made] = links.get(made, 0) + 1  # (a lost race counts one less: refused)
            return _Reply()
        finally:
            source.close()
            target.close()

    def _rename(self, view: _View, old: str, new: str, flags: int) -> _Reply:
        source = view.resolve(old, follow=False, existing=True)
        target = view.resolve(new, follow=False)
        try:
            if source.fd is None:
                return _Reply(error=errno.ENOENT)
            if self.refuses(source.path, source.fd):
                return _Reply(error=errno.EACCES)
            if target.fd is not None:
                if self.refuses(target.path, target.fd):  # it would replace a secret
                    return _Reply(error=errno.EACCES)
            elif self.refuses(target.path):
                return _Reply(error=errno.EACCES)  # a secret's name for what is not one
            src_dir, src_name = _parent(view, source)
            dst_dir, dst_name = _parent(view, target)
            try:
                # The kernel refuses to rename a mount point only in the
                # caller's namespace; the sandbox's masks and frozen folders
                # are mount points in the command's, so that check is made here.
                if mount_id(source.fd) != mount_id(src_dir) or (
                    target.fd is not None and mount_id(target.fd) != mount_id(dst_dir)
                ):
                    return _Reply(error=errno.EBUSY)
                _check(_libc.renameat2(src_dir, os.fsencode(src_name), dst_dir,
                                       os.fsencode(dst_name), ctypes.c_uint(flags)))
            finally:
                os.close(src_dir)
                os.close(dst_dir)
            if stat.S_ISDIR(os.fstat(source.fd).st_mode):
                self.renames.note(source.path, target.path)
            if flags & _RENAME_EXCHANGE:
                self.renames.note(target.path, source.path)
            return _Reply()
        finally:
            source.close()
            target.close()


_PATH_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _path_reply(found: _Found, info: os.stat_result, flags: int, cloexec: bool) -> _Reply:
    """The answer to an O_PATH open of what `found` holds, already judged.

    The kernel refuses to hand over an O_PATH descriptor (ADDFD takes only
    opened files), and letting the call go on would open whatever another
    thread put in its path meanwhile. So what was found is opened for
    reading instead, without waiting or side effects: a folder as a folder,
    a file, pipe or device read-only and non-blocking. The command may do
    with it all that O_PATH allows, and may also read what it could have
    opened for reading itself; what it could not read fails (EACCES). A
    symbolic link (O_PATH with O_NOFOLLOW) and a socket cannot be opened:
    ELOOP and ENXIO, as an open without O_PATH answers."""
    kind = stat.S_IFMT(info.st_mode)
    if flags & os.O_DIRECTORY and kind != stat.S_IFDIR:
        return _Reply(error=errno.ENOTDIR)
    if kind == stat.S_IFLNK:
        return _Reply(error=errno.ELOOP)
    if kind == stat.S_IFSOCK or (kind == stat.S_IFCHR and info.st_rdev == _TTY):
        return _Reply(error=errno.ENXIO)
    extra = os.O_DIRECTORY if kind == stat.S_IFDIR else os.O_NONBLOCK
    assert found.fd is not None
    again = os.open(f"/proc/self/fd/{found.fd}", os.O_RDONLY | extra | os.O_CLOEXEC)
    return _Reply(fd=again, cloexec=cloexec)


def _git_config_view(fd: int, writes: bool, cloexec: bool) -> _Reply | None:
    """A git configuration as the command may see it: None when it holds no
    credential (opened as it is); else a sealed copy with every credential
    replaced (`gitredact.py`), or, for an open that would write it, EACCES."""
    source = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        data = b""
        while len(data) <= _GIT_CONFIG_MAX and (chunk := os.read(source, 1 << 16)):
            data += chunk
    finally:
        os.close(source)
    if len(data) > _GIT_CONFIG_MAX:
        return _Reply(error=errno.EACCES)
    shown = redacted(data)
    if shown is None:
        return None
    if writes:
        return _Reply(error=errno.EACCES)
    copy = os.memfd_create("git-config", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(shown)
        while view:
            view = view[os.write(copy, view):]
        fcntl.fcntl(copy, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK
                    | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
        again = os.open(f"/proc/self/fd/{copy}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(copy)
    return _Reply(fd=again, cloexec=cloexec)


def _parent(view: _View, found: _Found) -> tuple[int, str]:
    """The folder (a descriptor) holding a resolved path, and its last name."""
    if found.parent is not None:
        return os.dup(found.parent), found.name
    folder, _, name = found.path.rpartition("/")
    if not name or name in (".", ".."):
        raise OSError(errno.EBUSY, "not a name in a folder")
    return openat2(view.root, folder or "/", os.O_PATH | os.O_DIRECTORY), name


def _int(value: int) -> int:
    """A descriptor or flags argument: the kernel reads the low 32 bits, signed."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


class _Memory:
    """Reads strings out of the process (into `buffer`, a page, when given)."""

    def __init__(self, pid: int, buffer: ctypes.Array[ctypes.c_char] | None = None) -> None:
        self.pid = pid
        self._buffer = buffer if buffer is not None else ctypes.create_string_buffer(_PAGE)

    def path(self, address: int, *, empty: bool = False) -> str:
        """The NUL-terminated path at `address` (at most PATH_MAX bytes)."""
        if address == 0:
            raise OSError(errno.EFAULT, "bad address")
        got = bytearray()
        while len(got) < _PATH_MAX:
            want = _PAGE - (address + len(got)) % _PAGE
            chunk = self._read(address + len(got), want)
            end = chunk.find(b"\0")
            if end >= 0:
                got += chunk[:end]
                break
            got += chunk
        if len(got) >= _PATH_MAX:  # the kernel counts the NUL too
            raise OSError(errno.ENAMETOOLONG, "path too long")
        if not got and not empty:
            raise OSError(errno.ENOENT, "empty path")
        return os.fsdecode(bytes(got))

    def _read(self, address: int, size: int) -> bytes:
        buffer = self._buffer  # size never passes a page: reads stop at page ends
        local = _IoVec(ctypes.cast(buffer, ctypes.c_void_p), size)
        remote = _IoVec(ctypes.c_void_p(address), size)
        got = _libc.process_vm_readv(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got <= 0:
            raise OSError(errno.EFAULT, "bad address")
        return buffer.raw[:got]


_libc.process_vm_readv.restype = ctypes.c_ssize_t
_libc.renameat2.restype = ctypes.c_int


def _machine() -> str:
    return os.uname().machine.lower()


def _confine_thread() -> None:
    """Give the supervisor's thread a umask of its own (set per call to the
    command's) and, for an agent running as root, no effective capabilities:
    what it opens for the command, the command could have opened itself."""
    _check(_libc.unshare(_CLONE_FS))
    numbers = _SYS_CAPGET_CAPSET.get(_machine())
    if numbers is None or os.geteuid() != 0:
        return
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (_CapData * 2)()
    _check(_libc.syscall(numbers[0], ctypes.byref(header), data))
    for half in data:
        half.effective = 0
    _check(_libc.syscall(numbers[1], ctypes.byref(header), data))


def _unconfine_thread() -> None:
    """Give a confined thread that is about to end its capabilities back,
    so that a change of user id in the agent meanwhile does not abort it
    (the C library changes every thread's, which needs them)."""
    numbers = _SYS_CAPGET_CAPSET.get(_machine())
    if numbers is None or os.geteuid() != 0:
        return
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    if _libc.syscall(numbers[0], ctypes.byref(header), data) < 0:
        return
    for half in data:
        half.effective = half.permitted
    _libc.syscall(numbers[1], ctypes.byref(header), data)


def _other_end(wait: _PipeWait) -> int:
    """The guard's own open of a waited-for pipe, which ends the wait and
    never waits itself: both ends at once, or (where the agent may not have
    both) the end the waiter lacks."""
    path = f"/proc/self/fd/{wait.fifo}"
    try:
        return os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    except PermissionError:
        lacking = os.O_RDONLY if wait.flags & os.O_ACCMODE == os.O_WRONLY else os.O_WRONLY
        return os.open(path, lacking | os.O_NONBLOCK | os.O_CLOEXEC)


def _filters_here() -> int:
    with open("/proc/thread-self/status", "rb") as status:
        for line in status:
            if line.startswith(b"Seccomp_filters:"):
                return int(line.split()[1])
    return 0


def _install(code: bytes) -> int:
    """Install the guard's filter on this thread; its listener."""
    number = _SYS_SECCOMP.get(_machine())
    if number is None:
        raise GuardUnavailable(f"no open guard on this architecture ({_machine()})")
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
    program = _Fprog(len(code) // 8, code)
    for flags in (_FLAG_NEW_LISTENER | _FLAG_WAIT_KILLABLE_RECV, _FLAG_NEW_LISTENER):
        fd = _libc.syscall(number, _SET_MODE_FILTER, flags, ctypes.byref(program))
        if fd >= 0:
            return fd
        code_ = ctypes.get_errno()
        if code_ != errno.EINVAL:
            break
    raise GuardUnavailable(
        f"the kernel refused a supervised system-call filter ({os.strerror(code_)}); "
        "Linux 5.14 or later is needed"
    )


def _ended(pid: int) -> bool:
    """Whether the child `pid` has ended (reaped or not)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True  # reaped already


def _forked() -> None:
    """Nothing to do in the child: given as `preexec_fn`, it makes
    `subprocess` fork rather than vfork (see `_VFORK_HOLDS_GIL`)."""


def spawn(
    secrets: Secrets, argv: Sequence[str], **popen: Any
) -> tuple[subprocess.Popen, OpenGuard]:
    """Start `argv` (which must start bubblewrap with its `--seccomp` filter)
    under the open guard: `subprocess.Popen(argv, **popen)` from a fresh
    thread carrying the guard's filter, its supervisor already listening.
    Blocks for the start only; the caller closes the guard after the command.

    The starting thread lives until the process it started ends: bubblewrap's
    `--die-with-parent` asks the kernel to kill it when its parent ends, and
    its parent is the thread that forked it, not the agent's process."""
    code = guard_program()
    if _VFORK_HOLDS_GIL and popen.get("preexec_fn") is None:
        popen = {**popen, "preexec_fn": _forked}  # any function makes it fork, not vfork
    handed: dict[str, Any] = {}
    listening = threading.Event()
    supervised = threading.Event()
    launched = threading.Event()

    def starter() -> None:
        try:
            handed["baseline"] = _filters_here()
            handed["listener"] = _install(code)
        except BaseException as exc:
            handed["error"] = exc
            listening.set()
            return
        listening.set()
        supervised.wait()
        if handed.get("abandoned"):
            return
        try:
            process = handed["process"] = subprocess.Popen(argv, **popen)
            ended = os.pidfd_open(process.pid)  # not reaped before `launched`
        except BaseException as exc:
            handed["error"] = exc
            return
        finally:
            launched.set()
        try:
            waiting = select.poll()
            waiting.register(ended, select.POLLIN)
            waiting.poll()
        finally:
            os.close(ended)

    thread = threading.Thread(target=starter, name="open-guard-start", daemon=True)
    thread.start()
    listening.wait()
    if "listener" not in handed:
        thread.join()
        raise handed["error"]
    # Started from this (unfiltered) thread: the supervisor's own opens must
    # not be handed to itself.
    guard = OpenGuard(secrets, handed["listener"], handed["baseline"])
    try:
        guard.start()
    except BaseException:
        handed["abandoned"] = True  # the starter must not start the command unsupervised
        supervised.set()
        thread.join()
        guard.close()
        raise
    supervised.set()
    launched.wait()
    if "error" in handed:
        thread.join()
        if "process" in handed:  # started, but its end cannot be watched
            handed["process"].kill()
            handed["process"].wait()
        guard.close()
        raise handed["error"]
    guard.starter = (thread, handed["process"].pid)
    return handed["process"], guard


def policy_secrets(policy: Any) -> Secrets:
    """The secrets of an access policy, as the masks judge them: a path inside
    a root that the policy refuses to read (git metadata aside: the sandbox
    shows it read-only), or lying in a folder a rule covered before it was
    renamed; a file a rule covered under another name, known by identity
    (the policy learns the identity of each file refused here by its name);
    the roots, with the person's choice on hard links; for an agent running
    as root, the system folders, where what only root may read is refused."""
    from .policy import Access, is_git_name

    def named(path: str) -> bool:
        resolved = Path(path)
        root = policy.root_of(resolved)
        if root is None:
            return any(resolved.is_relative_to(p) for p in policy.protected)
        if policy.denial(resolved, Access.READ) is not None:
            relative = resolved.relative_to(root.path).parts
            return not any(is_git_name(part) for part in relative)
        return policy.moved_denial(resolved, root) is not None

    def known(fd: int, info: os.stat_result) -> bool:
        if not policy.may_be_denied(info.st_dev, info.st_ino):
            return False
        return policy.denied_identity(of_fd(fd, info)) is not None

    def note(fd: int, info: os.stat_result) -> None:
        # Regular files only: what a mask shows in a secret's place (the
        # sandbox's /dev/null) must never be taken for the secret.
        if stat.S_ISREG(info.st_mode):
            policy.remember_denied(of_fd(fd, info))

    roots = tuple(str(r.path).rstrip("/") for r in policy.roots)

    def inside(path: str) -> bool:  # (asked at every open: strings, not Path objects)
        return any(path == r or path.startswith(r + "/") for r in roots)

    root_only: tuple[str, ...] = ()
    if os.geteuid() == 0:
        from .sandbox import system_folders  # (it builds on this module)

        root_only = tuple(f.rstrip("/") + "/" for f in system_folders())
    return Secrets(named, known, note, inside, policy.allow_hard_links, policy.made_links,
                   root_only)
