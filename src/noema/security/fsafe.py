"""File operations that cannot be redirected, and writes that cannot tear.

Every operation starts from the root folder's descriptor and opens each
component of an already-checked path with O_NOFOLLOW. If a component was
replaced by a symbolic link after the policy looked at the path, the open
fails and the operation is refused: nothing is read or written through it.

A write goes to a temporary file in the same folder, is flushed to disk, and
is renamed over the target; a crash or a kill at any moment leaves either the
old file or the new one, never a mixture.

One rule decides whether a file's content may be touched at all (read,
replaced, restored, recorded in the history): `unsafe_file`. A file with
more than one hard link may have another name outside the folders the agent
may use, so it is neither read nor replaced unless the person allowed hard
links. The history also asks it to refuse files of another file system (a
mount the workspace only borrows).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..privacy import workspace_file_mode, workspace_folder_mode
from ..tools.registry import ToolError
from .identity import of_fd
from .policy import KNOWN, AccessDenied

TEMP_SUFFIX = ".noema-tmp"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Unsafe:
    """Why a file's content must be left alone."""

    reason: str  # a phrase that follows the file's name: "has 2 hard links, ..."
    denied: bool  # a safety refusal, as opposed to a file of the wrong kind
    advice: str  # what the model can do instead (tool errors only)

    def error(self, shown: object) -> ToolError:
        """The tool error for the file named `shown`."""
        text = f"{shown} {self.reason}; {self.advice}"
        return AccessDenied(text) if self.denied else ToolError(text)


def unsafe_file(
    info: os.stat_result, *, allow_hard_links: bool = False, device: int | None = None
) -> Unsafe | None:
    """The one rule for every path that reads or replaces a file's content.

    `info` is the stat of what was actually opened (or of the name about to be
    replaced); `device` is the file system of the root, when known.
    """
    if stat.S_ISDIR(info.st_mode):
        return Unsafe("is a folder, not a file", False, "name a file inside it")
    if not stat.S_ISREG(info.st_mode):
        return Unsafe(
            "is not a regular file (a device, socket or pipe)",
            False,
            "the file tools only read and write regular files",
        )
    if device is not None and info.st_dev != device:
        return Unsafe(
            "lies on another file system mounted inside the folder",
            True,
            "it is left alone",
        )
    if info.st_nlink > 1 and not allow_hard_links:
        return Unsafe(
            f"has {info.st_nlink} hard links, and another of its names may lie outside the "
            "folders you may use",
            True,
            "its content is not touched; ask the person for an ordinary copy if you need it",
        )
    return None


def written_mode(mode: int) -> int:
    """The permission bits a file keeps when its content is replaced.

    The kernel drops setuid on a write by anyone without CAP_FSETID, and
    setgid when the group may execute (setgid without it marks locking, not
    privilege). The agent drops them the same way whoever it runs as: a root
    agent's write must not leave its bytes in a program that runs as the
    file's owner.
    """
    mode = stat.S_IMODE(mode) & ~stat.S_ISUID
    if mode & stat.S_IXGRP:
        mode &= ~stat.S_ISGID
    return mode


