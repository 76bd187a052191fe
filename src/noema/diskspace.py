"""What every part of Noema says when the disk holding its data is full.

One message and one test for "is this failure a full disk?", shared by the
store's opening checks (`health`), the session's writes and the shell that
tells the person, so the person reads the same sentence wherever it happens.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path


def free_bytes(folder: Path) -> int:
    """Bytes an unprivileged write could still use on the disk holding `folder`."""
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 0


def full_message(folder: Path, free: int | None = None) -> str:
    """The sentence the person reads: which disk, and how much room is left."""
    free = free_bytes(folder) if free is None else free
    return f"the disk holding {folder} is full ({free} bytes free)"


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether a failure comes from a full disk (SQLite's or the system's).

    SQLite may roll a transaction back by itself when the disk fills; the
    ROLLBACK that follows then fails too, and the full disk is its context,
    so the chain of contexts is searched.
    """
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return True
        exc = exc.__context__
    return False
