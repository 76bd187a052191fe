"""Every write of the agent, versioned in a git repository of its own.

Each read-write root (a workspace) gets a repository in the agent's data
folder whose work tree is the workspace: the person's own `.git`, if any, is
never opened, and no `.git` file is placed in the workspace. Before an agent
write, the person's pending edits are committed as theirs; then the write
is committed as the agent's, with the turn ID and the tool in the message.
The repository is ordinary: `git --git-dir <repo> log` reads it.

`versions.py` finds a workspace's store and opens it when first needed.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pygit2

from .changes import EVERYTHING, AlwaysRescan, Changed, ChangeFeed, watch
from .fsafe import TEMP_SUFFIX
from .history import (
    Authors,
    ChangeNote,
    Entry,
    Recorded,
    Skipped,
    Version,
    VersionNotFound,
    when_of,
)
from .worktree import WorkTree

log = logging.getLogger(__name__)

_BRANCH = "main"


def _exclude_lines(deny: Iterable[str], workdir: Path, private: Iterable[Path]) -> list[str]:
    """Deny globs in gitignore form: secrets are never copied into the history.
    Private folders (the agent's data, with this very repository) that lie in
    the work tree are left out too."""
    lines = [f"*{TEMP_SUFFIX}"]
    for folder in (Path(os.path.realpath(f)) for f in private):
        if folder.is_relative_to(workdir) and folder != workdir:
            lines.append("/" + folder.relative_to(workdir).as_posix() + "/")
    for glob in deny:
        if glob.startswith(("/", "~")):
            continue  # absolute rules cannot be expressed relative to the work tree
        lines.append("/" + glob.strip("/") if "/" in glob else glob)
    return lines



def _made(gitdir: Path) -> bool:
    """Whether the history at `gitdir` was made whole: its work tree is set
    last, so a repository half made (by a creator that stopped) says no."""
    try:
        return "worktree = " in (gitdir / "config").read_text(errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return False

class VersionStore:
    """The repository of one workspace."""

    def __init__(
        self,
        workdir: Path,
        gitdir: Path,
        *,
        authors: Authors,
        exclude: Iterable[str] = (),
        private: Iterable[Path] = (),
        watch_changes: bool = True,
        max_file_bytes: int = 50 * 1024 * 1024,
        allow_hard_links: bool = False,
    ) -> None:
        self.workdir = workdir
        self.gitdir = gitdir
        # The person's choice for files with several hard links: the recorder
        # and every write and restore follow it, as the file tools do.
        self.allow_hard_links = allow_hard_links
        self._authors = authors
        self._repo = self._open(workdir, gitdir)
        info = gitdir / "info"
        info.mkdir(exist_ok=True)
        lines = _exclude_lines(exclude, workdir, (*private, gitdir))
        (info / "exclude").write_text("\n".join(lines) + "\n")
        self._tree = WorkTree(
            self._repo, workdir, max_file_bytes=max_file_bytes, allow_hard_links=allow_hard_links
        )
        self._feed: ChangeFeed = (
            watch(workdir, self._tree.skip_dir) if watch_changes else AlwaysRescan()
        )
        self._index = self._repo.index
        self._mutex = threading.RLock()
        # Told the paths of each version of the agent's (a watched folder then
        # knows the change is the agent's own, not news).
        self.on_agent_version: Callable[[Path, Sequence[str]], None] | None = None
        self._depth = 0
        self._lock_fd = os.open(gitdir / "noema.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._head_seen: pygit2.Oid | None = None
        self._full_scan_due = True
        # Staged by a call that committed nothing (its tree equalled HEAD's, or
        # it failed): the next commit must still look at the index.
        self._unsaved = False
        self._commits_since_refresh = 0
        self._skipped: tuple[Skipped, ...] = ()

    @staticmethod
    def _open(workdir: Path, gitdir: Path) -> pygit2.Repository:
        # By default libgit2 looks up every entry of each tree it writes to
        # prove it exists; every object we reference was written just before,
        # and the lookups cost a third of a versioned write. (Process-wide;
        # nothing else in Noema writes git objects.)
        pygit2.settings.enable_strict_object_creation(False)
        if not _made(gitdir):
            gitdir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # The start snapshot (a child process) and the agent's first write
            # may both make it: one at a time, the second finding it made.
            lock = os.open(gitdir.parent / "creating.lock",
                           os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not _made(gitdir):
                    # Created bare and then given a work tree: libgit2's own work-tree
                    # option would write a `.git` link file into the person's folder.
                    if not (gitdir / "HEAD").exists():
                        pygit2.init_repository(str(gitdir), bare=True, initial_head=_BRANCH)
                    config = pygit2.Repository(str(gitdir)).config
                    config["core.bare"] = False
                    config["core.worktree"] = str(workdir)
            finally:
                os.close(lock)
        return pygit2.Repository(str(gitdir))

    # -- locking -------------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive use of the repository, against threads and other processes
        (a `noema undo` typed while the agent works)."""
        with self._mutex:
            if self._depth == 0:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            self._depth += 1
            try:
                if self._depth == 1:
                    self._catch_up()
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _catch_up(self) -> None:
        head = self.head()
        head_id = head.id if head is not None else None
        if head_id != self._head_seen:
            # Another process committed: start again from what it recorded.
            if head is not None:
                self._index.read_tree(head.tree)
            else:
                self._index.clear()
            self._head_seen = head_id
            self._full_scan_due = True
            self._unsaved = False

    # -- recording -----------------------------------------------------------

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        """The paths the latest recording had to leave out of the history (each
        named once, when first met in that state), whether or not it made a
        version."""
        return self._skipped

    def left_out(self) -> tuple[Skipped, ...]:
        """Every path the history cannot hold, as the latest recordings found."""
        return self._tree.left_out()

    def record_person(self, also: Iterable[str] = ()) -> Version | None:
        """Commit, as the person's, whatever changed since the last version."""
        with self.locked():
            if not self._stage(self._changes(), also):
                return None
            return self._commit(None)

    def record(self, note: ChangeNote, paths: Iterable[str] | None = None) -> Version | None:
        """Commit the given paths (or everything that changed) under `note`."""
        with self.locked():
            explicit = None if paths is None else tuple(paths)
            changed = self._changes() if explicit is None else frozenset()
            if not self._stage(changed, explicit or ()):
                return None
            return self._commit(note, explicit)

    @contextmanager
    def change(self, note: ChangeNote, paths: Sequence[str]) -> Iterator[Recorded]:
        """Around a write of `paths`: the person's edits first, then the write.

        The version made for the write is on the yielded object afterwards.
        """
        recorded = Recorded()
        with self.locked():
            self.record_person(paths)
            before = self._skipped
            try:
                yield recorded
            finally:
                # Even a failed multi-file change is recorded, so the history
                # always matches the disk.
                recorded.version = self.record(note, paths)
                recorded.skipped = before + self._skipped

    def _changes(self) -> Changed:
        changed = self._feed.take()
        if self._full_scan_due:
            self._full_scan_due = False
            return EVERYTHING
        return changed

    def _stage(self, changed: Changed, also: Iterable[str]) -> bool:
        """Stage changes; False when the index did not change at all."""
        self._tree.take_skipped()  # what an earlier look (a diff) found is not news
        before = self._tree.touched
        forced = frozenset(also)
        if changed is EVERYTHING:
            self._tree.stage(self._index, EVERYTHING)
        else:
            self._tree.stage(self._index, frozenset(changed) - forced)
        for rel in sorted(forced):
            self._tree.stage_path(self._index, rel, force=True)
        if changed is EVERYTHING:
            self._refresh_tree_cache()
            # The on-disk index only serves people who run `git status` on
            # this repository; refreshing it on every write would cost more
            # than the write itself, and failing to must not stop a version.
            try:
                self._index.write()
            except (pygit2.GitError, OSError) as exc:
                log.warning("the index of %s was not saved: %s", self.gitdir, exc)
        self._skipped = self._tree.take_skipped()
        if self._tree.touched != before:
            self._unsaved = True
        return self._unsaved

    def _refresh_tree_cache(self) -> None:
        # libgit2 reuses the IDs of unchanged folders only after a read_tree;
        # without it every commit rehashes every folder of the workspace.
        self._index.read_tree(self._repo[self._index.write_tree()])
        self._commits_since_refresh = 0

    def _commit(
        self, note: ChangeNote | None, paths: Iterable[str] | None = None
    ) -> Version | None:
        tree_id = self._index.write_tree()
        head = self.head()
        if head is not None and head.tree_id == tree_id:
            self._unsaved = False
            return None
        tree = self._repo[tree_id]
        if head is None and len(tree) == 0:  # type: ignore[arg-type]
            return None
        if paths is None or head is None:
            changed = _changed(self._repo, head.tree if head else None, tree)  # type: ignore[arg-type]
        else:
            changed = [
                p
                for p in sorted(set(paths))
                if _object_id(head.tree, p) != _object_id(tree, p)  # type: ignore[arg-type]
            ]
        paths = changed
        if note is None:
            shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
            title = "Initial state of the workspace" if head is None else "Changes by the person"
            note = ChangeNote("person", f"{title}: {shown}")
        signature = self._authors.signature(note.author)
        parents = [head.id] if head is not None else []
        oid = self._repo.create_commit(
            "HEAD", signature, signature, note.message(), tree_id, parents
        )
        self._head_seen = oid
        self._unsaved = False
        self._commits_since_refresh += 1
        if self._commits_since_refresh >= 32:
            self._refresh_tree_cache()
        if note.author == "agent" and self.on_agent_version is not None:
            try:
                self.on_agent_version(self.workdir, paths)
            except Exception:  # a listener's trouble never undoes a version
                log.exception("a listener of the agent's versions failed")
        return Version(str(oid), when_of(signature), note, tuple(paths), self._skipped)

    # -- reading -------------------------------------------------------------

    def head(self) -> pygit2.Commit | None:
        try:
            return self._repo.head.peel(pygit2.Commit)
        except (pygit2.GitError, KeyError):
            return None

    def resolve(self, version: str) -> pygit2.Commit:
        """The commit a version name (full or short ID, or 'HEAD~2') points at."""
        text = version.strip()
        if not text or text.startswith("-"):
            raise VersionNotFound("name a version by its ID, as file_history lists them")
        try:
            found = self._repo.revparse_single(text).peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            raise VersionNotFound(
                f"there is no version {version!r} in the history of {self.workdir}"
            ) from None
        return found

    def version_of(self, commit: pygit2.Commit, *, with_paths: bool = True) -> Version:
        parent = commit.parents[0].tree if commit.parents else None
        paths = tuple(_changed(self._repo, parent, commit.tree)) if with_paths else ()
        return Version(
            str(commit.id), when_of(commit.author), ChangeNote.parse(commit.message), paths
        )

    def log(self, path: str | None = None, limit: int = 50) -> list[Version]:
        """Versions newest first; with `path`, only those that changed it."""
        found: list[Version] = []
        for commit in self.commits():
            if path is not None:
                before = _object_id(commit.parents[0].tree, path) if commit.parents else None
                if _object_id(commit.tree, path) == before:
                    continue
            found.append(self.version_of(commit))
            if len(found) >= limit:
                break
        return found

    def entry(self, commit: pygit2.Commit, path: str) -> Entry | None:
        """A file as `commit` recorded it, or None when it did not exist there."""
        try:
            obj = commit.tree[path]
        except KeyError:
            return None
        if not isinstance(obj, pygit2.Blob):
            return None
        return Entry(obj.data, obj.filemode)

    def entry_id(self, commit: pygit2.Commit | None, path: str) -> tuple[str, int] | None:
        """What identifies a path's content in a version (None: absent)."""
        return _object_id(commit.tree, path) if commit is not None else None

    def commits(self, limit: int = 10_000) -> Iterator[pygit2.Commit]:
        """Commits newest first."""
        head = self.head()
        if head is None:
            return
        order = pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME
        for count, commit in enumerate(self._repo.walk(head.id, order)):
            if count >= limit:
                return
            yield commit

    def is_folder(self, commit: pygit2.Commit, path: str) -> bool:
        try:
            return isinstance(commit.tree[path], pygit2.Tree)
        except KeyError:
            return False

    def patch(self, path: str | None = None, version: str | None = None) -> str:
        """Unified diff: what `version` changed, or (without one) the changes on
        disk that no version holds yet."""
        if version is not None:
            commit = self.resolve(version)
            diff = (
                self._repo.diff(commit.parents[0].tree, commit.tree)
                if commit.parents
                else commit.tree.diff_to_tree(swap=True)
            )
        else:
            head = self.head()
            scratch = pygit2.Index()
            if head is not None:
                scratch.read_tree(head.tree)
            with self.locked():
                self._tree.stage(scratch, EVERYTHING)
            now = self._repo[scratch.write_tree(self._repo)]
            diff = self._repo.diff(head.tree, now) if head else now.diff_to_tree(swap=True)  # type: ignore[union-attr]
        parts = [
            p.text or ""
            for p in diff
            if path is None
            or _under(p.delta.new_file.path, path)
            or _under(p.delta.old_file.path, path)
        ]
        return "".join(parts)

    def close(self) -> None:
        """Release the repository. Never raises: at shutdown (a full disk, a
        damaged index) the on-disk index is only a convenience for `git status`."""
        try:
            self._feed.close()
        except OSError as exc:
            log.warning("closing the change feed of %s failed: %s", self.workdir, exc)
        if self._lock_fd < 0:
            return
        try:
            with self.locked():
                self._index.write()
        except (pygit2.GitError, OSError) as exc:
            log.warning("the index of %s was not saved at close: %s", self.gitdir, exc)
        finally:
            os.close(self._lock_fd)
            self._lock_fd = -1


def _under(candidate: str | None, path: str) -> bool:
    return bool(candidate) and (candidate == path or candidate.startswith(path.rstrip("/") + "/"))  # type: ignore[union-attr]


def _object_id(tree: pygit2.Tree, path: str) -> tuple[str, int] | None:
    try:
        obj = tree[path]
    except KeyError:
        return None
    return (str(obj.id), obj.filemode)


def _changed(repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree) -> list[str]:
    # Diffing against "no tree" rather than a written empty tree keeps the
    # repository free of dangling objects (git fsck stays silent).
    diff = repo.diff(old, new) if old is not None else new.diff_to_tree(swap=True)
    names: set[str] = set()
    for delta in diff.deltas:
        names.add(delta.new_file.path)
        names.add(delta.old_file.path)
    return sorted(names)
