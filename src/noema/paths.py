"""Where an agent keeps its data on disk.

Every agent has its own folder under the Noema home (`$NOEMA_HOME`, by
default `~/.noema`): `~/.noema/agents/<name>/`. Nothing of one agent is
shared with another.
"""

from __future__ import annotations

import fcntl
import os
import re
from dataclasses import dataclass
from pathlib import Path

DEFAULT_AGENT = "default"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def noema_home() -> Path:
    """The folder that holds every agent's data."""
    return Path(os.environ.get("NOEMA_HOME") or Path.home() / ".noema").expanduser()


@dataclass(frozen=True, slots=True)
class AgentPaths:
    """The files and folders of one agent."""

    name: str
    root: Path

    @classmethod
    def for_agent(cls, name: str = DEFAULT_AGENT, home: Path | None = None) -> AgentPaths:
        if not _NAME.match(name):
            raise ValueError(
                f"agent name {name!r} is not usable: use letters, digits, '.', '_' or '-'"
                " (at most 64 characters, starting with a letter or digit)"
            )
        return cls(name, (home or noema_home()) / "agents" / name)

    @property
    def agents_dir(self) -> Path:
        """The folder of every agent on this machine (all of it private to each);
        the agent's own folder when it does not live in the usual layout."""
        return self.root.parent if self.root.parent.name == "agents" else self.root

    @property
    def config_file(self) -> Path:
        return self.root / "config.toml"

    @property
    def secrets_file(self) -> Path:
        return self.root / "secrets.toml"

    @property
    def turns_db(self) -> Path:
        return self.root / "turns.db"

    @property
    def archive_db(self) -> Path:
        """The sensory archive (raw events)."""
        return self.root / "archive.db"

    @property
    def schedules_db(self) -> Path:
        """Alarms and recurring schedules."""
        return self.root / "schedules.db"

    @property
    def mail_db(self) -> Path:
        """The mail channel's record: mails taken, the outbox, known addresses."""
        return self.root / "mail.db"

    @property
    def telegram_db(self) -> Path:
        """The Telegram channel's record: the update offset, the outbox."""
        return self.root / "telegram.db"

    @property
    def approvals_db(self) -> Path:
        """Questions asked while the person was away, and their outcomes."""
        return self.root / "approvals.db"

    @property
    def file_marks_db(self) -> Path:
        """Which file contents hold outside words (kept here, where no command reaches)."""
        return self.root / "file_marks.db"

    @property
    def docs_db(self) -> Path:
        """The document library's index (rebuilt from the files when lost)."""
        return self.root / "docs.db"

    @property
    def versions_dir(self) -> Path:
        """Git repositories that version the workspaces."""
        return self.root / "versions"

    @property
    def identity_dir(self) -> Path:
        """identity.md, environ/*.md and skills/*.md written by the person."""
        return self.root / "identity"

    @property
    def lock_file(self) -> Path:
        """Held by the one process that runs this agent."""
        return self.root / "agent.lock"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    def blocked_by(self) -> Path | None:
        """A file standing where the agent's folder or one of its parents must
        be (a `--home` that is a file), or None."""
        for folder in (self.root, *self.root.parents):
            try:
                if folder.exists():
                    return None if folder.is_dir() else folder
            except OSError:  # a folder we may not look into: opening says why
                return None
        return None

    def misplaced(self) -> MisplacedPath | None:
        """A file standing where the agent keeps a folder (its logs, its identity
        notes), or a folder where it keeps a file (its lock), or None."""
        for folder in (self.root, self.identity_dir, self.logs_dir):
            if folder.exists() and not folder.is_dir():
                return MisplacedPath(folder, wanted="folder")
        if self.lock_file.is_dir():
            return MisplacedPath(self.lock_file, wanted="file")
        return None

    def ensure(self) -> AgentPaths:
        """Create the folder tree (private to the user) if missing.

        Raises `MisplacedPath` when something of the wrong kind stands where
        one of the agent's folders goes."""
        if self.agents_dir != self.root:  # made here, not as a parent with the umask's mode
            self.agents_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for folder in (self.root, self.identity_dir, self.logs_dir):
            try:
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            except FileExistsError:  # exist_ok forgives only a folder
                raise MisplacedPath(folder, wanted="folder") from None
        return self


class MisplacedPath(Exception):
    """A file where the agent needs one of its folders, or a folder where it
    needs one of its files: the message names the path and the way out."""

    def __init__(self, path: Path, wanted: str) -> None:
        self.path = path
        if wanted == "folder":
            found, fix = "a file", (f"Move that file aside (for example `mv {path} {path}.old`)"
                                    ", and the agent makes the folder when it starts.")
        else:
            found, fix = "a folder", (f"Move that folder aside (for example `mv {path} "
                                      f"{path}.old`, or `rmdir {path}` if it is empty), and the "
                                      "agent makes the file when it starts.")
        super().__init__(f"{path} is {found}, but the agent needs a {wanted} there. {fix}")


class AgentBusy(Exception):
    """Another process is running this agent."""


class AgentLock:
    """An exclusive lock on an agent: two processes must never drive one session.

    The kernel releases it when the process dies, even by `kill -9`, so a
    crash never leaves a stale lock behind.
    """

    def __init__(self, paths: AgentPaths) -> None:
        paths.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        # A raw descriptor, unbuffered: on a full disk nothing waits to be
        # flushed, so neither writing the note nor releasing the lock can fail.
        try:
            self._fd: int | None = os.open(paths.lock_file,
                                           os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except IsADirectoryError:
            raise MisplacedPath(paths.lock_file, wanted="file") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 200, 0).decode("utf-8", "replace").strip()
            self.release()
            raise AgentBusy(
                f"agent {paths.name!r} is already running ({holder or 'another process'}). "
                "Stop that one first, or pick another agent with --agent NAME."
            ) from None
        try:  # who holds the lock, for the message another process shows
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, f"pid {os.getpid()}".encode(), 0)
        except OSError:
            pass  # a full disk: the lock holds all the same, only the note is missing

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing releases the lock
