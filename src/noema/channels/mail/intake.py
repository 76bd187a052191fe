"""A mail from the person becomes the person's message, exactly once.

The order makes a `kill -9` at any moment harmless: the mail is recorded
as *pending* in the channel's file, then submitted (stored as a turn before
`submit` returns), then recorded as *taken* with the turn's ID. A pending
record found later is settled against the person's stored messages from
this channel (`Desk.submitted`): the turn's first line is the header
written here, unique to the mail (its folder, UIDVALIDITY and UID), so a
mail already stored is never submitted again, and one that is not is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ...memory.turns import Turn
from ..base import Desk
from .message import Mail
from .state import MailState, Taken

log = logging.getLogger(__name__)

CHANNEL = "email"


def header_line(mail: Mail, folder: str, uidvalidity: int) -> str:
    """The line before the body: what the model needs to answer or look it up."""
    parts = [f"from {mail.from_display or mail.from_address}"]
    if mail.to:
        parts.append(f"to {', '.join(mail.to)}")
    if mail.cc:
        parts.append(f"cc {', '.join(mail.cc)}")
    parts.append(f'subject "{mail.subject or "(no subject)"}"')
    if mail.date_text:
        parts.append(f"date {mail.date_text}")
    where = f"uid {mail.uid}" if folder == "INBOX" else f"folder {folder} uid {mail.uid}"
    parts.append(f"{where} (validity {uidvalidity})")
    if mail.attachments:
        parts.append(f"attachments: {mail.attachment_list()}")
    return "[email " + " · ".join(" ".join(p.split()) for p in parts) + "]"


def message_text(mail: Mail, header: str, max_chars: int) -> str:
    """The person's message: the header line, then the body as text."""
    body = mail.text or "(no text)"
    if len(body) > max_chars:
        body = (f"{body[:max_chars]}\n(… {len(body) - max_chars} more characters: "
                f"email_read(uid={mail.uid}, offset={max_chars}))")
    return f"{header}\n{body}"


class PersonIntake:
    """Hands the person's mails to the desk, each once."""

    def __init__(self, state: MailState, max_chars: int,
                 on_taken: Callable[[Mail], None] = lambda mail: None) -> None:
        self._state = state
        self._max_chars = max_chars
        self._on_taken = on_taken
        self.desk: Desk | None = None

    def settle(self) -> None:
        """Resolve mails a dead process left pending: taken if their turn is stored."""
        pending = self._state.pending()
        if not pending or self.desk is None:
            return
        stored = self.desk.submitted(CHANNEL)
        for record in pending:
            turn = _stored_turn(stored, record)
            if turn is not None:
                self._state.finish(record.folder, record.uidvalidity, record.uid, turn.id)

    def take(self, mail: Mail, folder: str, uidvalidity: int) -> bool:
        """Submit `mail` as the person's message unless it was already; True if
        it is now taken (by this call or an earlier one)."""
        if self.desk is None:
            raise RuntimeError("the mail channel was not started with a desk")
        record = self._state.taken(folder, uidvalidity, mail.uid)
        if record is not None and record.state == "taken":
            return True
        header = header_line(mail, folder, uidvalidity)
        if record is not None:  # pending: a crash came between submit and the record
            turn = _stored_turn(self.desk.submitted(CHANNEL), record)
            if turn is not None:
                self._state.finish(folder, uidvalidity, mail.uid, turn.id)
                return True
            header = record.header
        else:
            self._state.begin(folder, uidvalidity, mail.uid, header=header,
                              sender=mail.from_address, subject=mail.subject,
                              message_id=mail.message_id, references=mail.references)
        turn = self.desk.submit(message_text(mail, header, self._max_chars),
                                channel=CHANNEL, sender=mail.from_address)
        self._state.finish(folder, uidvalidity, mail.uid, turn.id)
        self._on_taken(mail)
        log.info("mail uid %d from the person is turn %d", mail.uid, turn.id)
        return True


def _stored_turn(stored: list[Turn], record: Taken) -> Turn | None:
    for turn in reversed(stored):
        if turn.content.split("\n", 1)[0] == record.header:
            return turn
    return None
