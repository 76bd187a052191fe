"""Which paths the agent may read or write.

A path is resolved before it is judged: `~`, relative paths (against the
workspace), `..`, and every symbolic link, including those in the parents
of a file that does not exist yet (`/proc/self/root`, `/proc/self/fd/N` are
symbolic links too). The resolved path must lie in a configured root, must
not cross a `.git` folder or the agent's own data, and must match no deny
glob. Resolving only narrows the question: the file operations in
`fsafe.py` re-check on open so that a link swapped in after the check
cannot redirect them.

"A `.git` folder" means every name git itself would take for one on some
file system (`is_git_name`): `.GIT`, `.git.`, `git~1`, `.git::$INDEX_ALLOCATION`,
`.g\u200cit`... Git refuses to check such names out; if the tools wrote
them, the person's git would read them as its own metadata.
"""

from __future__ import annotations

import contextlib
import enum
import os
import threading
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path, PurePosixPath

from ..paths import AgentPaths
from ..tools.errors import ToolError, quoted, shorten
from .gitreads import (
    Includes,
    Repositories,
    looks_like_repository,
    person_git_configs,
    repository_configs,
    repository_names,
)
from .settings import FilesSettings

_GIT_REFUSAL = "git folders (and names git reads as .git) are never read or written by the tools"

# Code points HFS+ ignores when it compares names, so that '.g\u200cit' opens
# '.git' on a Mac; git skips the same list (its `next_hfs_char`).
_HFS_IGNORED = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")

# What NTFS ignores or reads specially after a name: trailing dots and spaces
# ('.git. .' is '.git'), and ':' opening an alternate data stream
# ('.git::$INDEX_ALLOCATION' is the folder '.git').
_NTFS_TAIL = r"[. ]*(?::.*)?\Z"

# '.git' and its 8.3 short names. Git itself checks only 'git~1' (the short
# name of the first dotted folder); any 'git~N' is refused here since it costs
# nothing and NTFS hands out ~2, ~3... when ~1 is taken.
_DOTGIT = re.compile(r"(?:\.git|git~[0-9]+)" + _NTFS_TAIL, re.IGNORECASE | re.DOTALL)

# Files git reads from the work tree and refuses as symbolic links, with the
# prefix of their hashed NTFS short name (git's `is_ntfs_dotgitmodules` and
# friends), so that a link cannot make git read a file outside the tree.
_GIT_LINK_NAMES = {
    "gitmodules": "gi7eba",
    "gitattributes": "gi7d29",
    "gitignore": "gi250a",
    "mailmap": "maba30",
}


def _short_name_forms(word: str, hashed: str) -> str:
    """The 8.3 names NTFS may give '.word': 'gitmod~1'..'~4', or the hashed
    fall-back, up to six characters of `hashed` then '~' and digits, eight in all."""
    forms = [re.escape(word[:6]) + "~[1-4]"]
    for keep in range(7):
        forms.append(re.escape(hashed[:keep]) + "~[1-9][0-9]{%d}" % (6 - keep))
    return "|".join(forms)


_GIT_LINK = re.compile(
    "(?:"
    + "|".join(
        rf"\.{re.escape(word)}|{_short_name_forms(word, hashed)}"
        for word, hashed in _GIT_LINK_NAMES.items()
    )
    + ")"
    + _NTFS_TAIL,
    re.IGNORECASE | re.DOTALL,
)


def _spellings(component: str) -> list[str]:
    """The names git compares for one path component: the component cut at
    backslashes (a separator for NTFS, which git honours everywhere), with the
    code points HFS+ ignores removed; only ASCII can spell git's names."""
    found = []
    for piece in component.split("\\"):
        plain = _HFS_IGNORED.sub("", piece)
        if plain.isascii():
            found.append(plain)
    return found


@lru_cache(maxsize=4096)
def is_git_name(component: str) -> bool:
    """Whether git would take this one path component for `.git` on some file
    system (case-insensitive, NTFS or HFS+), and so refuses to check it out.

    The one rule for the file tools, the shell's masks and the recorder.
    """
    return any(_DOTGIT.match(name) for name in _spellings(component))


@lru_cache(maxsize=4096)
def is_git_link_name(component: str) -> bool:
    """Whether git refuses this component as a symbolic link: `.gitmodules`,
    `.gitattributes`, `.gitignore` or `.mailmap` in any spelling a file
    system reads as one of them. As regular files they are the person's own."""
    return any(_GIT_LINK.match(name) for name in _spellings(component))


