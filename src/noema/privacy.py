"""The agent's data is the person's alone; the person's files keep their usual modes.

The `noema` command starts by setting the umask to 077, so every file and
folder the agent makes for itself (databases with their `-wal` and `-shm`
files, the versions repositories, logs, the configuration) can be read by
no other account. The stores also create their files 0600 themselves, so
that holds when Noema is used as a library under a looser umask; SQLite
gives a database's `-wal` and `-shm` files the mode of the database.

What the agent writes into the person's own folders is the person's, not
the agent's: a new file or folder there gets the mode the person's own
umask (the one the process started with) would give, an existing file keeps
its mode, and commands and tool servers start with the person's umask.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

PRIVATE_UMASK = 0o077
PRIVATE_FILE_MODE = 0o600

_lock = threading.Lock()
_person_umask: int | None = None


def go_private() -> int:
    """Set the process umask to 077, remembering the person's; returns the
    person's. Calling it again changes nothing."""
    global _person_umask
    with _lock:
        before = os.umask(PRIVATE_UMASK)
        if _person_umask is None:
            _person_umask = before
        return _person_umask


def person_umask() -> int:
    """The umask the person runs with: the one the process had before
    `go_private`, or the current one when it never ran."""
    with _lock:
        if _person_umask is not None:
            return _person_umask
        current = os.umask(0o022)  # reading the umask means setting it
        os.umask(current)
        return current


def with_person_umask(argv: Sequence[str]) -> list[str]:
    """`argv` run under the person's umask (through `/bin/sh`, which sets it and
    then becomes the program), so what a command or tool server writes in the
    person's folders has the person's usual modes. Unchanged when the process
    already runs with the person's umask."""
    mask = person_umask()
    current = os.umask(mask)
    os.umask(current)
    if current == mask:
        return list(argv)
    return ["/bin/sh", "-c", f'umask {mask:04o} && exec "$0" "$@"', *argv]


def shell_with_person_umask(command: str) -> str:
    """A `sh -c` command line that first sets the person's umask (unchanged when
    the process already runs with it). On the command's own first line, so
    the shell's messages keep their line numbers."""
    mask = person_umask()
    current = os.umask(mask)
    os.umask(current)
    return command if current == mask else f"umask {mask:04o}; {command}"


def workspace_file_mode() -> int:
    """The mode of a new file in the person's folders."""
    return 0o666 & ~person_umask()


def workspace_folder_mode() -> int:
    """The mode of a new folder in the person's folders."""
    return 0o777 & ~person_umask()


def private_file(path: Path | str) -> None:
    """Create `path` empty with mode 0600 if it does not exist yet (an empty
    file is a new database to SQLite); an existing file is left as it is."""
    if str(path) == ":memory:" or str(path).startswith("file:"):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                     PRIVATE_FILE_MODE)
    except OSError:
        return  # there already, or not makeable: SQLite's own open says why
    os.close(fd)
