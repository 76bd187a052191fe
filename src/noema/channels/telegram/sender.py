"""Sending text to a chat: split, formatted, retried within bounds, and for
answers, once.

An answer is written to the outbox (its parts, keyed by the answer's turn
ID) before its first part goes out, and each part is marked once Telegram
accepted it, so an answer offered again after a restart sends only what is
missing. The one window left is a crash after Telegram accepted a part and
before it was marked: the Bot API has no way to ask whether a message was
sent, and sending that part again is better than losing it.
"""

from __future__ import annotations

import asyncio
import logging

from .library import BadRequest, Bot, ParseMode

from .connection import trouble
from .formatting import Part, split_message
from .state import TelegramState

log = logging.getLogger(__name__)

ATTEMPTS = 4  # per part, for network trouble and Telegram's "retry after"
MAX_WAIT_S = 60.0  # the longest "retry after" honoured inside one send


class Sender:
    """Sends text with one bot; `delay` is the first pause after a network failure."""

    def __init__(self, bot: Bot, state: TelegramState, token_secret: str,
                 delay: float = 1.0) -> None:
        self.bot = bot
        self.state = state
        self.token_secret = token_secret
        self.delay = delay
        self._lock = asyncio.Lock()  # parts of two answers never interleave

    async def send(self, chat_id: int, text: str) -> int:
        """Send `text` now (no outbox); how many messages it took."""
        parts = split_message(text)
        async with self._lock:
            for part in parts:
                await self._part(chat_id, part)
        return len(parts)

    async def answer(self, answer_id: int, chat_id: int, text: str) -> None:
        """Send the answer `answer_id` once, whatever happened before."""
        async with self._lock:
            entry = self.state.outbox(answer_id)
            if entry is None and answer_id < self.state.horizon:
                return  # from before this state file: its sending is not known
            if entry is None:
                entry = self.state.queue_answer(
                    answer_id, chat_id, [(p.markdown, p.plain) for p in split_message(text)])
            if entry.done:
                return
            for number in range(entry.sent, len(entry.parts)):
                await self._part(entry.chat_id, Part(*entry.parts[number]))
                self.state.part_sent(answer_id, number + 1, number + 1 == len(entry.parts))
            if not entry.parts:
                self.state.part_sent(answer_id, 0, True)

    async def _part(self, chat_id: int, part: Part) -> None:
        delay = self.delay
        for attempt in range(1, ATTEMPTS + 1):
            try:
                await self.bot.send_message(chat_id, part.markdown,
                                            parse_mode=ParseMode.MARKDOWN_V2)
                return
            except BadRequest as exc:
                if "parse" not in str(exc).lower():
                    raise
                # Our escaping should never be refused; if it is, the words still go.
                log.warning("Telegram refused the formatting of a message (%s); sent plain", exc)
                await self.bot.send_message(chat_id, part.plain)
                return
            except Exception as exc:
                found = trouble(exc, self.token_secret, self.bot.token)
                if found is None or found.kind not in ("network", "wait") or attempt == ATTEMPTS:
                    raise
                wait = min(found.wait_s, MAX_WAIT_S) if found.wait_s is not None else delay
                log.info("sending to Telegram failed (%s); again in %.1f s", found.sentence, wait)
                await asyncio.sleep(wait)
                delay *= 2
