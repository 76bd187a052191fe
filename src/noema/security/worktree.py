"""Bringing a git index in line with the files of a workspace.

libgit2's own `add_all` stops at a folder that holds another repository,
and hashes more than it must; this walker skips every `.git`, honours the
ignore files, keeps tracked files even inside ignored folders, and hashes
a file only when its size, times or inode changed since it was last seen.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from pathlib import Path

import pygit2

from .changes import EVERYTHING, Changed
from .fsafe import TEMP_SUFFIX

log = logging.getLogger(__name__)

LINK_MODE = 0o120000
FILE_MODE = 0o100644
EXEC_MODE = 0o100755
# A file modified this recently may change again within the same timestamp
# tick without its stat changing, so its hash is not remembered yet.
_RACY_NS = 2_000_000_000
_CACHE_NAME = "noema-stat-cache.json"


def _git_mode(info: os.stat_result) -> int | None:
    if stat.S_ISLNK(info.st_mode):
        return LINK_MODE
    if stat.S_ISREG(info.st_mode):
        return EXEC_MODE if info.st_mode & 0o111 else FILE_MODE
    return None


class WorkTree:
    """Stages the state of the workspace's files into an index."""

    def __init__(self, repo: pygit2.Repository, root: Path, *, max_file_bytes: int) -> None:
        self._repo = repo
        self._root = root
        self._max = max_file_bytes
        self._cache_path = Path(repo.path) / _CACHE_NAME
        # path -> (stat key, blob ID, trusted): an untrusted entry was recorded
        # while its file was fresh and is confirmed by hashing before reuse.
        self._known: dict[str, tuple[tuple[int, ...], str, bool]] = self._load_cache()
        self.touched = 0  # bumped on every index change, so callers can skip no-op commits

    def skip_dir(self, rel: str) -> bool:
        """Folders never versioned: git folders and ignored ones."""
        name = rel.rsplit("/", 1)[-1]
        return name == ".git" or self._repo.path_is_ignored(rel + "/")

    def stage(self, index: pygit2.Index, changed: Changed) -> None:
        """Update `index` for the changed paths (or the whole tree)."""
        if changed is EVERYTHING:
            self._stage_below(index, "")
            self._save_cache()
            return
        assert isinstance(changed, frozenset)
        for rel in sorted(changed):
            self.stage_path(index, rel)

    def stage_path(self, index: pygit2.Index, rel: str, *, force: bool = False) -> None:
        """Bring one path (a file, a link, a folder or nothing) into the index.

        `force` stages a file even where the ignore rules would skip it: a file
        the agent writes is versioned wherever it lies.
        """
        if ".git" in rel.split("/") or rel.endswith(TEMP_SUFFIX):
            return
        try:
            info = os.lstat(os.path.join(self._root, rel))
        except (FileNotFoundError, NotADirectoryError):
            self._remove(index, rel)
            before = len(index)
            index.remove_directory(rel)  # it may have been a folder
            self.touched += len(index) != before
            return
        if stat.S_ISDIR(info.st_mode):
            self._remove(index, rel)
            self._stage_below(index, rel)
            return
        # A folder that became a file needs no care: libgit2 drops the entries
        # below a path when a file is added at it.
        known = index[rel] if rel in index else None
        if known is None and not force and self._repo.path_is_ignored(rel):
            return
        self._stage_file(index, rel, info, (known.id, known.mode) if known else None)

    def _remove(self, index: pygit2.Index, rel: str) -> None:
        if rel in index:
            index.remove(rel)
            self.touched += 1

    def _stage_below(self, index: pygit2.Index, top: str) -> None:
        """Stage every file below `top` ('' for the whole tree) and drop the
        entries whose files are gone."""
        prefix = top + "/" if top else ""
        # One pass over the index: pygit2 lookups are slow enough to matter
        # when repeated for every file of a large tree.
        current = {e.path: (e.id, e.mode) for e in index if e.path.startswith(prefix)}
        tracked_dirs = {p.rsplit("/", 1)[0] for p in current if "/" in p}
        tracked_dirs |= {d[:i] for d in tracked_dirs for i in range(len(d)) if d[i] == "/"}
        seen: set[str] = set()
        stack = [top]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(os.path.join(self._root, folder)))
            except OSError:
                continue
            for entry in entries:
                name = entry.name
                if name == ".git" or name.endswith(TEMP_SUFFIX):
                    continue
                rel = f"{folder}/{name}" if folder else name
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    if rel in tracked_dirs or not self._repo.path_is_ignored(rel + "/"):
                        stack.append(rel)
                    continue
                known = current.get(rel)
                if known is None and self._repo.path_is_ignored(rel):
                    continue
                if self._stage_file(index, rel, info, known):
                    seen.add(rel)
        for path in current.keys() - seen:
            self._remove(index, path)

    def _stage_file(
        self,
        index: pygit2.Index,
        rel: str,
        info: os.stat_result,
        known: tuple[pygit2.Oid, int] | None,
    ) -> bool:
        """Stage one file; False when it cannot be versioned (then it is dropped)."""
        mode = _git_mode(info)
        if mode is None or (mode != LINK_MODE and info.st_size > self._max):
            if mode is not None:
                log.info("not versioning %s: %d bytes is above the limit", rel, info.st_size)
            self._remove(index, rel)
            return False
        key = (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, mode)
        oid = self._blob_id(rel, key, mode, info)
        if oid is None:
            return False  # vanished or unreadable between stat and read
        if known is not None and known == (oid, mode):
            return True
        index.add(pygit2.IndexEntry(rel, oid, mode))
        self.touched += 1
        return True

    def _blob_id(
        self, rel: str, key: tuple[int, ...], mode: int, info: os.stat_result
    ) -> pygit2.Oid | None:
        path = os.path.join(self._root, rel)
        fresh = time.time_ns() - info.st_mtime_ns <= _RACY_NS
        known = self._known.get(rel)
        try:
            if known is not None and known[0] == key:
                if known[2]:
                    return pygit2.Oid(hex=known[1])
                if mode != LINK_MODE and str(pygit2.hashfile(path)) == known[1]:
                    # Hashing is much cheaper than storing the blob again.
                    self._known[rel] = (key, known[1], not fresh)
                    return pygit2.Oid(hex=known[1])
            if mode == LINK_MODE:
                oid = self._repo.create_blob(os.fsencode(os.readlink(path)))
            else:
                oid = self._repo.create_blob_fromdisk(path)
        except (OSError, pygit2.GitError):
            return None
        self._known[rel] = (key, str(oid), not fresh)
        return oid

    def _load_cache(self) -> dict[str, tuple[tuple[int, ...], str]]:
        try:
            raw = json.loads(self._cache_path.read_text())
            return {k: (tuple(v[0]), v[1], bool(v[2])) for k, v in raw.items()}
        except (OSError, ValueError, TypeError, IndexError, AttributeError):
            return {}

    def _save_cache(self) -> None:
        # Only a speed-up: losing it costs hashing, never correctness.
        temp = self._cache_path.with_suffix(".tmp")
        try:
            temp.write_text(
                json.dumps({k: [list(v[0]), v[1], v[2]] for k, v in self._known.items()})
            )
            os.replace(temp, self._cache_path)
        except OSError as exc:
            log.debug("stat cache not saved: %s", exc)
