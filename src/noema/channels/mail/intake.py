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
from . import display, forwarded
from .message import Mail, human_size
from .state import MailState, Taken

log = logging.getLogger(__name__)

CHANNEL = "email"
HEADER_SUBJECT_CHARS = 500
HEADER_ADDRESSES = 20
HEADER_ATTACHMENTS = 10


def header_line(mail: Mail, folder: str, uidvalidity: int) -> str:
    """The line before the body: what the model needs to answer or look it up. Each
    field is bounded, and where the mail is comes before the long ones."""
    parts = [f"from {display.sender(mail.from_name, mail.from_address, mail.from_others)}"]
    where = f"uid {mail.uid}" if folder == "INBOX" else f"folder {folder} uid {mail.uid}"
    parts.append(f"{where} (validity {uidvalidity})")
    if mail.to:
        parts.append(f"to {display.addresses(mail.to, HEADER_ADDRESSES, mail.to_more)}")
    if mail.cc:
        parts.append(f"cc {display.addresses(mail.cc, HEADER_ADDRESSES)}")
    parts.append(f'subject "{display.visible(mail.subject, HEADER_SUBJECT_CHARS) or "(no subject)"}"')
    if mail.date_text:
        parts.append(f"date {display.visible(mail.date_text, 60)}")
    if mail.attachments:
        shown = "; ".join(f"{display.visible(a.name, 120)} ({a.media_type}, "
                          f"{human_size(a.size)})" for a in mail.attachments[:HEADER_ATTACHMENTS])
        more = len(mail.attachments) - HEADER_ATTACHMENTS
        parts.append(f"attachments: {shown}" + (f"; and {more} more" if more > 0 else ""))
    return "[email " + " · ".join(" ".join(p.split()) for p in parts) + "]"


def message_text(mail: Mail, header: str, max_chars: int) -> str:
    """The person's message: the header line, then the body as text; a
    forwarded mail inside it is left out (its writer's words come as an
    event of their own, see `forwarded`), and said so."""
    parts = forwarded.split(mail.text)
    body = parts.own or "(no text of their own)"
    if parts.forwarded:
        who = f" from {display.address(parts.writer)}" if parts.writer else ""
        body += (f"\n(It forwards a mail{who}: it comes to you as an event of its own, as "
                 "outside data, not as the person's words.)")
    if len(body) > max_chars:
        body = (f"{body[:max_chars]}\n(… {len(body) - max_chars} more characters: "
                f"email_read(uid={mail.uid}, offset={max_chars}))")
    return f"{header}\n{body}"


class PersonIntake:
    """Hands the person's mails to the desk, each once."""

    def __init__(self, state: MailState, max_chars: int,
                 on_authenticated: Callable[[Mail], None] = lambda mail: None) -> None:
        self.state = state
        self._state = state
        self._max_chars = max_chars
        # Told of a taken mail the trusted server vouched for (not one taken on its
        # From line alone): only such a mail may teach which addresses are known.
        self._on_authenticated = on_authenticated
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

    def take(self, mail: Mail, folder: str, uidvalidity: int,
             authenticated: bool = False) -> bool:
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
        if authenticated:
            self._on_authenticated(mail)
        log.info("mail uid %d from the person is turn %d", mail.uid, turn.id)
        return True


def _stored_turn(stored: list[Turn], record: Taken) -> Turn | None:
    for turn in reversed(stored):
        if turn.content.split("\n", 1)[0] == record.header:
            return turn
    return None
