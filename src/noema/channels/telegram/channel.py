"""The Telegram channel: the person's chats as a voice and a sense.

It reads the person's chats with long polling (`poller.Poller`, a sensor
the hub runs), answers where a question came from (`reply`, once per
answer), and offers the model `telegram_send` and `telegram_save_file`.
Its state file, `telegram.db` in the agent's folder, keeps its place in the
update stream and what it took and sent (see `state.py`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from ...memory.turns import Turn
from ...perception.hub import Backoff, Sensor
from ...tools.registry import Tool
from ..base import ChannelContext, Desk
from ..state_file import open_state
from ..view import ChannelView
from ...security.away import Answer, AwayQuestion, Posted
from .approvals import TelegramApprovals
from .connection import build_bot
from .poller import CHANNEL, Poller
from .sender import Sender
from .settings import TelegramSettings
from .state import TelegramState
from .tools import telegram_tools

log = logging.getLogger(__name__)

STATE_FILE = "telegram.db"
FORWARDED_BOOKMARK = "telegram:forwarded"  # where the forwarded messages' events stand


class TelegramChannel:
    """A Telegram bot the person talks to (see the module's docstring)."""

    name = CHANNEL

    def __init__(self, settings: TelegramSettings, ctx: ChannelContext, *,
                 backoff: Backoff = Backoff(initial=1.0, maximum=60.0),
                 send_delay: float = 1.0) -> None:
        self.settings = settings
        self.state = _open_state(ctx)
        token = ctx.secrets.get(settings.token_secret, "").strip()
        self.bot = build_bot(settings, token) if token else None
        self.sender = (Sender(self.bot, self.state, settings.token_secret, send_delay)
                       if self.bot is not None else None)
        self.approvals = (TelegramApprovals(self.bot, settings.chat_ids)
                          if self.bot is not None else None)
        self.poller = (Poller(settings, self.state, self.bot, self.sender, ctx.notice,
                              backoff=backoff, approvals=self.approvals,
                              bookmark=ctx.bookmark(FORWARDED_BOOKMARK)
                              if ctx.bookmark is not None else None)
                       if self.bot is not None and self.sender is not None else None)
        self._tools = telegram_tools(settings, self.bot, self.sender, ctx.hands)
        self._chats = {str(chat) for chat in settings.chat_ids}
        if self.bot is None:
            ctx.notice(f"Telegram is configured ([telegram] chat_ids) but its bot token is not "
                       f"set: put it in secrets.toml or the environment as "
                       f"{settings.token_secret}. Until then Telegram is off.")

    def sensors(self) -> list[Sensor]:
        return [self.poller] if self.poller is not None else []

    def tools(self) -> list[Tool]:
        return list(self._tools)

    async def start(self, desk: Desk) -> None:
        if self.state.fresh:  # a new (or replaced) file over a conversation that may be old
            asked = [t.id for t in desk.submitted(CHANNEL)]
            # Earlier answers are taken as sent; the newest question's may still be owed.
            self.state.set_horizon(max(asked, default=0))
            self.state.fresh = False
        if self.poller is not None:
            self.poller.attach(desk)

    async def reply(self, question: Turn, answer: Turn) -> None:
        """Send `answer` to the chat `question` came from, once."""
        if question.channel != CHANNEL or question.sender not in self._chats:
            return  # not a message this channel took
        if self.sender is None:
            raise RuntimeError(f"Telegram has no bot token ({self.settings.token_secret})")
        await self.sender.answer(answer.id, int(question.sender), answer.content)

    async def post_question(self, question: AwayQuestion, answer: Answer) -> Posted:
        """Ask the person in their first chat (see `approvals.py`); RuntimeError
        when Telegram cannot ask now."""
        if self.approvals is None:
            raise RuntimeError(f"Telegram has no bot token ({self.settings.token_secret})")
        try:
            return await self.approvals.post(question, answer)
        except Exception as exc:  # the server or the network: the next channel may ask
            raise RuntimeError(f"the question could not be sent: {exc}") from exc

    async def close_question(self, handle: Mapping[str, Any], outcome: str) -> None:
        if self.approvals is not None:
            await self.approvals.close(handle, outcome)

    def view(self) -> ChannelView:
        ignored = self.state.ignored()
        chats = ", ".join(map(str, self.settings.chat_ids))
        detail = f"chats {chats}"
        if ignored:
            detail += (f"; ignored {sum(ignored.values())} message(s) from "
                       f"{len(ignored)} other chat(s)")
        if self.poller is None:
            return ChannelView(name=self.name, state="off: no bot token", detail=detail)
        health = self.poller.health
        if health.problem and health.state != "connected":
            detail += f"; {health.problem}"
        return ChannelView(name=self.name, state=health.state, detail=detail)

    async def aclose(self) -> None:
        if self.bot is not None:
            with contextlib.suppress(Exception):
                await self.bot.shutdown()
        self.state.close()



def _open_state(ctx: ChannelContext) -> TelegramState:
    """The state file; a damaged one is moved aside (kept, for a look by hand)
    and a new one started, so that the person's chats keep working."""
    return open_state(ctx.paths.root / STATE_FILE, TelegramState, what="Telegram", notice=ctx.notice,
                      lost="Messages it held back for the agent may be missing, and the answer "
                           "to your newest Telegram message may be sent again.")
