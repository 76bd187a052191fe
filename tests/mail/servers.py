"""A real mail system on 127.0.0.1 for the tests and the benchmark.

- `Dovecot`: the product's `LocalDovecot` (Debian's Dovecot with a
  configuration of its own, killable whole and restartable on the same port
  and mail) with a pool of users written before it starts.
- `SmtpRelay`: aiosmtpd on a free port; each recipient whose local part is
  a Dovecot user gets the mail delivered with dovecot-lda, as a mail
  server would; every envelope is recorded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from aiosmtpd.controller import Controller

from noema.channels.mail.local_server import LocalDovecot, find_programs, free_port

PASSWORD = "secret"
MAIL_DOMAIN = "noema.test"
PREFIXES = ("agent", "ana")
POOL = 300  # users of each kind

__all__ = ["MAIL_DOMAIN", "PASSWORD", "Dovecot", "SmtpRelay", "available", "free_port"]


def available() -> str | None:
    """Why Dovecot cannot run here, or None."""
    found = find_programs()
    if isinstance(found, str):
        return f"{found}; scripts/setup --tests installs it"
    return None


@dataclass
class Dovecot(LocalDovecot):
    """The tests' Dovecot: `new_user` hands out users no test has used."""

    _taken: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def create(cls, extra: str = "") -> Dovecot:  # type: ignore[override]
        """A new instance (not started); `extra` is appended to its configuration.

        Users are written before Dovecot starts: one added later is not seen
        by the first login, and the failure makes Dovecot delay every later
        login from 127.0.0.1 by seconds (its auth penalty)."""
        users = [f"{prefix}{n}" for prefix in PREFIXES for n in range(1, POOL + 1)]
        made = super().create(users, PASSWORD, extra=extra)
        assert isinstance(made, Dovecot)
        return made

    def new_user(self, prefix: str = "agent") -> str:
        """A mail user no test has used (its login and address local part)."""
        if prefix not in PREFIXES:
            raise ValueError(f"users are named {PREFIXES}, not {prefix!r}")
        with self._lock:
            number = self._taken[prefix] = self._taken.get(prefix, 0) + 1
        if number > POOL:
            raise RuntimeError(f"all {POOL} {prefix} users are taken")
        return f"{prefix}{number}"


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