class Access(enum.Enum):
    """What the caller means to do with a path."""

    READ = "read"
    WRITE = "write"


class AccessDenied(ToolError):
    """A path the policy refuses; the message says what is allowed instead."""


@dataclass(frozen=True, slots=True)
class Root:
    """A configured folder, fully resolved."""

    path: Path
    writable: bool

    @property
    def label(self) -> str:
        return f"{self.path} ({'read-write' if self.writable else 'read-only'})"


@dataclass(frozen=True, slots=True)
class Target:
    """A path the policy accepted: where it really is and under which root."""

    requested: str
    path: Path
    root: Root

    @property
    def relative(self) -> PurePosixPath:
        """The path inside its root ('.' for the root itself)."""
        return PurePosixPath(self.path.relative_to(self.root.path).as_posix())


def real(path: Path | str) -> Path:
    """`path` with `~` expanded and every link resolved, existing or not."""
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def _within(path: Path, folder: Path) -> bool:
    # On resolved paths a string prefix is the same test as Path.is_relative_to,
    # at a tenth of the cost: the shell's masks ask this for every file.
    inner, outer = str(path), str(folder)
    return inner == outer or inner.startswith(outer if outer.endswith("/") else outer + "/")


def _inside(path: Path, root: Path) -> PurePosixPath:
    """`path` relative to `root`, which holds it ('.' for the root itself)."""
    outer = str(root)
    rest = str(path)[len(outer):].lstrip("/")
    return PurePosixPath(rest) if rest else PurePosixPath(".")


