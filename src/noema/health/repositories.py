"""Is a versions repository sound? Opened read-only with pygit2, never through
the version store, so a damaged repository is looked at, not written to.

The quick check (HEAD resolves to a commit whose tree reads) runs before the
history commands; the full check reads every object reachable from HEAD and
every object stored. The repair keeps the damaged repository aside and puts
back a copy whose branch points at the newest commit whose whole history
still reads.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2

_ERRORS = (pygit2.GitError, KeyError, ValueError, OSError)


class DamagedRepository(Exception):
    """A versions repository that cannot be read as it is; the message is for the person."""

    def __init__(self, gitdir: Path, reason: str) -> None:
        super().__init__(f"the versions repository {gitdir} is damaged: {reason}")
        self.gitdir = gitdir
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RepositoryRepair:
    """What a repair of one repository kept."""

    aside: Path  # the damaged repository, as it was
    kept_commits: int  # versions still in the history
    lost_commits: int  # versions only the copy aside holds (as far as can be told)


def quick_problem(gitdir: Path) -> str | None:
    """What is wrong with the newest version, or None (a repository with no
    version yet is sound)."""
    try:
        repo = pygit2.Repository(str(gitdir))
        if repo.head_is_unborn:
            return None
        head = repo.head.peel(pygit2.Commit)
        head.tree  # noqa: B018 - reading it is the check
    except _ERRORS as exc:
        return _reason(exc)
    return None


def problems(gitdir: Path) -> list[str]:
    """Everything wrong with a repository: HEAD, every object reachable from it,
    every object stored. Empty when it is sound."""
    try:
        repo = pygit2.Repository(str(gitdir))
    except _ERRORS as exc:
        return [f"it does not open as a git repository ({_reason(exc)})"]
    found: list[str] = []
    try:
        unborn = repo.head_is_unborn
        head = None if unborn else repo.head.target
    except _ERRORS as exc:
        return [f"its branch does not point at a version ({_reason(exc)})"]
    if head is not None:
        missing = _Reading(repo).unreadable_from(head)
        if missing:
            found.append(f"{missing} of the objects its history needs cannot be read")
    garbled = sum(1 for _ in _unreadable_objects(repo))
    if garbled:
        found.append(f"{garbled} stored objects cannot be read")
    return found


def repair(gitdir: Path, aside: Path) -> RepositoryRepair:
    """Move the damaged repository to `aside`, and put back a copy whose branch
    points at the newest commit whose whole history reads (none: a repository
    with no version, which the next write fills with a snapshot)."""
    gitdir.rename(aside)
    shutil.copytree(aside, gitdir, symlinks=True)
    branch = _branch_name(gitdir)
    (gitdir / "HEAD").write_text(f"ref: {branch}\n", encoding="utf-8")
    repo = pygit2.Repository(str(gitdir))
    for oid in list(_unreadable_objects(repo)):
        _loose_path(gitdir, oid).unlink(missing_ok=True)  # the copy aside keeps it
    commits = _readable_commits(repo)
    generation = _generations(commits)
    reading = _Reading(repo)
    newest_first = sorted(commits, key=lambda c: (generation[c.id], c.commit_time), reverse=True)
    for commit in newest_first:
        if reading.whole_history_reads(commit.id):
            repo.references.create(branch, commit.id, force=True)
            kept = generation[commit.id]
            return RepositoryRepair(aside, kept, len(commits) - kept)
    if branch in repo.references:
        repo.references.delete(branch)
    return RepositoryRepair(aside, 0, len(commits))


class _Reading:
    """Which objects of a repository read, each read at most once."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        self.good: set[pygit2.Oid] = set()
        self.bad: set[pygit2.Oid] = set()

    def whole_history_reads(self, head: pygit2.Oid) -> bool:
        return self.unreadable_from(head) == 0

    def unreadable_from(self, head: pygit2.Oid) -> int:
        """How many objects reachable from `head` cannot be read."""
        seen: set[pygit2.Oid] = set()
        pending = [head]
        broken = 0
        while pending:
            oid = pending.pop()
            if oid in seen:
                continue
            seen.add(oid)
            if oid in self.bad:
                broken += 1
                continue
            try:
                obj = self.repo[oid]
                if isinstance(obj, pygit2.Commit):
                    pending.extend(obj.parent_ids)
                    pending.append(obj.tree_id)
                elif isinstance(obj, pygit2.Tree):
                    pending.extend(entry.id for entry in obj)
                elif oid not in self.good:
                    obj.read_raw()
                self.good.add(oid)
            except _ERRORS:
                self.bad.add(oid)
                broken += 1
        return broken


def _generations(commits: list[pygit2.Commit]) -> dict[pygit2.Oid, int]:
    """Per commit, how many readable commits its history holds (itself included)."""
    by_id = {c.id: c for c in commits}
    found: dict[pygit2.Oid, int] = {}
    for commit in commits:
        stack = [commit.id]
        while stack:
            oid = stack[-1]
            if oid in found:
                stack.pop()
                continue
            parents = [p for p in by_id[oid].parent_ids if p in by_id]
            waiting = [p for p in parents if p not in found]
            if waiting:
                stack.extend(waiting)
                continue
            found[oid] = 1 + max((found[p] for p in parents), default=0)
            stack.pop()
    return found


def _unreadable_objects(repo: pygit2.Repository) -> Iterator[pygit2.Oid]:
    try:
        stored = list(repo.odb)
    except _ERRORS:
        return
    for oid in stored:
        try:
            repo.odb.read(oid)
        except _ERRORS:
            yield oid


def _readable_commits(repo: pygit2.Repository) -> list[pygit2.Commit]:
    commits = []
    try:
        stored = list(repo.odb)
    except _ERRORS:
        return []
    for oid in stored:
        try:
            obj = repo[oid]
        except _ERRORS:
            continue
        if isinstance(obj, pygit2.Commit):
            commits.append(obj)
    return commits


def _branch_name(gitdir: Path) -> str:
    # HEAD is a symbolic reference to the branch ("ref: refs/heads/main").
    try:
        text = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        text = ""
    if text.startswith("ref: refs/heads/"):
        return text[len("ref: "):]
    return "refs/heads/main"


def _loose_path(gitdir: Path, oid: pygit2.Oid) -> Path:
    text = str(oid)
    return gitdir / "objects" / text[:2] / text[2:]


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) < 200 else text[:200] + "…"
