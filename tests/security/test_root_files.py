"""The walk that finds root-only files hides, rather than misses, what it
could not finish reading."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from noema.security import root_files

_SCANDIR = os.scandir


class _Breaks:
    """A folder listing that fails after its first entry, as one whose
    descriptor went bad half way would."""

    def __init__(self, path: str) -> None:
        self._inner = _SCANDIR(path)
        self._given = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._inner.close()

    def __iter__(self):
        return self

    def __next__(self):
        if self._given:
            raise OSError(errno.EBADF, "Bad file descriptor")
        self._given += 1
        return next(self._inner)


def test_a_listing_that_fails_half_way_hides_the_whole_folder(tmp_path: Path, monkeypatch):
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text(name)
        (tmp_path / name).chmod(0o644)  # readable by others: not root-only
    tmp_path.chmod(0o755)
    monkeypatch.setattr(root_files.os, "scandir", _Breaks)
    assert root_files._scan((str(tmp_path),)) == (tmp_path,)


def test_a_complete_listing_names_only_what_others_cannot_read(tmp_path: Path):
    (tmp_path / "open").write_text("x")
    (tmp_path / "open").chmod(0o644)
    (tmp_path / "secret").write_text("x")
    (tmp_path / "secret").chmod(0o600)
    tmp_path.chmod(0o755)
    assert root_files._scan((str(tmp_path),)) == (tmp_path / "secret",)
