"""A mail server of our own on 127.0.0.1: Dovecot, for the demo and the tests.

Debian's Dovecot runs with a configuration written here: a free loopback
port, users in a passwd-file, maildirs in a temporary folder, no TLS (it
never leaves the machine). `deliver` puts a mail in a user's inbox with
dovecot-lda, as a mail server does when it accepts one. The server runs in
its own process group so it can be killed whole (`kill`) and started again
on the same port and mail.

The folder is made directly in the system's temporary folder, not inside a
private one: Dovecot's own processes run as unprivileged users and must be
able to reach the passwd file and the maildirs. As root, the maildirs
belong to `nobody` (Dovecot refuses uid 0 for mail).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Where distributions put the programs: the master on PATH or in sbin, the
# delivery agent among Dovecot's private programs.
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")
_LDA = ("/usr/lib/dovecot/dovecot-lda", "/usr/libexec/dovecot/dovecot-lda",
        "/usr/local/libexec/dovecot/dovecot-lda")
START_TIMEOUT = 30.0  # seconds for Dovecot to accept connections


@dataclass(frozen=True, slots=True)
class Programs:
    """The two Dovecot programs a local server needs."""

    dovecot: str
    lda: str


def find_programs() -> Programs | str:
    """Dovecot's programs, or why they cannot be used here (a sentence)."""
    search = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
    dovecot = shutil.which("dovecot", path=search)
    if dovecot is None:
        return ("Dovecot is not installed (on Debian or Ubuntu: "
                "apt install dovecot-imapd)")
    lda = next((p for p in _LDA if os.access(p, os.X_OK)), None) or shutil.which(
        "dovecot-lda", path=search)
    if lda is None:
        return f"Dovecot is installed ({dovecot}) but its dovecot-lda was not found"
    return Programs(dovecot, lda)


def free_port() -> int:
    """A loopback port nobody listens on now (the system's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mail_owner() -> tuple[int, int, str, str]:
    """uid and gid for the maildirs, and the users Dovecot's own processes run as."""
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        return nobody.pw_uid, nobody.pw_gid, "dovecot", "dovenull"
    me = pwd.getpwuid(os.geteuid())
    return me.pw_uid, me.pw_gid, me.pw_name, me.pw_name


_CONFIG = """\
base_dir = {root}/run
state_dir = {root}/state
instance_name = noema-{port}
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
default_internal_user = {internal}
default_internal_group = {internal}
default_login_user = {login}
first_valid_uid = 1
mail_location = maildir:~/Maildir
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {root}/passwd
  default_fields = uid={uid} gid={gid}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service stats {{
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
"""


@dataclass
class LocalDovecot:
    """A Dovecot instance of our own, listening on 127.0.0.1:`port`."""

    root: Path
    port: int
    programs: Programs
    process: subprocess.Popen | None = None

    @classmethod
    def create(cls, users: Iterable[str], password: str, *, extra: str = "") -> LocalDovecot:
        """A new instance (not started) whose users all have `password`. Users are
        written now: Dovecot reads its passwd file before the first login, and a
        failed login makes it slow down every later one from the same address.
        `extra` is appended to the configuration."""
        programs = find_programs()
        if isinstance(programs, str):
            raise RuntimeError(programs)
        root = Path(tempfile.mkdtemp(prefix="noema-dovecot-"))
        root.chmod(0o755)  # Dovecot's unprivileged processes read the passwd file
        uid, gid, internal, login = _mail_owner()
        for sub in ("run", "state", "home"):
            (root / sub).mkdir(mode=0o755)
            (root / sub).chmod(0o755)  # whatever the umask (Noema's own is 077)
        os.chown(root / "home", uid, gid)
        (root / "passwd").write_text("".join(
            f"{user}:{{PLAIN}}{password}::::{root}/home/{user}\n" for user in users))
        port = free_port()
        (root / "dovecot.conf").write_text(_CONFIG.format(
            root=root, port=port, uid=uid, gid=gid, internal=internal, login=login) + extra)
        for name in ("passwd", "dovecot.conf"):
            (root / name).chmod(0o644)
        return cls(root, port, programs)

    @property
    def config(self) -> Path:
        return self.root / "dovecot.conf"

    def start(self) -> None:
        """Start the server and wait until it greets a client."""
        self.process = subprocess.Popen(
            [self.programs.dovecot, "-F", "-c", str(self.config)], start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, umask=0o022)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                error = self.process.stderr.read().decode(errors="replace")
                self.process = None
                raise RuntimeError(f"dovecot exited: {error}{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(100).startswith(b"* OK"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"dovecot did not start listening: {self.log()}")

    def kill(self) -> None:
        """kill -9 every process of the server; the mail on disk stays."""
        if self.process is None:
            return
        master = self.process.pid
        # Frozen first, so that it forks no new child while they are killed.
        # Its children (imap, imap-login, auth, anvil) leave its process group
        # but not its session; once the master is dead they are no longer its
        # descendants, so what is left is found by the session.
        os.kill(master, signal.SIGSTOP)
        for pid in [*_descendants(master), master]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None
        deadline = time.monotonic() + 10
        while (left := _in_session(master)) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        # Its children may outlive the master by a moment.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
            except OSError:
                return
            time.sleep(0.02)

    def stop(self) -> None:
        """Kill the server and remove its folder, mail included."""
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        """The end of Dovecot's own log."""
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def users(self) -> set[str]:
        return {line.split(":", 1)[0] for line in (self.root / "passwd").read_text().splitlines()
                if line}

    def deliver(self, user: str, raw: bytes, sender: str = "sender@outside.test") -> None:
        """Put a mail in `user`'s inbox with dovecot-lda, as a mail server does."""
        done = subprocess.run([self.programs.lda, "-c", str(self.config), "-d", user,
                               "-f", sender], input=raw, capture_output=True, timeout=30,
                              umask=0o022)
        if done.returncode != 0:
            raise RuntimeError(f"dovecot-lda failed ({done.returncode}): "
                               f"{done.stderr.decode(errors='replace')}")


def _in_session(session: int) -> list[int]:
    """The live processes of session `session`, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _descendants(root: int) -> list[int]:
    """The processes below `root`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
