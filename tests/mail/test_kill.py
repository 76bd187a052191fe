"""`kill -9` of a real `noema run` while it handles mail: every mail of the
person becomes one message, and every answer is composed once and reaches
the person.

The agent runs as the command people run, over the session's Dovecot, with a
scripted model and an SMTP server of this test's own that can hold a
transaction, so the kills land where they matter:

- *intake*: mails arrive and the process dies as the first is taken, with
  the others on their way in;
- *thinking*: the person's mail is stored and its answer streams;
- *sending, not accepted*: the server holds the answer's DATA and has not
  committed it; the dead client's transaction is dropped;
- *sending, accepted*: the server has committed the answer but the client
  dies before hearing so. SMTP cannot tell the client this happened (the
  server's "250" never arrived), so the next start sends the answer again:
  the very same message, byte for byte and with the same Message-ID, which
  mail clients show once. Everywhere else each answer travels exactly once.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import imaplib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller

from noema.channels.replies import answered_pairs
from noema.memory.store import TurnStore
from noema.memory.turns import TurnKind

from .conftest import mail
from .servers import MAIL_DOMAIN, PASSWORD, Dovecot, free_port

NOEMA = [sys.executable, "-m", "noema"]
WAIT = 90.0  # seconds for one step: a start of the agent takes seconds on a loaded machine
POLL = 0.005
ANSWER = " ".join(["Noted,", "I", "will", "look", "into", "it", "and", "write", "back",
                   "when", "it", "is", "done."])
TOKEN_DELAY = 0.03  # seconds per word: an answer streams for about 0.4 s, a target for a kill
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


# -- an SMTP server that can hold a transaction ------------------------------------------


@dataclass(frozen=True, slots=True)
class Received:
    """One envelope the server accepted (committed and delivered)."""

    recipients: tuple[str, ...]
    data: bytes

    @property
    def message(self) -> email.message.EmailMessage:
        return email.message_from_bytes(self.data, policy=email.policy.default)


@dataclass
class GatedRelay:
    """aiosmtpd delivering into Dovecot with dovecot-lda, as `servers.SmtpRelay`,
    but able to hold the next DATA before or after committing it."""

    dovecot: Dovecot
    port: int = field(default_factory=free_port)
    received: list[Received] = field(default_factory=list)
    hold: str | None = None  # "before" or "after": the next DATA waits there
    holding: threading.Event = field(default_factory=threading.Event)
    committed_unconfirmed: list[bytes] = field(default_factory=list)  # held after commit
    _release: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 aiosmtpd's name
        data = envelope.original_content or envelope.content
        hold, self.hold = self.hold, None
        if hold == "before":
            await self._held()  # a client killed here aborts the transaction: nothing kept
        for rcpt in envelope.rcpt_tos:
            local, _, domain = rcpt.lower().partition("@")
            if domain == MAIL_DOMAIN:
                await asyncio.to_thread(self.dovecot.deliver, local, data, envelope.mail_from)
        with self._lock:
            self.received.append(Received(tuple(envelope.rcpt_tos), data))
        if hold == "after":
            self.committed_unconfirmed.append(data)
            await self._held()  # committed; a client killed here never hears "250"
        return "250 OK delivered"

    async def _held(self) -> None:
        self.holding.set()
        while not self._release.is_set():  # the client's death cancels this wait
            await asyncio.sleep(POLL)

    def hold_next(self, where: str) -> None:
        self._release.clear()
        self.holding.clear()
        self.hold = where

    def release(self) -> None:
        self._release.set()

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.received)


@pytest.fixture
def relay(dovecot) -> Iterator[GatedRelay]:
    made = GatedRelay(dovecot)
    made.controller.start()
    try:
        yield made
    finally:
        made.release()
        made.controller.stop()


# -- the agent as a process ----------------------------------------------------------


@dataclass
class Agent:
    """A home with one agent whose mail is the test's Dovecot account."""

    home: Path
    agent: str
    person: str
    relay: GatedRelay
    process: subprocess.Popen | None = None
    sent: list[tuple[str, str]] = field(default_factory=list)  # (marker, Message-ID)
    starts: int = 0

    @property
    def root(self) -> Path:
        return self.home / "agents" / "default"

    @property
    def person_address(self) -> str:
        return f"{self.person}@{MAIL_DOMAIN}"

    def configure(self) -> None:
        self.root.mkdir(parents=True)
        script = self.home / "model.toml"
        script.write_text("".join(f'[[responses]]\ntext = "{ANSWER}"\n' for _ in range(200)))
        self.root.joinpath("config.toml").write_text(
            "[models.reasoning]\nprovider = 'scripted'\nmodel = 'script'\n"
            f"script = '{script}'\ntoken_delay_s = {TOKEN_DELAY}\n"
            "[mail]\nimap_host = '127.0.0.1'\n"
            f"imap_port = {self.relay.dovecot.port}\nimap_security = 'none'\n"
            f"smtp_host = '127.0.0.1'\nsmtp_port = {self.relay.port}\nsmtp_security = 'none'\n"
            f"username = '{self.agent}'\naddress = '{self.agent}@{MAIL_DOMAIN}'\n"
            f"allow_from = ['{self.person_address}']\ntimeout = 20.0\n")

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
        env.update(NOEMA_HOME=str(self.home), HOME=str(self.home), PYTHONUNBUFFERED="1",
                   NOEMA_MAIL_PASSWORD=PASSWORD)
        self.starts += 1
        said = self.home / f"run-{self.starts}.err"
        with said.open("w") as err:
            self.process = subprocess.Popen([*NOEMA, "run"], env=env, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=err)
        self.until(lambda: "runs (pid" in said.read_text() or self.process.poll() is not None,
                   "noema run to start")
        assert self.process.poll() is None, said.read_text()

    def kill(self) -> None:
        """kill -9: nothing of the agent's own stopping runs."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self.process = None

    def stop(self) -> None:
        """SIGTERM, the clean stop."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(60) == 0, self.log()
        self.process = None

    def log(self) -> str:
        path = self.root / "logs" / "noema.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else "(no log)"

    def until(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}\n{self.log()}")
            time.sleep(POLL)

    # -- what the agent's files say, read beside the running process ------------------

    def rows(self, db: str, sql: str) -> list[tuple]:
        path = self.root / db
        if not path.exists():
            return []
        try:
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as conn:
                return conn.execute(sql).fetchall()
        except sqlite3.OperationalError:  # the table is not made yet
            return []

    def listening(self) -> bool:
        """The inbox's place is committed: mail from now on is never passed over."""
        return bool(self.rows("archive.db",
                              "SELECT 1 FROM bookmarks WHERE source = 'email:INBOX'"))

    def taken(self) -> dict[str, str]:
        """marker → 'pending' or 'taken', from the mail channel's own record."""
        return {subject: state for subject, state in
                self.rows("mail.db", "SELECT subject, state FROM taken")}

    def owed(self) -> int:
        return len(self.rows("mail.db", "SELECT 1 FROM outbox WHERE state = 'owed'"))

    # -- the person ------------------------------------------------------------------

    def write(self, marker: str) -> None:
        """The person sends a mail whose subject is `marker`."""
        message = mail(f"Ana <{self.person_address}>", f"{self.agent}@{MAIL_DOMAIN}", marker,
                       f"Please look at {marker} for me.",
                       auth=f"127.0.0.1; spf=pass smtp.mailfrom={self.person_address}")
        self.relay.dovecot.deliver(self.agent, message.as_bytes())
        self.sent.append((marker, message["Message-ID"]))

    def mailbox(self) -> list[bytes]:
        """Every mail in the person's INBOX, read with the standard library."""
        with imaplib.IMAP4("127.0.0.1", self.relay.dovecot.port) as imap:
            imap.login(self.person, PASSWORD)
            imap.select("INBOX", readonly=True)
            _, [uids] = imap.uid("search", None, "ALL")
            return [imap.uid("fetch", uid, "(BODY.PEEK[])")[1][0][1] for uid in uids.split()]

    def answered(self, message_id: str) -> bool:
        return any(r.message["In-Reply-To"] == message_id for r in self.relay.snapshot())