class AccessPolicy:
    """Decides on paths; holds no open files and changes nothing on disk."""

    def __init__(
        self,
        roots: Sequence[Root],
        deny: Iterable[str] = (),
        protected: Iterable[Path] = (),
    ) -> None:
        if not roots:
            raise ValueError("an access policy needs at least one root")
        self.roots = tuple(roots)
        self.deny = tuple(deny)
        # Globs without '/' judge each name on its own; a walk meets the same
        # names again and again, so their verdicts are kept.
        self._name_globs = tuple(g for g in self.deny if "/" not in g and not g.startswith("~"))
        self._path_globs = tuple(g for g in self.deny if g not in self._name_globs)
        self._name_verdict = lru_cache(maxsize=65536)(self._first_name_glob)
        self.protected = tuple(real(p) for p in protected)
        self._includes = Includes()
        self._repositories = Repositories([r.path for r in self.roots], self.protected)
        # Rules name paths, but a rename moves what they cover: the folders
        # and files they covered are also known by identity (device, inode),
        # so that a secret renamed out from under its rule stays refused.
        self._protected_ids: set[tuple[int, int]] = set()
        # A file's change time too: a rename of a folder above it leaves it
        # alone, while a new file that was given a deleted secret's inode
        # number has another (folders are matched by number alone).
        self._denied_ids: dict[tuple[int, int], int | None] = {}
        self._ids_lock = threading.Lock()
        self._note_protected()
        for root in self.roots:
            for guarded in self.protected:
                if _within(root.path, guarded):
                    raise ValueError(
                        f"the folder {root.path} lies inside the agent's own data "
                        f"({guarded}); choose a folder outside it"
                    )
        writable = [r for r in self.roots if r.writable]
        self.workspace = writable[0] if writable else self.roots[0]
        # Deepest first, so a read-write folder inside a read-only one wins.
        self._by_depth = sorted(self.roots, key=lambda r: len(r.path.parts), reverse=True)

    @classmethod
    def from_settings(cls, files: FilesSettings, paths: AgentPaths) -> AccessPolicy:
        """The policy for an agent: its roots, its deny globs, and the data of
        every agent on the machine (its own and its siblings') kept out."""
        roots = [Root(real(r.path), r.mode == "read-write") for r in files.roots]
        return cls(roots, files.deny, (paths.agents_dir,))

    @property
    def writable_roots(self) -> tuple[Root, ...]:
        return tuple(r for r in self.roots if r.writable)

    def resolve(self, raw: str) -> tuple[Path, Path]:
        """The lexical absolute path (for names as given) and the resolved one."""
        if "\x00" in raw:
            raise AccessDenied("a path cannot contain a NUL character (\\0); remove it")
        text = raw.strip()
        if not text:
            raise AccessDenied("the path is empty; " + self.summary())
        control = _control_character(text)
        if control is not None:
            # A newline or a tab in a name is a model's slip, not a name: it
            # would forge lines in every listing and log that shows it.
            raise AccessDenied(
                f"{quoted(text)} holds a control character ({control}); a file name here "
                "cannot hold newlines, tabs or other control characters: use ordinary text"
            )
        try:
            os.fsencode(text)
        except UnicodeEncodeError:
            raise AccessDenied(
                f"{quoted(text)} holds characters no file name can (a lone surrogate "
                "such as \\ud800); use ordinary text"
            ) from None
        expanded = Path(os.path.expanduser(text))
        if not expanded.is_absolute():
            expanded = self.workspace.path / expanded
        lexical = Path(os.path.normpath(expanded))
        _check_length(lexical)
        resolved = Path(os.path.realpath(expanded))
        looping = None if os.path.exists(resolved) else _looping_link(resolved)
        if looping is not None:
            raise AccessDenied(
                f"{quoted(str(looping))} is a symbolic link that leads back to itself (a "
                "loop); name the real file instead"
            )
        return lexical, resolved

    def check(self, raw: str, access: Access) -> Target:
        """Accept `raw` for `access` or raise AccessDenied saying why and what is allowed."""
        lexical, resolved = self.resolve(raw)
        reason = self.denial(resolved, access, lexical)
        if reason:
            shown = shorten(raw)
            if str(resolved) != raw:
                shown = f"{quoted(raw)} (resolves to {shorten(str(resolved))})"
            raise AccessDenied(f"{shown}: {reason}. {self.summary()}")
        root = self.root_of(resolved)
        assert root is not None  # denial() returned None, so a root holds it
        reason = self.moved_denial(resolved, root)
        if reason is None and access is Access.WRITE:
            reason = self.git_would_read(resolved, root)
        if reason:
            raise AccessDenied(f"{shorten(raw)}: {reason}. {self.summary()}")
        return Target(raw, resolved, root)

    def _note_protected(self) -> None:
        for folder in self.protected:
            with contextlib.suppress(OSError):
                info = os.stat(folder)
                with self._ids_lock:
                    self._protected_ids.add((info.st_dev, info.st_ino))

    def remember_denied(
        self, dev: int, ino: int, ctime_ns: int | None = None, *, agents: bool = False
    ) -> None:
        """A file (with its change time) or folder (`ctime_ns` None) a deny rule
        covers, or with `agents` a folder of Noema agents' data, by identity
        (see `moved_denial`)."""
        with self._ids_lock:
            if agents:
                self._protected_ids.add((dev, ino))
            else:
                self._denied_ids[(dev, ino)] = ctime_ns

    def may_be_denied(self, dev: int, ino: int) -> bool:
        """Whether `denied_identity` could refuse this inode (a cheap first look)."""
        with self._ids_lock:
            return (dev, ino) in self._protected_ids or (dev, ino) in self._denied_ids

    def denied_identity(self, info: os.stat_result) -> str | None:
        """Why the file or folder `info` describes is refused wherever it lies
        now, or None."""
        key = (info.st_dev, info.st_ino)
        with self._ids_lock:
            if key in self._protected_ids:
                return "it is agents' data (maybe moved or renamed), which the tools never touch"
            if key in self._denied_ids:
                known = self._denied_ids[key]
                if known is None or known == info.st_ctime_ns:
                    return (
                        "a deny rule covered it before it was moved or renamed (secrets and "
                        "private files)"
                    )
        return None

    def moved_denial(self, resolved: Path, root: Root) -> str | None:
        """Why `resolved` is refused because it, or a folder holding it, is
        something a rule covered under another name (a rename of the agents'
        data or of a secret's folder), or None. Looks at the disk."""
        self._note_protected()
        folder = root.path
        for part in (None, *_inside(resolved, root.path).parts):
            if part is not None:
                folder = folder / part
            try:
                info = os.lstat(folder)
            except OSError:
                return None  # nothing further exists yet
            reason = self.denied_identity(info)
            if reason:
                return reason
            if part == AGENTS_FOLDER and holds_agents(folder):
                return (
                    "it is the data of Noema agents (maybe another person's), which the "
                    "tools never touch"
                )
        return None

    def git_would_read(self, resolved: Path, root: Root) -> str | None:
        """Why writing `resolved` would hand the person's git something it
        reads as its own (configuration, hooks, a repository), or None.

        Unlike `denial` this looks at the disk: whether a folder on the way
        is, or would become with this write, a folder git takes for a
        repository (a bare one, another's `--separate-git-dir`, one made by
        writing `HEAD`, `objects/` and `refs/`); whether the file is the
        person's global or system git configuration, or one that it or the
        configuration of any repository in the roots (or enclosing one)
        includes, through any chain of includes.
        """
        configs = list(person_git_configs())
        if any(resolved in (c, real(c)) for c in configs):
            return (
                "it is the person's own git configuration, which every git command reads "
                "and obeys"
            )
        folder = root.path
        for part in _inside(resolved, root.path).parts:
            if looks_like_repository(repository_names(folder) | {part}):
                return (
                    f"{self.display(folder)} is, or with this write would become, a folder "
                    "git takes for a repository, whose configuration and hooks the person's "
                    "git obeys; write outside it"
                )
            configs += _repository_configs_at(folder)
            folder = folder / part
        configs += self._repositories.configs()
        if resolved in self._includes.reach(configs):
            return (
                "a git configuration of the person's includes this file, so git would obey "
                "what it says; write another file"
            )
        return None

    def root_of(self, resolved: Path) -> Root | None:
        """The innermost root that holds an already-resolved path."""
        for root in self._by_depth:
            if _within(resolved, root.path):
                return root
        return None

    def denial(self, resolved: Path, access: Access, lexical: Path | None = None) -> str | None:
        """Why `resolved` is refused for `access`, or None when it is allowed.

        Pure: it looks at the path strings only, so it can be applied to each
        entry of a directory walk.
        """
        for guarded in self.protected:
            if _within(resolved, guarded):
                return "it belongs to the agent's own data, which the tools never touch"
        root = self.root_of(resolved)
        if root is None:
            return "it is outside the folders you may use"
        relative = _inside(resolved, root.path)
        refusal = _git_denial(relative)
        if refusal:
            return refusal
        candidates = [(relative, resolved)]
        if lexical is not None and lexical != resolved:
            lex_root = self.root_of(lexical)
            if lex_root is not None:
                lex_rel = _inside(lexical, lex_root.path)
                refusal = _git_denial(lex_rel)
                if refusal:
                    return refusal
                # The path went through a link: git refuses these names as links.
                if is_git_link_name(lexical.name):
                    return (
                        f"{quoted(lexical.name)} is a symbolic link, and git never reads "
                        "that name through a link; use the file it points to"
                    )
                candidates.append((lex_rel, lexical))
        for rel, absolute in candidates:
            glob = self._matching_glob(rel, absolute)
            if glob:
                return f"it matches the deny rule {glob!r} (secrets and private files)"
        if access is Access.WRITE and not root.writable:
            return f"{root.path} is read-only"
        return None

    def _matching_glob(self, relative: PurePosixPath, absolute: Path) -> str | None:
        for glob in self._path_globs:
            if glob.startswith(("/", "~")):
                pattern = os.path.expanduser(glob)
                if _prefix_matches(PurePosixPath(absolute).parts, pattern, absolute=True):
                    return glob
            elif _prefix_matches(relative.parts, glob.strip("/"), absolute=False):
                return glob
        for part in relative.parts:
            glob = self._name_verdict(part)
            if glob:
                return glob
        return None

    def _first_name_glob(self, name: str) -> str | None:
        return next((g for g in self._name_globs if fnmatchcase(name, g)), None)

    def summary(self) -> str:
        """What the agent may use, for refusals and tool descriptions."""
        roots = "; ".join(
            f"{r.path} ({'read-write' if r.writable else 'read-only'}"
            + ("; the workspace, where relative paths start)" if r is self.workspace else ")")
            for r in self.roots
        )
        deny = ", ".join(self.deny) if self.deny else "nothing else"
        return (
            f"You may use: {roots}. Always refused inside them: .git folders (and names git "
            f"reads as .git, such as .GIT or git~1), the agent's own data, and names "
            f"matching {deny}."
        )

    def display(self, target: Target | Path) -> str:
        """A path as the model should write it back: relative inside the workspace."""
        path = target.path if isinstance(target, Target) else target
        if _within(path, self.workspace.path) and self.root_of(path) is self.workspace:
            rel = path.relative_to(self.workspace.path).as_posix()
            return rel or "."
        return str(path)


