"""Bringing the index in line with the configured folders, file by file.

A pass walks every folder, never following a symbolic link and never
entering or reading anything the access policy refuses (the folder itself
must lie inside a `[files]` root). A file whose size and modification time
are what the index recorded is unchanged without being read, as git does;
any other file is read through `fsafe.read_file` (no link followed on the
way, no file with other hard links) and hashed, and only a new hash is
parsed. Documents that are gone, or that the policy now refuses, leave the
index. One file failing (corrupt, encrypted, too large) is reported with
its reason and never stops the others. What a pass leaves out is said too:
a configured folder it cannot use (refused, missing, unreadable) and, in
the folders, the files it skips (no reader for their format, links) and the
folders the policy does not let it enter.
"""

from __future__ import annotations

import enum
import hashlib
import os
import stat
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..security import fsafe
from ..security.policy import Access, AccessDenied, AccessPolicy
from ..tools.errors import ToolError, explain
from . import formats
from .settings import DocsSettings
from .store import DocsStore, FileStamp

# Progress: (files looked at, files to look at, the file just done).
Progress = Callable[[int, int, str], None]


class Status(enum.Enum):
    """What one pass did with one file."""

    NEW = "new"
    CHANGED = "changed"
    UNCHANGED = "unchanged"
    REMOVED = "removed"
    FAILED = "failed"
    REFUSED = "refused"  # the access policy does not let the agent read it
    SKIPPED = "skipped"  # not a document here: no reader, a link, a folder not entered
    UNUSABLE = "unusable"  # a configured folder that cannot be indexed at all


_ALWAYS_COUNTED = (Status.NEW, Status.CHANGED, Status.UNCHANGED, Status.REMOVED, Status.FAILED)
_COUNTED_WHEN_SEEN = {
    Status.REFUSED: lambda n: f"{n} refused by the access policy",
    Status.SKIPPED: lambda n: f"{n} skipped",
    Status.UNUSABLE: lambda n: f"{n} folder{'' if n == 1 else 's'} not indexed",
}


@dataclass(frozen=True, slots=True)
class FileOutcome:
    path: str
    status: Status
    reason: str = ""


@dataclass(frozen=True, slots=True)
class IndexReport:
    """Everything one pass did, file by file."""

    outcomes: tuple[FileOutcome, ...]
    pages: int = 0  # pages parsed in this pass (see `page_count`)

    def count(self, status: Status) -> int:
        return sum(1 for o in self.outcomes if o.status is status)

    @property
    def counts(self) -> Counter[Status]:
        return Counter(o.status for o in self.outcomes)

    def of(self, status: Status) -> list[FileOutcome]:
        return [o for o in self.outcomes if o.status is status]

    @property
    def complete(self) -> bool:
        """Whether every configured folder could be indexed."""
        return not self.count(Status.UNUSABLE)

    def summary(self) -> str:
        """One line: how many files of each kind."""
        counts = self.counts
        parts = [f"{counts[s]} {s.value}" for s in _ALWAYS_COUNTED]
        parts += [words(counts[s]) for s, words in _COUNTED_WHEN_SEEN.items() if counts[s]]
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class _Candidate:
    path: Path
    root: Path  # the policy root that holds it
    untrusted: bool
    info: os.stat_result


@dataclass
class _Walk:
    candidates: dict[str, _Candidate] = field(default_factory=dict)
    outcomes: list[FileOutcome] = field(default_factory=list)


# A PDF page is a page; other formats count one page per 3,000 characters
# (about a printed page), so that throughput means the same across formats.
PAGE_CHARS = 3000


