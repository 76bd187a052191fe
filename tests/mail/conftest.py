"""Fixtures: one Dovecot and one SMTP relay for the session, fresh accounts per test,
and a mail channel over real parts (turn store, hands, hub)."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import imaplib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.policy import SMTP
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from noema.app import App, build_app
from noema.channels.base import ChannelContext, Desk
from noema.channels.mail import MailChannel, MailSettings
from noema.config import Config
from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, Turn, TurnKind
from noema.paths import AgentPaths
from noema.perception.events import Event
from noema.perception.hub import SensorHub
from noema.perception.untrusted import SessionDelimiter
from noema.providers.base import Provider
from noema.security.approvals import ApprovalRequest, Approver
from noema.security.settings import FilesSettings, HandsSettings, RootSettings
from noema.tools.hands import build_hands

from .servers import MAIL_DOMAIN, PASSWORD, Dovecot, SmtpRelay, available

WAIT = 30.0  # seconds: generous, for a loaded machine


def mail_agent_paths(tmp_path: Path) -> AgentPaths:
    """An agent's folder whose secrets hold the mail accounts' password."""
    paths = AgentPaths.for_agent("mailer", tmp_path / "home")
    paths.ensure()
    paths.secrets_file.write_text(f'NOEMA_MAIL_PASSWORD = "{PASSWORD}"\n')
    return paths


@contextlib.asynccontextmanager
async def mail_agent(paths: AgentPaths, config: Config, model: Provider,
                     approver: Approver) -> AsyncIterator[App]:
    """The whole agent started, once its mail channel has looked at the box."""
    app = build_app(paths, config, provider=model)
    app.attach_approver(approver)
    try:
        await app.start()
        [channel] = app.channels
        looked = asyncio.Event()
        channel.sensor.on_look = lambda looks: looked.set()
        await asyncio.wait_for(looked.wait(), WAIT)
        yield app
    finally:
        await app.aclose()


@pytest.fixture(scope="session")
def dovecot():
    problem = available()
    if problem:
        pytest.skip(problem)
    server = Dovecot.create()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def dovecot_without_idle():
    """A Dovecot whose capabilities after login leave IDLE out."""
    problem = available()
    if problem:
        pytest.skip(problem)
    server = Dovecot.create("imap_capability = IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE "
                            "LITERAL+ UIDPLUS\n")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def smtp(dovecot):
    relay = SmtpRelay(dovecot)
    relay.start()
    yield relay
    relay.stop()


@dataclass
class Accounts:
    """An agent's account and the person's, fresh for one test."""

    dovecot: Dovecot
    smtp: SmtpRelay
    agent: str
    person: str

    @property
    def agent_address(self) -> str:
        return f"{self.agent}@{MAIL_DOMAIN}"

    @property
    def person_address(self) -> str:
        return f"{self.person}@{MAIL_DOMAIN}"

    def settings(self, **changes) -> MailSettings:
        values = dict(
            imap_host="127.0.0.1", imap_port=self.dovecot.port, imap_security="none",
            smtp_host="127.0.0.1", smtp_port=self.smtp.port, smtp_security="none",
            username=self.agent, address=self.agent_address, display_name="Noema",
            allow_from=(self.person_address,), timeout=20.0)
        values.update(changes)
        return MailSettings(**values)

    def deliver(self, message: EmailMessage, to: str | None = None) -> None:
        self.dovecot.deliver(to or self.agent, message.as_bytes())

    def mailbox(self, user: str) -> list[tuple[int, bytes]]:
        """(uid, raw) of every mail in a user's INBOX, read with the standard library."""
        with imaplib.IMAP4("127.0.0.1", self.dovecot.port) as imap:
            imap.login(user, PASSWORD)
            imap.select("INBOX", readonly=True)
            _, data = imap.uid("search", None, "ALL")
            found = []
            for uid in data[0].split():
                _, parts = imap.uid("fetch", uid, "(BODY.PEEK[])")
                found.append((int(uid), parts[0][1]))
            return found


@pytest.fixture
def accounts(dovecot, smtp) -> Accounts:
    return Accounts(dovecot, smtp, dovecot.new_user("agent"), dovecot.new_user("ana"))