@pytest.fixture
def agent(dovecot, relay, tmp_path) -> Iterator[Agent]:
    made = Agent(tmp_path / "home", dovecot.new_user("agent"), dovecot.new_user("ana"), relay)
    made.configure()
    try:
        yield made
    finally:
        if made.process is not None:
            made.kill()


# -- the kills -------------------------------------------------------------------------


def kill_during_intake(agent: Agent, rng: random.Random, round_: int) -> None:
    markers = [f"m#{round_}.{n}" for n in range(4)]
    for marker in markers:
        agent.write(marker)
    agent.until(lambda: markers[0] in agent.taken(), "the first mail to be taken in")
    time.sleep(rng.uniform(0, 0.02))  # the others are on their way in
    agent.kill()


def kill_while_the_answer_streams(agent: Agent, rng: random.Random, round_: int) -> None:
    marker = f"m#{round_}.0"
    agent.write(marker)
    agent.until(lambda: agent.taken().get(marker) == "taken", "the mail to become a message")
    time.sleep(rng.uniform(0.05, 0.3))  # inside the answer's ~0.4 s of streaming
    agent.kill()


def kill_while_sending(where: str) -> Callable[[Agent, random.Random, int], None]:
    def kill(agent: Agent, rng: random.Random, round_: int) -> None:
        agent.relay.hold_next(where)
        agent.write(f"m#{round_}.0")
        agent.until(agent.relay.holding.is_set, f"an answer's DATA held {where} commit")
        agent.kill()
        agent.relay.release()
    return kill


