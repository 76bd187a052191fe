"""The part of the person's mail that forwards someone else's.

A mail client forwards a mail inline under a line of its own ("----------
Forwarded message ---------", "Begin forwarded message:", "-----Original
Message-----"), then the forwarded mail's headers and text. Those are the
forwarded mail's writer's words, not the person's: they reach the agent as
an outside event in that writer's name, never inside the person's message
(as a forwarded Telegram message does). A reply's quoted lines (`> …`) stay
in the person's message: they quote what the person answers, mostly the
agent's own mail. A mail forwarded *as an attachment* (`message/rfc822`) is
likewise its writer's, whoever attached it (`attached_writer`).

Pure: text in, parts out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from email.policy import compat32
from email.utils import parseaddr

# The line a client writes above an inline forward, in the languages the
# agent speaks (English, Spanish), with or without its dashes.
_MARKER = re.compile(
    r"^[ \t]*(?:-{2,}[ \t]*)?(?:forwarded message|original message|begin forwarded message:?"
    r"|mensaje reenviado|mensaje original|inicio del mensaje reenviado:?)"
    r"[ \t]*(?:-{2,})?[ \t]*$", re.IGNORECASE | re.MULTILINE)
_FROM = re.compile(r"^[ \t>]*(?:from|de)[ \t]*:[ \t]*(.+)$", re.IGNORECASE | re.MULTILINE)
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_HEAD_LINES = 12  # the forwarded mail's headers follow the marker within these
_ATTACHED_HEAD = 64 * 1024  # an attached mail's headers are looked for this far


@dataclass(frozen=True, slots=True)
class Forwarded:
    """A mail of the person's, split: their own words and what it forwards."""

    own: str
    forwarded: str  # "" when the mail forwards nothing inline
    writer: str  # the forwarded mail's sender's address, or "" when it names none


def split(text: str) -> Forwarded:
    """The person's own words and the forwarded mail, at the first marker."""
    marker = _MARKER.search(text)
    if marker is None:
        return Forwarded(text, "", "")
    rest = text[marker.end():].lstrip("\n")
    head = "\n".join(rest.split("\n")[:_HEAD_LINES])
    found = _FROM.search(head)
    address = _ADDRESS.search(found.group(1)) if found else None
    return Forwarded(text[:marker.start()].rstrip(), rest,
                     address.group(0).lower() if address else "")


def attached_writer(media_type: str, data: bytes) -> str | None:
    """Who wrote an attached mail (its From address, or a description when it
    names none); None when the attachment is not a mail."""
    if media_type.split(";")[0].strip().lower() != "message/rfc822":
        return None
    headers = BytesHeaderParser(policy=compat32).parsebytes(data[:_ATTACHED_HEAD])
    address = parseaddr(str(headers.get("From", "")))[1]
    return address.lower() if _ADDRESS.fullmatch(address) else "a mail the person attached"
