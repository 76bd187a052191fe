"""The mail channel: the inbox sensor, the tools, answers by mail, and
questions to the person by mail when no interface is attached (`approvals.py`).

An answer to the person's mail goes back in its thread, once: the whole
message is written to the outbox before it is sent and marked sent after.
A restart sends what the outbox still owes, the same bytes (the same
Message-ID), so a mail client shows one answer even in the one case left,
a crash between the server's acceptance and the mark.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from ...memory.turns import Turn
from ...perception.hub import Bookmark, Sensor
from ...tools.registry import Tool
from ..base import ChannelContext, Desk
from ..state_file import open_state
from ..view import ChannelView
from ...security.away import Answer, AwayQuestion, Posted
from .access import Account
from .approvals import MailApprovals
from .compose import Thread, compose
from .intake import CHANNEL, PersonIntake
from .message import Mail
from .sensor import UNREAD_CHANNEL, InboxSensor, UnreadOutlet
from .settings import MailSettings
from .smtp import send
from .state import MailState, Owed, StateBookmark
from .tools import MailTools

log = logging.getLogger(__name__)

STATE_FILE = "mail.db"


class MailChannel:
    """One mail account as a channel of the agent."""

    name = CHANNEL
    # Asked after a channel whose answers are one press (Telegram's buttons).
    ask_order = 1

    def __init__(self, settings: MailSettings, ctx: ChannelContext) -> None:
        self.settings = settings
        self.ctx = ctx
        self.account = Account(settings, ctx.secrets)
        self.state = _open_state(ctx)
        self.intake = PersonIntake(self.state, settings.max_body_chars, self._remember)
        self.unread = UnreadOutlet(settings.folder, self._bookmark(UNREAD_CHANNEL))
        self.approvals = MailApprovals(settings, self.state, self._send_now)
        self.sensor = InboxSensor(settings, self.account.connect,
                                  self._bookmark(f"email:{settings.folder}"), self.intake,
                                  self.unread, notice=ctx.notice, approvals=self.approvals)
        self._tools = MailTools(self.account, self.state, ctx.delimiter, ctx.hands.policy,
                                ctx.hands.versions, ctx.hands.gate, ctx.hands.marks).tools()
        self._sending = asyncio.Lock()

    def _bookmark(self, name: str) -> Bookmark:
        if self.ctx.bookmark is not None:
            return self.ctx.bookmark(name)
        return StateBookmark(self.state, name)

    def _remember(self, mail: Mail) -> None:
        """The person wrote with these addresses (a mail the trusted server vouched for,
        its From and the recipients the person gave it, never its Reply-To): mail to
        them needs no approval."""
        self.state.know((mail.from_address, *mail.to, *mail.cc), "person's mail")

    # -- the Channel protocol -----------------------------------------------------------

    def sensors(self) -> list[Sensor]:
        return [self.sensor, self.unread]

    def tools(self) -> list[Tool]:
        return list(self._tools)

    async def start(self, desk: Desk) -> None:
        self.intake.desk = desk
        self.intake.settle()
        if self.account.problem:
            self.ctx.notice(f"mail: {self.account.problem}")
        for owed in self.state.unsent():  # answers a previous run stored but never sent
            try:
                await self._deliver(owed)
            except Exception as exc:  # the router's catch-up or the next start retries
                log.warning("an owed answer (turn %d) was not sent: %s", owed.answer_id, exc)

    async def reply(self, question: Turn, answer: Turn) -> None:
        record = self.state.by_turn(question.id)
        if record is None:
            return  # not a mail this channel took
        async with self._sending:
            owed = self.state.owed(answer.id)
            if owed is None:
                thread = Thread(record.message_id, record.references, record.subject)
                message = compose(sender=self.settings.own_address,
                                  display_name=self.settings.display_name,
                                  to=(record.sender,), subject="", body=answer.content,
                                  thread=thread, auto_reply=True)
                owed = self.state.owe(answer.id, question.id, (record.sender,),
                                      message.as_bytes())
        await self._deliver(owed)

    async def _deliver(self, owed: Owed) -> None:
        async with self._sending:
            current = self.state.owed(owed.answer_id)
            if current is None or current.sent:
                return
            self.state.record_sent(_message_id(current.message), "outbox")
            await send(self.settings, self.account.password, current.message,
                       self.settings.own_address, current.recipients)
            self.state.mark_sent(current.answer_id)
            log.info("answer turn %d sent by mail to %s", current.answer_id,
                     ", ".join(current.recipients))

    async def post_question(self, question: AwayQuestion, answer: Answer) -> Posted:
        """Ask the person by mail (see `approvals.py`). RuntimeError when mail
        cannot ask now: no password, no address of the person's, or an inbox
        not being read (the answer could not be heard)."""
        if self.account.problem:
            raise RuntimeError(self.account.problem)
        if not self.settings.allow_from:
            raise RuntimeError("[mail] allow_from names none of the person's addresses")
        health = self.sensor.health
        if health.state != "connected":
            raise RuntimeError(f"the inbox is not being read ({health.state}"
                               + (f": {health.detail}" if health.detail else "") + ")")
        return await self.approvals.post(question, answer)

    async def close_question(self, handle: Mapping[str, Any], outcome: str) -> None:
        self.approvals.close(handle, outcome)

    async def _send_now(self, message: bytes, recipients: tuple[str, ...]) -> None:
        await send(self.settings, self.account.password, message, self.settings.own_address,
                   recipients)

    def view(self) -> ChannelView:
        problem = self.account.problem
        if problem:
            return ChannelView(name=self.name, state="off", detail=problem)
        health = self.sensor.health
        detail = health.detail
        if self.sensor.forged_own:
            detail += f" · {self.sensor.forged_own} forged from its own address"
        if self.approvals.foreign:
            detail += (f" · {self.approvals.foreign} replies to its questions not from "
                       "the person")
        return ChannelView(name=self.name, state=health.state, detail=detail)

    async def aclose(self) -> None:
        await self.approvals.aclose()
        await self.account.aclose()
        self.state.close()


def _message_id(message: bytes) -> str:
    """The Message-ID of a message the channel composed."""
    from .message import parse_bytes

    return str(parse_bytes(message).get("Message-ID", "")).strip()


def _open_state(ctx: ChannelContext) -> MailState:
    """The state file; a damaged one is moved aside (kept, for a look by hand)
    and a new one started, so the person's mail keeps working."""
    return open_state(ctx.paths.root / STATE_FILE, MailState, what="mail", notice=ctx.notice,
                      lost="An answer owed by mail may not be sent, and sending to "
                           "addresses you wrote with before asks you again.")


def build_mail_channel(settings: MailSettings, ctx: ChannelContext) -> MailChannel:
    """The mail channel of an agent whose `[mail]` section is filled in."""
    return MailChannel(settings, ctx)
