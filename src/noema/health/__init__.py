"""The health of an agent's files: checks on start, `noema doctor`'s full checks,
and the salvage that keeps what a damaged database still holds.

This package is a leaf: it knows SQLite files and git repositories, not what
Noema keeps in them, so the stores can use it when they open.
"""

from ..privacy import private_file
from .sqlite_files import (
    DamagedDatabase,
    DiskFull,
    UnusableDatabase,
    check_file,
    check_open,
    free_bytes,
    open_small_store,
    opening,
)

__all__ = [
    "DamagedDatabase",
    "DiskFull",
    "UnusableDatabase",
    "check_file",
    "check_open",
    "free_bytes",
    "open_small_store",
    "opening",
    "private_file",
]
