"""Git configuration as a sandboxed command may read it: without credentials.

People put tokens where git will send them: in a remote's URL
(`https://user:token@host/repo`, `https://token@host`; over ssh only a
password is one), in an `insteadOf` rewrite of the global configuration, in
an extra header (`http.extraHeader = Authorization: Basic ...`, what CI
checkouts leave behind), or under keys such as `smtpPass`. A command needs
the configuration (git runs in the sandbox) but not those values, so the
open guard serves it a copy of any git configuration file that holds one,
with each value replaced by `***`; the file itself is not changed, and an
open that would write it is refused. (A command that rewrites such a file
with git, which writes back what it read, puts `***` in it: only a file it
may write, so one it made; the person's repositories and configuration are
read-only in the sandbox.)
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from .policy import is_git_name

HIDDEN = b"***"

# The user part of a URL (anything up to an '@' before the host), in any scheme.
_USERINFO = re.compile(rb"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/?#@\s\"']+)@")

# A `key = value` line whose key names a credential (case does not matter
# to git's keys).
_SECRET_KEY = re.compile(
    rb"^(?P<head>\s*(?P<key>[A-Za-z][A-Za-z0-9-]*)\s*=\s*)(?P<value>.*?)(?P<tail>\r?)$",
    re.MULTILINE,
)
_SECRET_WORDS = re.compile(
    rb"pass|token|secret|extraheader|authorization|credential|apikey|api-key|cookie",
    re.IGNORECASE,
)
# Keys that name a program or a setting, not a secret (`core.askPass`,
# `credential.helper`): hide nothing there.
_PLAIN_KEYS = {b"helper", b"usehttppath", b"username", b"cookiefile", b"askpass",
               b"passthrough"}

_CONFIG_NAMES = {"config", "config.worktree"}
_ENDINGS = ("config", "config.worktree", ".gitconfig")


def is_git_config(path: str) -> bool:
    """Whether git reads `path` as a configuration file: a repository's
    (`config` or `config.worktree` in a git folder at any depth, or in a bare
    repository named `*.git`), the person's (`.gitconfig`, `git/config`)."""
    if not path.endswith(_ENDINGS):  # the guard asks at every open: the cheap look first
        return False
    parts = PurePosixPath(path).parts
    if not parts:
        return False
    name = parts[-1]
    if name == ".gitconfig":
        return True
    if name not in _CONFIG_NAMES or len(parts) < 2:
        return False
    folder = parts[-2]
    return folder == "git" or folder.endswith(".git") or any(is_git_name(p) for p in parts[:-1])


def redacted(data: bytes) -> bytes | None:
    """`data` with every credential replaced by `***`, or None when it holds none."""

    def user(match: re.Match[bytes]) -> bytes:
        scheme = match.group("scheme").lower()
        if not scheme.startswith((b"http", b"ftp")) and b":" not in match.group("user"):
            return match.group(0)  # `ssh://git@host`: a user's name, no password
        return match.group("scheme") + HIDDEN + b"@"

    def value(match: re.Match[bytes]) -> bytes:
        key = match.group("key").lower()
        if key in _PLAIN_KEYS or not _SECRET_WORDS.search(key) or not match.group("value"):
            return match.group(0)
        return match.group("head") + HIDDEN + match.group("tail")

    shown = _USERINFO.sub(user, data)
    shown = _SECRET_KEY.sub(value, shown)
    return None if shown == data else shown