def _swapped(name: str) -> AccessDenied:
    return AccessDenied(
        f"{name!r} changed into a link while it was being checked; the operation was refused"
    )


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_dir(root: Path, parts: Sequence[str], *, create: bool) -> int:
    """A descriptor of root/parts, opened without following any link."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise ToolError(f"the folder {'/'.join(parts)!r} does not exist") from None
                made = True
                try:
                    os.mkdir(name, 0o700, dir_fd=fd)
                except FileExistsError:
                    made = False  # made by someone else meanwhile; the open below judges it
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise _swapped(name) from exc
                if made:  # the person's folder: the person's usual mode, not the agent's umask
                    os.fchmod(child, workspace_folder_mode())
            except OSError as exc:
                # Linux reports a link met with O_DIRECTORY|O_NOFOLLOW as ENOTDIR.
                if exc.errno == errno.ELOOP or _is_link(name, fd):
                    raise _swapped(name) from None
                if exc.errno == errno.ENOTDIR:
                    raise ToolError(f"{name!r} is a file, not a folder") from None
                raise
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def _split(relative: PurePosixPath) -> tuple[tuple[str, ...], str]:
    parts = tuple(p for p in relative.parts if p not in ("", "."))
    if not parts:
        raise ToolError("that is the root folder itself, not a file")
    return parts[:-1], parts[-1]


def read_file(
    root: Path, relative: PurePosixPath, *, max_bytes: int, allow_hard_links: bool = False
) -> bytes:
    """Read a regular file below `root`, refusing links, devices and oversized files."""
    parents, name = _split(relative)
    dfd = _open_dir(root, parents, create=False)
    try:
        try:
            # O_NONBLOCK: a FIFO planted under the name must not hang the agent.
            fd = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd
            )
        except FileNotFoundError:
            raise ToolError(f"{relative} does not exist") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _swapped(name) from None
            raise
    finally:
        os.close(dfd)
    try:
        info = os.fstat(fd)
        refusal = unsafe_file(info, allow_hard_links=allow_hard_links)
        if refusal is not None:
            raise refusal.error(relative)
        # What was opened, not only the name checked: a secret renamed onto it meanwhile.
        secret = KNOWN.may_be(info.st_dev, info.st_ino) and KNOWN.reason(of_fd(fd, info))
        if secret:
            raise AccessDenied(f"{relative}: {secret}")
        if info.st_size > max_bytes:
            raise ToolError(
                f"{relative} is {info.st_size} bytes, above the {max_bytes}-byte limit for "
                "reading; search it with file_grep instead"
            )
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise ToolError(f"{relative} grew past the {max_bytes}-byte limit while being read")
        return data
    finally:
        os.close(fd)


def _replaceable(
    name: str,
    dfd: int,
    relative: PurePosixPath,
    *,
    allow_hard_links: bool,
    link_ok: bool = False,
) -> os.stat_result | None:
    """The stat of what is about to be replaced (None: nothing), after the
    rule for touching a file's content has accepted it. A link there is
    refused unless `link_ok` (a link replacing a link)."""
    try:
        old = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(old.st_mode):
        if link_ok:
            return old
        raise _swapped(name)
    refusal = unsafe_file(old, allow_hard_links=allow_hard_links)
    if refusal is not None:
        raise refusal.error(relative)
    return old


def atomic_write(
    root: Path,
    relative: PurePosixPath,
    data: bytes,
    *,
    mode: int | None = None,
    allow_hard_links: bool = False,
) -> None:
    """Replace (or create) a file below `root` with `data`, all or nothing.

    Missing parent folders are created. The permission bits of an existing
    file are kept unless `mode` is given, less setuid and setgid
    (`written_mode`). A file with other hard links is
    refused unless `allow_hard_links`; then the link is broken, never written
    through: the other names keep the old content.
    """
    parents, name = _split(relative)
    dfd = _open_dir(root, parents, create=True)
    temp = _temp_name(name)
    try:
        old = _replaceable(name, dfd, relative, allow_hard_links=allow_hard_links)
        final_mode = written_mode(
            mode
            if mode is not None
            else (old.st_mode if old is not None else workspace_file_mode())
        )
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=dfd,
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, final_mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        temp = ""
        os.fsync(dfd)  # the rename itself must survive a power cut
    finally:
        if temp:
            _discard(temp, dfd)
        os.close(dfd)


def write_link(
    root: Path, relative: PurePosixPath, pointee: str, *, allow_hard_links: bool = False
) -> None:
    """Replace (or create) a symbolic link below `root`, atomically.

    Only used to bring back a link recorded in the history; the link grants
    nothing, since every later access resolves it through the policy. What it
    replaces obeys the same rule as a write.
    """
    parents, name = _split(relative)
    dfd = _open_dir(root, parents, create=True)
    temp = _temp_name(name)
    try:
        _replaceable(name, dfd, relative, allow_hard_links=allow_hard_links, link_ok=True)
        os.symlink(pointee, temp, dir_fd=dfd)
        os.rename(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        temp = ""
        os.fsync(dfd)
    finally:
        if temp:
            _discard(temp, dfd)
        os.close(dfd)


def _temp_name(name: str) -> str:
    return f".{name[:200]}.{secrets.token_hex(4)}{TEMP_SUFFIX}"


def _discard(temp: str, dfd: int) -> None:
    """Remove the temporary file of a write that failed (it may never have been made)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp, dir_fd=dfd)


def remove_file(root: Path, relative: PurePosixPath) -> bool:
    """Remove a file or link below `root`; False when it was already gone."""
    parents, name = _split(relative)
    try:
        dfd = _open_dir(root, parents, create=False)
    except ToolError:
        return False
    try:
        os.unlink(name, dir_fd=dfd)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(dfd)


def make_dirs(root: Path, relative: PurePosixPath) -> None:
    """Create a folder and its missing parents below `root`."""
    parts = tuple(p for p in relative.parts if p not in ("", "."))
    os.close(_open_dir(root, parts, create=True))
