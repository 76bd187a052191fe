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
import re
import stat
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path, PurePosixPath

from ..paths import AgentPaths, noema_home
from ..tools.errors import ToolError, quoted, shorten
from .gitreads import (
    Includes,
    Repositories,
    looks_like_repository,
    person_git_configs,
    repository_configs,
    repository_names,
)
from .identity import FileId, of_path
from .settings import FilesSettings

_DENY_RULE = "it matches the deny rule"
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


class Identities:
    """Files and folders refused wherever they go, by identity: those a deny
    rule covered, and agents' data. What one policy learns, every part of
    the process honours (the file tools, the shell's masks and open guard,
    the history's recorder), since a secret stays one under any name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._agents: dict[tuple[int, int], FileId] = {}
        self._denied: dict[tuple[int, int], FileId] = {}

    def remember(self, found: FileId, *, agents: bool = False) -> None:
        with self._lock:
            (self._agents if agents else self._denied)[found.numbers] = found

    def has_agents(self, dev: int, ino: int) -> bool:
        with self._lock:
            return (dev, ino) in self._agents

    def may_be(self, dev: int, ino: int) -> bool:
        """Whether `reason` could refuse this inode (a cheap first look)."""
        with self._lock:
            return (dev, ino) in self._agents or (dev, ino) in self._denied

    def reason(self, found: FileId) -> str | None:
        """Why `found` is refused wherever it lies now and whatever its name, or None."""
        with self._lock:
            agents = self._agents.get(found.numbers)
            denied = self._denied.get(found.numbers)
        if agents is not None and agents.same(found):
            return "it is agents' data (maybe moved or renamed), which the tools never touch"
        if denied is not None and denied.same(found):
            return (
                "a deny rule covered it before it was moved, renamed or given another name "
                "(secrets and private files)"
            )
        return None

    def reason_at(self, dirfd: int, name: str, info: os.stat_result) -> str | None:
        """`reason` for `name` in the open folder `dirfd`, whose status is `info`."""
        if not self.may_be(info.st_dev, info.st_ino):
            return None
        try:
            return self.reason(of_path(name, dirfd))
        except OSError:
            return None


# What this process has learnt: shared by every policy it builds.
KNOWN = Identities()


class AccessPolicy:
    """Decides on paths; holds no open files and changes nothing on disk."""

    def __init__(
        self,
        roots: Sequence[Root],
        deny: Iterable[str] = (),
        protected: Iterable[Path] = (),
        *,
        allow_hard_links: bool = False,
        identities: Identities | None = None,
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
        self.protected = tuple(dict.fromkeys(real(p) for p in protected))
        # The person's choice for files with several hard links (`fsafe.unsafe_file`),
        # which the shell's open guard follows as the file tools do.
        self.allow_hard_links = allow_hard_links
        # Hard links the sandbox's commands made, by the identity of the file
        # (`open_guard.Secrets.links`): names inside what the sandbox shows.
        self.made_links: dict[FileId, int] = {}
        self._includes = Includes()
        self._repositories = Repositories([r.path for r in self.roots], self.protected)
        # Rules name paths, but a rename moves what they cover: the folders
        # and files they covered are also known by identity (`identity.py`:
        # numbers and the file system's handle, which a rename or a new link
        # keeps and a reused inode number does not), so that a secret renamed
        # out from under its rule, or given another name, stays refused.
        self._known = KNOWN if identities is None else identities
        self._ids_lock = threading.Lock()
        # Folders judged for an agent's layout, by their state (see `_agent_home`).
        self._homes: dict[tuple[int, int, int, int], bool] = {}
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
        every_agent = noema_home() / AGENTS_FOLDER
        protected = (paths.agents_dir, every_agent) if _outside(every_agent, roots) else (
            paths.agents_dir,
        )
        return cls(roots, files.deny, protected, allow_hard_links=files.allow_hard_links)

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
        if reason and reason.startswith(_DENY_RULE) and (
            lexical == resolved or (self.denial(resolved, Access.READ) or "").startswith(_DENY_RULE)
        ):
            # Known by identity from now on: renamed later, it stays refused.
            # (Only when the file itself is covered: a link under a secret's
            # name must not make what it points to a secret.)
            self.remember_path(resolved)
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
                if not self._known.has_agents(info.st_dev, info.st_ino):
                    self.remember_denied(of_path(folder), agents=True)

    def remember_denied(self, found: FileId, *, agents: bool = False) -> None:
        """A file or folder a deny rule covers, or with `agents` a folder of
        Noema agents' data, by identity (see `moved_denial`)."""
        self._known.remember(found, agents=agents)

    def may_be_denied(self, dev: int, ino: int) -> bool:
        """Whether `denied_identity` could refuse this inode (a cheap first look)."""
        return self._known.may_be(dev, ino)

    def denied_identity(self, found: FileId) -> str | None:
        """Why the file or folder `found` is refused wherever it lies now and
        whatever its name (a rename, another hard link), or None."""
        return self._known.reason(found)

    def denied_at(self, path: Path | str, info: os.stat_result | None = None) -> str | None:
        """`denied_identity` of what `path` names now (links not followed), or None
        when nothing is known of its numbers or it is gone."""
        try:
            info = os.lstat(path) if info is None else info
            if not self.may_be_denied(info.st_dev, info.st_ino):
                return None
            return self.denied_identity(of_path(path))
        except OSError:
            return None

    def remember_path(self, path: Path | str) -> None:
        """Remember what `path` names now as covered by a deny rule (nothing when it is gone)."""
        with contextlib.suppress(OSError):
            self.remember_denied(of_path(path))

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
            reason = self.denied_at(folder, info)
            if reason:
                return reason
            if part is not None and (
                (part == AGENTS_FOLDER and holds_agents(folder)) or self._agent_home(folder, info)
            ):
                return (
                    "it is the data of a Noema agent (maybe another person's), which the "
                    "tools never touch"
                )
        return None

    def _agent_home(self, folder: Path, info: os.stat_result) -> bool:
        """`is_agent_home`, remembered by the folder's state: a marker made or
        removed in it changes its modification time."""
        if not stat.S_ISDIR(info.st_mode):
            return False
        key = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
        with self._ids_lock:
            known = self._homes.get(key)
        if known is None:
            known = is_agent_home(folder)
            with self._ids_lock:
                if len(self._homes) > _MAX_HOMES_KEPT:
                    self._homes.clear()
                self._homes[key] = known
        if known:
            with contextlib.suppress(OSError):
                self.remember_denied(of_path(folder), agents=True)
        return known

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
                return f"{_DENY_RULE} {glob!r} (secrets and private files)"
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
# What an agent's folder holds (see paths.py), whatever its name: its
# conversation; its lock with its settings or its folders; or, set up but
# never run (`AgentPaths.ensure`, `noema setup`), its settings with the two
# folders every agent's folder is made with.
_CONVERSATION = "turns.db"
_LOCK = "agent.lock"
_AGENT_CONFIG = "config.toml"
_AGENT_FOLDERS = ("identity", "logs")
_MAX_HOMES_KEPT = 4096