ROUNDS = [kill_during_intake, kill_while_the_answer_streams, kill_while_sending("before"),
          kill_while_sending("after"), kill_during_intake, kill_while_the_answer_streams]


def test_kill_9_while_handling_mail_loses_and_doubles_nothing(agent: Agent):
    rng = random.Random(11)
    agent.start()
    agent.until(agent.listening, "the inbox's first look to be committed")
    for round_, kill in enumerate(ROUNDS):
        if round_:
            agent.start()
        kill(agent, rng, round_)
        if round_ == 3:
            agent.write("m#while-down")  # arrives while nobody listens
    agent.start()  # a last run, left to finish what is owed, then stopped cleanly
    last_marker, last_id = agent.sent[-1]
    agent.until(lambda: agent.answered(last_id), f"the answer to {last_marker}")
    agent.until(lambda: agent.owed() == 0, "the outbox to be empty")
    agent.stop()

    # Every mail of the person is one message, in the order they came.
    store = TurnStore(agent.root / "turns.db")
    try:
        turns = store.range(1, store.last_id())
    finally:
        store.close()
    person = [t for t in turns if t.kind is TurnKind.USER and t.channel == "email"]
    subjects = [t.content.split('subject "', 1)[1].split('"', 1)[0] for t in person]
    assert subjects == [marker for marker, _ in agent.sent], agent.log()
    assert set(agent.taken().values()) == {"taken"}

    # Each answer was composed once: one Message-ID per question, the copies the
    # server holds of it identical, and only the copy whose acceptance the killed
    # client never heard of travelled twice.
    received = [r for r in agent.relay.snapshot() if agent.person_address in r.recipients]
    by_question: dict[str, set[str]] = defaultdict(set)
    copies: dict[str, set[bytes]] = defaultdict(set)
    for r in received:
        by_question[r.message["In-Reply-To"]].add(r.message["Message-ID"])
        copies[r.message["Message-ID"]].add(r.data)
    assert all(len(ids) == 1 for ids in by_question.values()), by_question
    assert all(len(versions) == 1 for versions in copies.values())
    travelled = Counter(r.message["Message-ID"] for r in received)
    twice = {email.message_from_bytes(data)["Message-ID"]
             for data in agent.relay.committed_unconfirmed}
    assert len(twice) == 1
    assert {mid for mid, n in travelled.items() if n > 1} == twice
    assert all(n <= 2 for n in travelled.values())

    # Nothing lost: every answer the conversation owes a mail went out, and
    # nothing went out that it does not owe.
    message_id = dict(agent.sent)
    owed = {message_id[subjects[person.index(q)]] for q, _ in answered_pairs(turns, ["email"])}
    assert owed == set(by_question), (owed, set(by_question))
    assert message_id[last_marker] in owed
    # And the person's mailbox holds what the server accepted, no more.
    assert sorted(agent.mailbox()) == sorted(r.data for r in received)