NAME_MAX = 255  # bytes in one name, on the file systems Linux uses
PATH_MAX = 4096  # bytes in a whole path, its final NUL included


def _looping_link(resolved: Path) -> Path | None:
    """The link at or above a path that `realpath` could not follow, or None.

    `realpath` gives up on a loop of links and leaves it in what it returns;
    anywhere else its answer holds no link at all.
    """
    for place in (resolved, *resolved.parents):
        if os.path.islink(place):
            return place
    return None


_UTF8_MOST = 4  # bytes a character may take, so short text needs no encoding


_CONTROL_NAMES = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab",
                  "\x1b": "an escape"}


def _control_character(text: str) -> str | None:
    """How to name the first control character (C0, DEL or C1) in `text`, or None."""
    for char in text:
        if unicodedata.category(char) == "Cc":
            return _CONTROL_NAMES.get(char, f"U+{ord(char):04X}")
    return None


def _check_length(path: Path) -> None:
    """Refuse a name or path the file system could not hold, before any system
    call says ENAMETOOLONG about it."""
    for part in path.parts:
        if len(part) * _UTF8_MOST <= NAME_MAX:
            continue
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            raise AccessDenied(
                f"the name {quoted(part)} is {size} bytes long; a file name holds at most "
                f"{NAME_MAX} bytes: use a shorter name"
            )
    text = str(path)
    size = len(text) if len(text) * _UTF8_MOST < PATH_MAX else len(os.fsencode(text))
    if size >= PATH_MAX:
        raise AccessDenied(
            f"the path {quoted(str(path))} is {size} bytes long; a path holds at most "
            f"{PATH_MAX - 1} bytes: use fewer or shorter folder names"
        )