def mail(sender: str, to: str, subject: str, body: str, *, html: str | None = None,
         auth: str | None = None, message_id: str | None = None,
         attachments: tuple[tuple[str, str, bytes], ...] = (), **headers: str) -> EmailMessage:
    """A mail as a client would send it; `auth` is an Authentication-Results value."""
    message = EmailMessage(policy=SMTP)
    if auth is not None:
        message["Authentication-Results"] = auth
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = email.utils.formatdate(usegmt=True)
    message["Message-ID"] = message_id or email.utils.make_msgid(domain="mail.test")
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content(body)
    if html is not None:
        message.add_alternative(html, subtype="html")
    for name, kind, data in attachments:
        maintype, subtype = kind.split("/")
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return message


class RecordingApprover:
    """An approver that answers as told and remembers what it was asked."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> bool:
        self.asked.append(request)
        return self.answer


@dataclass
class Rig:
    """A mail channel over a real turn store, real hands and a real hub."""

    accounts: Accounts
    root: Path
    settings: MailSettings
    store: TurnStore
    session: Session
    channel: MailChannel
    hub: SensorHub
    approver: RecordingApprover
    events: list[Event] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def person_turns(self) -> list[Turn]:
        last = self.store.last_id()
        turns = self.store.range(1, last) if last else []
        return [t for t in turns if t.kind is TurnKind.USER and t.channel == "email"]

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        """Wait (on the sensor's looks and events, not on a clock) until `condition`."""
        async def wait() -> None:
            while not condition():
                self.changed.clear()
                if condition():
                    return
                await self.changed.wait()
        try:
            await asyncio.wait_for(wait(), WAIT)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}; events: {len(self.events)} "
                                 f"{[e.text[:80] for e in self.events]}") from None

    async def stop(self) -> None:
        await self.hub.stop()
        await self.channel.aclose()
        self.store.close()


async def make_rig(accounts: Accounts, root: Path, password: str = PASSWORD, **changes) -> Rig:
    """Build and start a channel whose state lives in `root` (a second rig over the
    same root is the agent restarted)."""
    settings = accounts.settings(**changes)
    paths = AgentPaths.for_agent("mail", root / "home")
    paths.ensure()
    hands = build_hands(HandsSettings(files=FilesSettings(
        roots=(RootSettings(path=root / "ws"),))), paths, watch_changes=False)
    approver = RecordingApprover()
    hands.gate.attach(approver)
    store = TurnStore(paths.turns_db)
    session = Session.load(store)
    rig_ref: list[Rig] = []
    notices: list[str] = []  # the channel may speak while it is built

    def notice(line: str) -> None:
        notices.append(line)
        if rig_ref:
            rig_ref[0].changed.set()

    ctx = ChannelContext(paths, {"NOEMA_MAIL_PASSWORD": password}, hands,
                         SessionDelimiter.new(), ZoneInfo("UTC"), notice)
    channel = MailChannel(settings, ctx)

    def on_event(event: Event) -> None:
        rig_ref[0].events.append(event)
        rig_ref[0].changed.set()

    hub = SensorHub(on_event)
    rig = Rig(accounts, root, settings, store, session, channel, hub, approver,
              notices=notices)
    rig_ref.append(rig)

    def submit(text: str, *, channel: str, sender: str | None = None) -> Turn:
        turn = session.stage(NewTurn(TurnKind.USER, text, channel=channel, sender=sender))
        rig.changed.set()
        return turn

    async def stop() -> bool:
        return False

    desk = Desk(submit=submit, stop=stop, status=lambda: "idle",
                submitted=lambda name: [t for t in rig.person_turns() if t.channel == name])
    await channel.start(desk)
    channel.sensor.on_look = lambda looks: rig.changed.set()  # wakes the waiting test
    for sensor in channel.sensors():
        hub.add(sensor)
    hub.start()
    return rig


@pytest.fixture
async def rig(accounts, tmp_path):
    made = await make_rig(accounts, tmp_path)
    # Mail already there at the first start is not announced: tests deliver after it.
    await made.until(lambda: made.channel.sensor.looks >= 1, "the first look")
    yield made
    await made.stop()
