"""Which paths the agent may read or write.

A path is resolved before it is judged: `~`, relative paths (against the
workspace), `..`, and every symbolic link, including those in the parents
of a file that does not exist yet (`/proc/self/root`, `/proc/self/fd/N` are
symbolic links too). The resolved path must lie in a configured root, must
not cross a `.git` folder or the agent's own data, and must match no deny
glob. Resolving only narrows the question: the file operations in
`fsafe.py` re-check on open so that a link swapped in after the check
cannot redirect them.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from ..paths import AgentPaths
from ..tools.registry import ToolError
from .settings import FilesSettings


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
    return path == folder or path.is_relative_to(folder)


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
        self.protected = tuple(real(p) for p in protected)
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
            raise AccessDenied("a path cannot contain a NUL character")
        text = raw.strip()
        if not text:
            raise AccessDenied("the path is empty; " + self.summary())
        expanded = Path(os.path.expanduser(text))
        if not expanded.is_absolute():
            expanded = self.workspace.path / expanded
        return Path(os.path.normpath(expanded)), Path(os.path.realpath(expanded))

    def check(self, raw: str, access: Access) -> Target:
        """Accept `raw` for `access` or raise AccessDenied saying why and what is allowed."""
        lexical, resolved = self.resolve(raw)
        reason = self.denial(resolved, access, lexical)
        if reason:
            shown = raw if str(resolved) == raw else f"{raw!r} (resolves to {resolved})"
            raise AccessDenied(f"{shown}: {reason}. {self.summary()}")
        root = self.root_of(resolved)
        assert root is not None  # denial() returned None, so a root holds it
        return Target(raw, resolved, root)

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
        relative = PurePosixPath(resolved.relative_to(root.path).as_posix())
        if ".git" in relative.parts:
            return "git folders are never read or written by the tools"
        candidates = [(relative, resolved)]
        if lexical is not None and lexical != resolved:
            lex_root = self.root_of(lexical)
            if lex_root is not None:
                lex_rel = PurePosixPath(lexical.relative_to(lex_root.path).as_posix())
                if ".git" in lex_rel.parts:
                    return "git folders are never read or written by the tools"
                candidates.append((lex_rel, lexical))
        for rel, absolute in candidates:
            glob = self._matching_glob(rel, absolute)
            if glob:
                return f"it matches the deny rule {glob!r} (secrets and private files)"
        if access is Access.WRITE and not root.writable:
            return f"{root.path} is read-only"
        return None

    def _matching_glob(self, relative: PurePosixPath, absolute: Path) -> str | None:
        for glob in self.deny:
            if glob.startswith(("/", "~")):
                pattern = os.path.expanduser(glob)
                if _prefix_matches(PurePosixPath(absolute).parts, pattern, absolute=True):
                    return glob
            elif "/" in glob:
                if _prefix_matches(relative.parts, glob.strip("/"), absolute=False):
                    return glob
            elif any(fnmatchcase(part, glob) for part in relative.parts):
                return glob
        return None

    def summary(self) -> str:
        """What the agent may use, for refusals and tool descriptions."""
        roots = "; ".join(
            f"{r.path} ({'read-write' if r.writable else 'read-only'}"
            + ("; the workspace, where relative paths start)" if r is self.workspace else ")")
            for r in self.roots
        )
        deny = ", ".join(self.deny) if self.deny else "nothing else"
        return (
            f"You may use: {roots}. Always refused inside them: .git folders, the agent's "
            f"own data, and names matching {deny}."
        )

    def display(self, target: Target | Path) -> str:
        """A path as the model should write it back: relative inside the workspace."""
        path = target.path if isinstance(target, Target) else target
        if _within(path, self.workspace.path) and self.root_of(path) is self.workspace:
            rel = path.relative_to(self.workspace.path).as_posix()
            return rel or "."
        return str(path)


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
