"""A real mail system on 127.0.0.1 for the tests and the benchmark.

- `Dovecot`: Debian's Dovecot with a configuration of its own (a free port,
  passwd-file users, maildirs in a temporary folder, no TLS on loopback),
  started in its own process group so it can be killed whole and started
  again on the same port and mail.
- `SmtpRelay`: aiosmtpd on a free port; each recipient whose local part is
  a Dovecot user gets the mail delivered with dovecot-lda, as a mail
  server would; every envelope is recorded.

Dovecot refuses uid 0 for mail, so as root the maildirs belong to `nobody`.
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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiosmtpd.controller import Controller

DOVECOT = "/usr/sbin/dovecot"
LDA = "/usr/lib/dovecot/dovecot-lda"
PASSWORD = "secret"
MAIL_DOMAIN = "noema.test"
PREFIXES = ("agent", "ana")
POOL = 300  # users of each kind


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def available() -> str | None:
    """Why Dovecot cannot run here, or None."""
    for program in (DOVECOT, LDA):
        if not os.access(program, os.X_OK):
            return f"{program} is not installed (scripts/setup --tests installs dovecot-imapd)"
    return None


def _mail_owner() -> tuple[int, int, str, str]:
    """uid, gid for the maildirs and the users Dovecot's own processes run as."""
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        return nobody.pw_uid, nobody.pw_gid, "dovecot", "dovenull"
    me = pwd.getpwuid(os.geteuid())
    return me.pw_uid, me.pw_gid, me.pw_name, me.pw_name


_CONFIG = """\
base_dir = {root}/run
state_dir = {root}/state
instance_name = noema-test-{port}
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
class Dovecot:
    """A Dovecot instance of the tests' own."""

    root: Path
    port: int
    process: subprocess.Popen | None = None
    _taken: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def create(cls, extra: str = "") -> Dovecot:
        """A new instance (not started); `extra` is appended to its configuration."""
        root = Path(tempfile.mkdtemp(prefix="noema-dovecot-"))
        root.chmod(0o755)  # Dovecot's unprivileged processes read the passwd file
        uid, gid, internal, login = _mail_owner()
        for sub in ("run", "state", "home"):
            (root / sub).mkdir()
        os.chown(root / "home", uid, gid)
        (root / "passwd").write_text("".join(
            f"{prefix}{n}:{{PLAIN}}{PASSWORD}::::{root}/home/{prefix}{n}\n"
            for prefix in PREFIXES for n in range(1, POOL + 1)))
        port = free_port()
        (root / "dovecot.conf").write_text(_CONFIG.format(
            root=root, port=port, uid=uid, gid=gid, internal=internal, login=login) + extra)
        return cls(root, port)

    @property
    def config(self) -> Path:
        return self.root / "dovecot.conf"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self.process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(self.config)], start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dovecot exited: {self.process.stderr.read().decode()}"
                                   f"{self.log()}")
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
        # Its children (imap, imap-login) may outlive the master by a moment.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
            except OSError:
                return
            time.sleep(0.02)

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def new_user(self, prefix: str = "agent") -> str:
        """A mail user no test has used (its login and address local part).

        Users are written before Dovecot starts: one added later is not seen
        by the first login, and the failure makes Dovecot delay every later
        login from 127.0.0.1 by seconds (its auth penalty)."""
        if prefix not in PREFIXES:
            raise ValueError(f"users are named {PREFIXES}, not {prefix!r}")
        with self._lock:
            number = self._taken[prefix] = self._taken.get(prefix, 0) + 1
        if number > POOL:
            raise RuntimeError(f"all {POOL} {prefix} users are taken")
        return f"{prefix}{number}"

    def users(self) -> set[str]:
        return {line.split(":", 1)[0] for line in (self.root / "passwd").read_text().splitlines()
                if line}

    def deliver(self, user: str, raw: bytes, sender: str = "sender@outside.test") -> None:
        """Deliver a mail with dovecot-lda, as a mail server does."""
        done = subprocess.run([LDA, "-c", str(self.config), "-d", user, "-f", sender],
                              input=raw, capture_output=True, timeout=30)
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


@dataclass(frozen=True, slots=True)
class Envelope:
    sender: str
    recipients: tuple[str, ...]
    data: bytes


class _Relay:
    def __init__(self, dovecot: Dovecot) -> None:
        self.dovecot = dovecot
        self.envelopes: list[Envelope] = []
        self.arrived = threading.Condition()

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 aiosmtpd's name
        data = envelope.original_content or envelope.content
        users = self.dovecot.users()
        for rcpt in envelope.rcpt_tos:
            local, _, domain = rcpt.lower().partition("@")
            if domain == MAIL_DOMAIN and local in users:
                self.dovecot.deliver(local, data, envelope.mail_from)
        with self.arrived:
            self.envelopes.append(Envelope(envelope.mail_from, tuple(envelope.rcpt_tos), data))
            self.arrived.notify_all()
        return "250 OK delivered"


class SmtpRelay:
    """aiosmtpd on 127.0.0.1 delivering into Dovecot."""

    def __init__(self, dovecot: Dovecot) -> None:
        self.port = free_port()
        self.relay = _Relay(dovecot)
        self.controller = Controller(self.relay, hostname="127.0.0.1", port=self.port)

    def start(self) -> None:
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()

    @property
    def envelopes(self) -> list[Envelope]:
        return list(self.relay.envelopes)

    def wait_for(self, predicate, timeout: float) -> list[Envelope]:
        """Block until `predicate(envelopes)` holds (run it in a thread from async code)."""
        with self.relay.arrived:
            if not self.relay.arrived.wait_for(lambda: predicate(self.relay.envelopes), timeout):
                raise AssertionError(f"no such mail within {timeout} s: {self.relay.envelopes}")
            return list(self.relay.envelopes)