AGENTS_FOLDER = "agents"
# Files only an agent's own folder holds (see paths.py): one of them in a
# sub-folder of an `agents` folder marks the data of some Noema home.
_AGENT_MARKS = ("agent.lock", "turns.db")


def holds_agents(folder: Path | str) -> bool:
    """Whether `folder` (named `agents`) holds the data of Noema agents, any
    person's: a sub-folder with an agent's lock or conversation."""
    try:
        with os.scandir(folder) as entries:
            for n, entry in enumerate(entries):
                if n >= _MAX_NEIGHBOURS:
                    break
                if entry.is_dir(follow_symlinks=False) and any(
                    os.path.lexists(os.path.join(entry.path, mark)) for mark in _AGENT_MARKS
                ):
                    return True
    except OSError:
        pass
    return False


_MAX_NEIGHBOURS = 500  # entries of one folder looked at for repositories


def _repository_configs_at(folder: Path) -> list[Path]:
    """The configuration files of the repository `folder` is, and of those
    its sub-folders are."""
    found: list[Path] = []
    if os.path.isdir(folder / ".git"):
        found += repository_configs(folder / ".git")
    try:
        with os.scandir(folder) as entries:
            for n, entry in enumerate(entries):
                if n >= _MAX_NEIGHBOURS:
                    break
                if entry.is_dir(follow_symlinks=False) and os.path.isdir(
                    os.path.join(entry.path, ".git")
                ):
                    found += repository_configs(Path(entry.path) / ".git")
    except OSError:
        pass
    return found


def _git_denial(relative: PurePosixPath) -> str | None:
    """The refusal for a path inside a root that crosses a git folder, or None."""
    for part in relative.parts:
        if is_git_name(part):
            if part == ".git":
                return _GIT_REFUSAL
            return f"{quoted(part)} is a name git reads as .git; {_GIT_REFUSAL}"
    return None


def _prefix_matches(parts: Sequence[str], pattern: str, *, absolute: bool) -> bool:
    """Whether the path, or a folder above it, matches the glob.

    A rule that names a folder also covers everything inside it.
    """
    for end in range(1, len(parts) + 1):
        head = parts[:end]
        text = ("/" + "/".join(head[1:])) if absolute else "/".join(head)
        if fnmatchcase(text, pattern):
            return True
    return False
