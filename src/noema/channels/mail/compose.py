"""Outgoing mail: the message, its recipients and its place in a thread.

A reply carries `In-Reply-To` (the original's Message-ID) and `References`
(the original's references, then its Message-ID), so every mail client files
it in the same thread, and its subject gets "Re: " once.
"""

from __future__ import annotations

import email.utils
import re
from dataclasses import dataclass
from email.message import EmailMessage
from email.policy import SMTP

_RE = re.compile(r"^\s*re\s*:", re.IGNORECASE)
MAX_REFERENCES = 20  # the first (the thread's root) and the newest are the ones clients use


@dataclass(frozen=True, slots=True)
class Thread:
    """What a reply needs of the mail it answers."""

    message_id: str
    references: tuple[str, ...]
    subject: str


class BadAddress(ValueError):
    """An address a mail cannot be sent to."""


def parse_recipients(text: str) -> tuple[str, ...]:
    """Addresses from 'a@x.org, Bo <b@y.org>', lower case; BadAddress if one is not usable."""
    found = []
    for name, address in email.utils.getaddresses([text]):
        address = address.strip()
        if not re.fullmatch(r"[^@\s<>(),;:\"\[\]]+@[^@\s<>(),;:\"\[\]]+\.[^@\s<>(),;:\"\[\]]+",
                            address):
            shown = address or name or text
            raise BadAddress(f"{shown!r} is not a mail address (like name@example.org)")
        found.append(address.lower())
    if not found:
        raise BadAddress("no recipient: give at least one address, like name@example.org")
    return tuple(dict.fromkeys(found))


def reply_subject(subject: str) -> str:
    """'Re: ' + subject, unless it starts with a Re: already."""
    subject = subject.strip() or "(no subject)"
    return subject if _RE.match(subject) else f"Re: {subject}"


def thread_references(thread: Thread) -> tuple[str, ...]:
    """The References of a reply to `thread`: its own, then its Message-ID."""
    refs = [r for r in thread.references if r != thread.message_id]
    if thread.message_id:
        refs.append(thread.message_id)
    if len(refs) > MAX_REFERENCES:
        refs = [refs[0], *refs[-(MAX_REFERENCES - 1):]]
    return tuple(refs)


def compose(*, sender: str, display_name: str, to: tuple[str, ...], subject: str, body: str,
            thread: Thread | None = None, cc: tuple[str, ...] = (),
            auto_reply: bool = False) -> EmailMessage:
    """A plain-text mail with a fresh Message-ID, threaded under `thread` if given.

    `auto_reply`: sent by the reply router without anyone writing it, so it
    says so (`Auto-Submitted: auto-replied`, RFC 3834): another agent or an
    autoresponder receiving it does not answer it, and the exchange stops."""
    message = EmailMessage(policy=SMTP)
    message["From"] = email.utils.formataddr((display_name, sender)) if display_name else sender
    message["To"] = ", ".join(to)
    if cc:
        message["Cc"] = ", ".join(cc)
    message["Subject"] = reply_subject(subject or thread.subject) if thread else (
        subject.strip() or "(no subject)")
    message["Date"] = email.utils.formatdate(localtime=False, usegmt=True)
    domain = sender.rsplit("@", 1)[-1] if "@" in sender else None
    message["Message-ID"] = email.utils.make_msgid(domain=domain)
    if thread is not None and thread.message_id:
        message["In-Reply-To"] = thread.message_id
        message["References"] = " ".join(thread_references(thread))
    if auto_reply:
        message["Auto-Submitted"] = "auto-replied"
    message.set_content(body if body.endswith("\n") else body + "\n")
    return message
