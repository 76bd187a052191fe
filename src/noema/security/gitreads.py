"""What the person's git reads as its own: the one description the file
tools (`policy.py`), the shell's masks and the git check after a command
(`gitguard.py`) share.

Git takes a folder for a repository when it holds a `HEAD` with `objects/`
and `refs/` (or a `commondir` naming where those are), and runs what that
folder's `config` and `hooks/` say. Every git command also reads the
person's global configuration and every file a configuration includes
(`include.path`, `includeIf.*.path`), whatever the condition.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

_GIT_TIMEOUT_S = 10
_MAX_CONFIG_BYTES = 1 << 20
_CONFIG_NAMES = ("config", "config.worktree")
_REPOSITORY_NAMES = ("HEAD", "commondir", "objects", "refs")


def looks_like_repository(names: set[str] | frozenset[str]) -> bool:
    """Whether git would take a folder with these entries for a repository
    (its `is_git_directory`: a HEAD, and objects/ and refs/ here or in the
    folder that `commondir` names)."""
    return "HEAD" in names and ("commondir" in names or {"objects", "refs"} <= names)


def global_git_configs() -> tuple[Path, ...]:
    """The person's own git configuration files (read by every git command)."""
    home = Path(os.path.expanduser("~"))
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    return (home / ".gitconfig", Path(xdg) / "git" / "config")


def repository_names(folder: Path) -> set[str]:
    """Which of the names git looks for in a repository `folder` holds."""
    return {name for name in _REPOSITORY_NAMES if os.path.lexists(folder / name)}


def read_config(data: bytes) -> list[tuple[str, str | None]] | None:
    """The variables of a configuration file as the person's git reads them,
    in order; None when git is missing or cannot parse the file."""
    git = shutil.which("git")
    if git is None:
        return None
    with tempfile.TemporaryDirectory(prefix="noema-gitguard-") as scratch:
        copy = Path(scratch) / "config"
        copy.write_bytes(data)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": scratch,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "LC_ALL": "C",
        }
        try:
            done = subprocess.run(
                [git, "config", "--file", str(copy), "--no-includes", "--list", "-z"],
                cwd=scratch,
                env=env,
                capture_output=True,
                timeout=_GIT_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
    if done.returncode != 0:
        return None
    entries: list[tuple[str, str | None]] = []
    for record in done.stdout.split(b"\0"):
        if not record:
            continue
        key, newline, value = record.decode("utf-8", "surrogateescape").partition("\n")
        entries.append((key, value if newline else None))
    return entries


class Includes:
    """The files configuration files include, read with git's parser and
    remembered per file state, so that an unchanged configuration is not
    parsed again."""

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[tuple[int, int, int, int], tuple[Path, ...]]] = {}
        self._lock = threading.Lock()

    def of(self, config: Path) -> tuple[Path, ...]:
        """The paths `config` includes, as it names them (made absolute)."""
        try:
            info = os.stat(config)
        except OSError:
            return ()
        signature = (info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size)
        with self._lock:
            cached = self._seen.get(config)
        if cached is not None and cached[0] == signature:
            return cached[1]
        try:
            with open(config, "rb") as handle:
                data = handle.read(_MAX_CONFIG_BYTES + 1)
        except OSError:
            return ()
        entries = read_config(data) if len(data) <= _MAX_CONFIG_BYTES else None
        targets = []
        for key, value in entries or ():
            lowered = key.lower()
            is_include = lowered == "include.path" or (
                lowered.startswith("includeif.") and lowered.endswith(".path")
            )
            if is_include and value:
                named = Path(os.path.expanduser(value))
                targets.append(Path(os.path.normpath(config.parent / named)))
        with self._lock:
            self._seen[config] = (signature, tuple(targets))
        return tuple(targets)

    def below(self, configs: list[Path], limit: int = 200) -> set[Path]:
        """Every file the `configs` include, followed a few levels deep, each
        as named and as it resolves."""
        found: set[Path] = set()
        seen: set[Path] = set()
        queue = list(configs)
        while queue and len(seen) < limit:
            config = queue.pop()
            if config in seen:
                continue
            seen.add(config)
            for target in self.of(config):
                real = Path(os.path.realpath(target))
                found |= {target, real}
                queue.append(real)
        return found


def repository_configs(gitdir: Path) -> list[Path]:
    """The configuration files of a git folder."""
    return [gitdir / name for name in _CONFIG_NAMES]
