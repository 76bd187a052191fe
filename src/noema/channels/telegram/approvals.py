"""Questions to the person on Telegram, answered with two buttons.

When no interface is attached (the agent runs as `noema run` and the person
is away from the machine), a call that needs the person's yes is asked in the
person's first chat: what it asks and how to answer first, then why it asks
and the request, quoted line by line (`| `) with invisible characters made
visible, under two inline buttons, Allow and Refuse. Each question has a
fresh random key in its buttons' data, so a button answers that question
only, and only once. Sending returns at once: the answer is handed to the
questions asked away (`security/away.py`), which run the call or not.

Only the person can answer: the press must come from one of the person's
chats as a user (in a private chat the chat's ID is the user's). A press by
anyone else, on an expired question, on one already answered (here or at an
interface), or on one asked before a restart, changes nothing and is told
so in Telegram's own answer to the press. A question settled anywhere else,
or expired, loses its buttons and its message says how it ended.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...security.approvals import ApprovalRequest, shown_plainly
from ...security.away import Answer, AwayQuestion, Posted
from .library import Bot, InlineKeyboardButton, InlineKeyboardMarkup, MessageLimit

log = logging.getLogger(__name__)

PREFIX = "approval"  # callback data: "approval:<key>:allow" or ":refuse"
_ROOM = MessageLimit.MAX_TEXT_LENGTH - 1800  # for the lines of its own, the reason, prefixes
BLOCK_PREFIX = "| "  # every line of outside text in a question starts with it


@dataclass
class _Open:
    number: int
    answer: Answer
    chat_id: int
    message_id: int
    text: str


class TelegramApprovals:
    """Asks the person in their first chat and takes the answer from a button."""

    def __init__(self, bot: Bot, person_chats: tuple[int, ...]) -> None:
        self.bot = bot
        self.chats = frozenset(person_chats)
        self.chat = person_chats[0]
        self._open: dict[str, _Open] = {}

    async def post(self, question: AwayQuestion, answer: Answer) -> Posted:
        """Send the question under its two buttons; the press goes to `answer`."""
        key = secrets.token_urlsafe(9)
        text = question_text(question.request, question.timeout)
        buttons = InlineKeyboardMarkup([[
            InlineKeyboardButton("Allow", callback_data=f"{PREFIX}:{key}:allow"),
            InlineKeyboardButton("Refuse", callback_data=f"{PREFIX}:{key}:refuse"),
        ]])
        sent = await self.bot.send_message(self.chat, text, reply_markup=buttons)
        self._open[key] = _Open(question.number, answer, self.chat, sent.message_id, text)
        return Posted("on Telegram", {"key": key, "chat_id": self.chat,
                                      "message_id": sent.message_id, "text": text})

    async def close(self, handle: Mapping[str, Any], outcome: str) -> None:
        """The question ended elsewhere (or expired, or a restart ended it): its
        buttons go and its message says how."""
        found = self._open.pop(str(handle.get("key", "")), None)
        chat_id, message_id = handle.get("chat_id"), handle.get("message_id")
        if not isinstance(chat_id, int) or not isinstance(message_id, int):
            return
        await self._edit(chat_id, message_id, found.text if found else str(handle.get("text")),
                         outcome)

    async def press(self, query_id: str, data: str, user_id: int | None,
                    chat_id: int | None) -> None:
        """A button was pressed: answer the question it belongs to, if it may."""
        parts = data.split(":")
        if len(parts) != 3 or parts[0] != PREFIX or parts[2] not in ("allow", "refuse"):
            await self._tell(query_id, "This button is not one of mine.")
            return
        _, key, choice = parts
        if user_id not in self.chats or chat_id not in self.chats:
            log.warning("an approval button was pressed by user %s in chat %s, who is not "
                        "the person; ignored", user_id, chat_id)
            await self._tell(query_id, "Only the person this agent works for can answer.")
            return
        found = self._open.pop(key, None)
        if found is None:
            await self._tell(query_id, "This question is closed (answered, expired, or asked "
                                       "before the agent restarted); nothing was done.")
            return
        allowed = choice == "allow"
        refusal = found.answer(found.number, allowed, "telegram")
        if refusal is not None:  # settled elsewhere a moment ago
            await self._tell(query_id, f"This question is closed: {refusal}.")
            return
        await self._tell(query_id, "Allowed." if allowed else "Refused.")
        await self._edit(found.chat_id, found.message_id, found.text,
                         "You allowed it." if allowed else "You refused it.")

    async def _tell(self, query_id: str, text: str) -> None:
        try:
            await self.bot.answer_callback_query(query_id, text=text[:200])
        except Exception as exc:  # the press is decided either way
            log.info("answering a button press on Telegram failed: %s", exc)

    async def _edit(self, chat_id: int, message_id: int, text: str, outcome: str) -> None:
        try:
            await self.bot.edit_message_text(f"{text}\n\n{outcome}", chat_id=chat_id,
                                             message_id=message_id, reply_markup=None)
        except Exception as exc:  # the question is settled whatever the message shows
            log.info("updating an approval message on Telegram failed: %s", exc)


def question_text(request: ApprovalRequest, timeout: float) -> str:
    """The question as the person reads it: plain text, nothing hidden. Its own
    lines come first; why it asks and the request, words anyone may have written,
    follow as a block whose every line starts with `BLOCK_PREFIX`, so none of
    them can pass for a line of the question's own."""
    arguments, flagged = shown_plainly(request.arguments)
    reason, odd_reason = shown_plainly(request.reason)
    if len(arguments) > _ROOM:
        arguments = (f"{arguments[:_ROOM]}\n… ({len(arguments) - _ROOM} more characters: "
                     "see the whole request in the terminal or the page)")
    warning = ("\n⚠ The quoted text holds invisible or direction-changing characters, shown "
               "there as ⟨U+…⟩: read it with care.") if flagged or odd_reason else ""
    minutes = max(1, round(timeout / 60))
    tool = shown_plainly(" ".join(request.tool.split()))[0][:80]
    return (f"Your agent asks before it runs {tool}. Allow or refuse below. With no answer "
            f"in {minutes} minute{'s' if minutes != 1 else ''} it is refused.\n"
            f"Everything below is quoted, every line of it after \"{BLOCK_PREFIX}\": words "
            f"that may be anyone's, never an instruction of this message.{warning}\n\n"
            f"Why it asks:\n{_block(reason[:1000])}\n\n"
            f"What it would run:\n{_block(arguments)}")


def _block(text: str) -> str:
    return "\n".join(BLOCK_PREFIX + line for line in text.split("\n"))
