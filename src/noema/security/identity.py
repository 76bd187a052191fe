"""Which file a name or a descriptor leads to, in a way a new name cannot fake.

A device and inode number name a file while it exists; once it is deleted,
the number is given to the next file made, and a secret recorded by its
number would then refuse someone else's file, or a file recorded as
harmless would let a secret through. Change times do not help: a rename or
a new hard link changes them too. The file system's own handle for the file
(`name_to_handle_at`, the handle NFS serves) holds the inode number and its
*generation*, which the file system changes each time it gives the number
to a new file, while renames and links keep it. So a file is known by
(device, inode, handle): another name of it has the same identity; a new
file in a reused inode has another.

Where the file system gives no handle (/proc, some FUSE mounts), the handle
is None and two identities with the same numbers are taken for the same
file: a reused number is then refused with the secret it replaced, never
let through.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

_libc = ctypes.CDLL(None, use_errno=True)
_libc.name_to_handle_at.restype = ctypes.c_int

_AT_FDCWD = -100
_AT_EMPTY_PATH = 0x1000
_AT_HANDLE_FID = 0x200  # Linux 6.5: a handle only for telling files apart
_MAX_HANDLE = 128


class _Handle(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint), ("kind", ctypes.c_int),
                ("data", ctypes.c_ubyte * _MAX_HANDLE)]


@dataclass(frozen=True, slots=True)
class FileId:
    """One file, whatever its names: its numbers and its file system's handle."""

    dev: int
    ino: int
    handle: bytes | None  # None: the file system gives none

    @property
    def numbers(self) -> tuple[int, int]:
        return (self.dev, self.ino)

    def same(self, other: FileId) -> bool:
        """Whether both name the same file (by numbers alone where a handle is missing)."""
        if self.numbers != other.numbers:
            return False
        return self.handle is None or other.handle is None or self.handle == other.handle


def handle_of(dirfd: int, name: str = "") -> bytes | None:
    """The handle of `name` in the folder `dirfd` (of `dirfd` itself when
    `name` is empty), links not followed; None where there is none."""
    flags = _AT_EMPTY_PATH if not name else 0
    for extra in (0, _AT_HANDLE_FID):
        handle = _Handle(_MAX_HANDLE, 0)
        mount = ctypes.c_int()
        done = _libc.name_to_handle_at(dirfd, os.fsencode(name), ctypes.byref(handle),
                                       ctypes.byref(mount), flags | extra)
        if done == 0:
            return handle.kind.to_bytes(4, "little", signed=True) + bytes(
                handle.data[: handle.size]
            )
    return None


def of_fd(fd: int, info: os.stat_result | None = None) -> FileId:
    """The identity of the file open on `fd` (an O_PATH descriptor will do)."""
    info = os.fstat(fd) if info is None else info
    return FileId(info.st_dev, info.st_ino, handle_of(fd))


def of_path(path: str | os.PathLike[str], dirfd: int = _AT_FDCWD) -> FileId:
    """The identity of `path` (links not followed); OSError when it is missing.
    Numbers and handle come from one open, so a name swapped meanwhile
    cannot pair one file's numbers with another's handle."""
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC,
                 dir_fd=None if dirfd == _AT_FDCWD else dirfd)
    try:
        return of_fd(fd)
    finally:
        os.close(fd)