def page_count(outline: formats.Outline) -> int:
    if outline.pages is not None:
        return outline.pages
    chars = sum(len(s.text) for s in outline.sections)
    return max(1, -(-chars // PAGE_CHARS))


def _skipped(info: os.stat_result, name: str) -> str:
    """Why a folder entry is not a document here."""
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link (links are never followed)"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file (a socket, pipe or device)"
    suffix = PurePosixPath(name).suffix.lower()
    kinds = ", ".join(sorted(formats.READERS))
    return (f"no reader for {suffix} files" if suffix else "no reader for files without a "
            "suffix") + f" (documents are {kinds})"


class Indexer:
    """Keeps a `DocsStore` in line with the folders of `[docs]`."""

    def __init__(
        self,
        settings: DocsSettings,
        policy: AccessPolicy,
        store: DocsStore,
        *,
        allow_hard_links: bool = False,
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.store = store
        self._allow_hard_links = allow_hard_links

    def run(
        self, progress: Progress | None = None, stop: threading.Event | None = None
    ) -> IndexReport:
        """One pass over every folder: new and changed files parsed, the rest
        left as they are, vanished or refused ones removed. When `stop` is set
        the pass ends after the file in hand, removing nothing."""
        walk = self._walk()
        stamps = self.store.stamps()
        failures = self.store.failures()
        untrusted = self.store.untrusted_paths()
        outcomes = list(walk.outcomes)
        pages = 0
        total = len(walk.candidates)
        for done, (key, candidate) in enumerate(sorted(walk.candidates.items()), 1):
            if stop is not None and stop.is_set():
                return IndexReport(tuple(outcomes), pages)
            outcome, parsed = self._visit(candidate, stamps.get(key), failures.get(key))
            if outcome.status is Status.UNCHANGED and (key in untrusted) != candidate.untrusted:
                # The file is the same; its folder's `untrusted` setting is not.
                self.store.set_untrusted(key, candidate.untrusted)
            outcomes.append(outcome)
            pages += parsed
            if progress is not None:
                progress(done, total, key)
        gone = sorted((set(stamps) | set(failures)) - set(walk.candidates))
        self.store.remove(gone)
        outcomes += [FileOutcome(p, Status.REMOVED) for p in gone if p in stamps]
        return IndexReport(tuple(outcomes), pages)

    # -- finding the files -----------------------------------------------------------

    def _walk(self) -> _Walk:
        walk = _Walk()
        for folder in self.settings.folders:
            try:
                target = self.policy.check(str(folder.path), Access.READ)
            except AccessDenied as exc:
                reason = str(exc).removeprefix(f"{folder.path}: ")  # the path is said once
                walk.outcomes.append(FileOutcome(str(folder.path), Status.UNUSABLE, reason))
                continue
            if not target.path.is_dir():
                missing = ("it is a file, not a folder" if target.path.exists()
                           else "the folder does not exist")
                walk.outcomes.append(FileOutcome(str(folder.path), Status.UNUSABLE, missing))
                continue
            for path, info in self._files(target.path, walk):
                key = str(path)
                known = walk.candidates.get(key)
                root = self.policy.root_of(path)
                assert root is not None  # the policy accepted every folder on the way
                # A file in two configured folders is outside data if either says so.
                untrusted = folder.untrusted or (known is not None and known.untrusted)
                walk.candidates[key] = _Candidate(path, root.path, untrusted, info)
        return walk

    def _files(self, top: Path, walk: _Walk) -> Iterator[tuple[Path, os.stat_result]]:
        """Regular files with a reader below `top`: links are never followed,
        refused folders never entered, refused files reported."""
        pending = [top]
        while pending:
            folder = pending.pop()
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError as exc:
                status = Status.UNUSABLE if folder == top else Status.FAILED
                walk.outcomes.append(FileOutcome(str(folder), status, explain(exc) or str(exc)))
                continue
            for entry in entries:
                path = Path(entry.path)
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # gone meanwhile
                if stat.S_ISDIR(info.st_mode):
                    reason = self.policy.denial(path, Access.READ)
                    if reason is None:
                        pending.append(path)
                    else:
                        walk.outcomes.append(FileOutcome(
                            str(path), Status.SKIPPED, f"a folder not entered: {reason}"))
                elif stat.S_ISREG(info.st_mode) and formats.supported(entry.name):
                    reason = self.policy.denial(path, Access.READ)
                    if reason is None:
                        yield path, info
                    else:
                        walk.outcomes.append(FileOutcome(str(path), Status.REFUSED, reason))
                else:
                    walk.outcomes.append(
                        FileOutcome(str(path), Status.SKIPPED, _skipped(info, entry.name)))

    # -- one file --------------------------------------------------------------------

    def _visit(
        self,
        candidate: _Candidate,
        known: FileStamp | None,
        failed: tuple[FileStamp, str] | None,
    ) -> tuple[FileOutcome, int]:
        key = str(candidate.path)
        size, mtime = candidate.info.st_size, candidate.info.st_mtime_ns
        if known is not None and (known.size, known.mtime_ns) == (size, mtime):
            return FileOutcome(key, Status.UNCHANGED), 0
        if failed is not None and (failed[0].size, failed[0].mtime_ns) == (size, mtime):
            return FileOutcome(key, Status.FAILED, failed[1]), 0
        if size > self.settings.max_file_bytes:
            reason = (f"{size:,} bytes, above the {self.settings.max_file_mb} MB limit "
                      "([docs] max_file_mb)")
            self.store.fail(FileStamp(key, "", size, mtime), reason)
            return FileOutcome(key, Status.FAILED, reason), 0
        try:
            relative = PurePosixPath(candidate.path.relative_to(candidate.root).as_posix())
            data = fsafe.read_file(candidate.root, relative,
                                   max_bytes=self.settings.max_file_bytes,
                                   allow_hard_links=self._allow_hard_links)
        except (ToolError, OSError) as exc:
            # Not recorded: a file swapped for a link or briefly unreadable is tried again.
            reason = str(exc) if isinstance(exc, ToolError) else explain(exc) or str(exc)
            return FileOutcome(key, Status.FAILED, reason), 0
        stamp = FileStamp(key, hashlib.blake2b(data, digest_size=20).hexdigest(), size, mtime)
        if known is not None and known.hash == stamp.hash:
            self.store.restamp(stamp)  # touched, not changed: nothing to parse
            return FileOutcome(key, Status.UNCHANGED), 0
        if failed is not None and failed[0].hash == stamp.hash:
            return FileOutcome(key, Status.FAILED, failed[1]), 0
        try:
            outline = formats.extract(candidate.path.name, data)
        except formats.UnreadableDocument as exc:
            reason = f"could not be read as {candidate.path.suffix.lower()[1:]}: {exc}"
            self.store.fail(stamp, reason)
            return FileOutcome(key, Status.FAILED, reason), 0
        self.store.put(stamp, candidate.path.suffix.lower()[1:], outline,
                       untrusted=candidate.untrusted)
        status = Status.NEW if known is None else Status.CHANGED
        return FileOutcome(key, status), page_count(outline)