def agent_layout(files: Iterable[str], folders: Iterable[str]) -> bool:
    """Whether a folder whose listing holds these files (every entry that is
    not a folder) and folders is the data of a Noema agent, any person's."""
    files, folders = set(files), set(folders)
    if _CONVERSATION in files:
        return True
    settings = _AGENT_CONFIG in files
    if _LOCK in files and (settings or _AGENT_FOLDERS[0] in folders):
        return True
    return settings and set(_AGENT_FOLDERS) <= folders


def is_agent_home(folder: Path | str) -> bool:
    """`agent_layout` of a folder on disk (links not followed); most folders
    cost three failed `lstat`s."""

    def kind(name: str) -> bool | None:  # True: a folder; False: anything else
        try:
            return stat.S_ISDIR(os.lstat(os.path.join(folder, name)).st_mode)
        except OSError:
            return None

    files = {n for n in (_CONVERSATION, _AGENT_CONFIG, _LOCK) if kind(n) is False}
    if not files:
        return False
    return agent_layout(files, (n for n in _AGENT_FOLDERS if kind(n)))


def _outside(folder: Path, roots: Sequence[Root]) -> bool:
    """Whether no root lies inside `folder` (a root there would be refused as agents' data)."""
    resolved = real(folder)
    return not any(_within(r.path, resolved) for r in roots)


def holds_agents(folder: Path | str) -> bool:
    """Whether `folder` (named `agents`) holds the data of Noema agents, any
    person's: a sub-folder laid out as an agent's (`is_agent_home`)."""
    try:
        with os.scandir(folder) as entries:
            for n, entry in enumerate(entries):
                if n >= _MAX_NEIGHBOURS:
                    break
                if entry.is_dir(follow_symlinks=False) and is_agent_home(entry.path):
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
