"""A mail as the agent reads it: who, what about, when, its text and the
files it carries, from the raw RFC 5322 bytes.

Parsing never raises on a broken mail: a header that cannot be decoded is
kept as the raw text the standard library recovered, a body part that
cannot be decoded becomes a note, so one bad mail never stops the sensor.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import logging
import re
from dataclasses import dataclass
from email.message import EmailMessage, Message


log = logging.getLogger(__name__)

_POLICY = email.policy.default
_SPACES = re.compile(r"[ \t]+")
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file a mail carries: listed by name, type and size, never inlined."""

    name: str
    media_type: str
    size: int  # bytes, decoded

    def describe(self) -> str:
        return f"{self.name} ({self.media_type}, {human_size(self.size)})"


@dataclass(frozen=True, slots=True)
class Mail:
    """The parts of a mail the agent uses."""

    uid: int
    from_address: str  # lower case, "" when the From line holds none
    from_display: str  # as written, e.g. 'Ana <ana@example.org>'
    to: tuple[str, ...]
    cc: tuple[str, ...]
    reply_to: tuple[str, ...]
    subject: str
    date: float | None  # seconds since the epoch, from the Date line
    date_text: str
    message_id: str  # '<…>' or ""
    references: tuple[str, ...]
    text: str  # the readable body (plain text, or HTML turned into text)
    attachments: tuple[Attachment, ...]
    size: int  # the raw mail, bytes

    def headline(self) -> str:
        """'from …, subject …' in one line, for lists and events."""
        return f"from {self.from_display or '(unknown sender)'}: {self.subject or '(no subject)'}"

    def attachment_list(self) -> str:
        return "; ".join(a.describe() for a in self.attachments) or "none"


def human_size(size: int) -> str:
    """Bytes in a short human form."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def parse_bytes(raw: bytes) -> EmailMessage:
    """The message object of raw mail bytes (the standard library's modern API)."""
    message = email.message_from_bytes(raw, policy=_POLICY)
    assert isinstance(message, EmailMessage)
    return message


def header(message: Message, name: str) -> str:
    """A header's decoded text, '' when absent or undecodable beyond repair."""
    try:
        value = message.get(name)
    except Exception:  # a header the parser cannot even recover: treated as absent
        log.debug("undecodable %s header", name, exc_info=True)
        return ""
    return " ".join(str(value).split()) if value is not None else ""


def addresses(message: Message, name: str) -> tuple[str, ...]:
    """The addresses of an address header, lower case, in order."""
    try:
        values = message.get_all(name) or []
        pairs = email.utils.getaddresses([str(v) for v in values])
    except Exception:
        return ()
    return tuple(a.strip().lower() for _, a in pairs if "@" in a)


def read_mail(uid: int, raw: bytes, message: EmailMessage | None = None) -> Mail:
    """The agent's view of one raw mail (`message`: the same, parsed already)."""
    message = message if message is not None else parse_bytes(raw)
    senders = addresses(message, "From")
    date_text = header(message, "Date")
    return Mail(
        uid=uid,
        from_address=senders[0] if senders else "",
        from_display=header(message, "From"),
        to=addresses(message, "To"),
        cc=addresses(message, "Cc"),
        reply_to=addresses(message, "Reply-To"),
        subject=header(message, "Subject"),
        date=_timestamp(date_text),
        date_text=date_text,
        message_id=_first_id(header(message, "Message-ID")),
        references=_ids(header(message, "References")),
        text=body_text(message),
        attachments=tuple(attachment_info(message)),
        size=len(raw),
    )


def _timestamp(text: str) -> float | None:
    if not text:
        return None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 5322 "-0000": the zone is unknown; UTC is the honest guess
        from datetime import timezone

        when = when.replace(tzinfo=timezone.utc)
    stamp = when.timestamp()
    return stamp if stamp > 0 else None


def _ids(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"<[^<>\s]+>", text))


def _first_id(text: str) -> str:
    found = _ids(text)
    return found[0] if found else ""


def body_text(message: EmailMessage) -> str:
    """The readable text of a mail: its plain part, or its HTML as text."""
    try:
        part = message.get_body(preferencelist=("plain", "html"))
    except Exception:
        part = None
    if part is None:
        return ""
    try:
        content = part.get_content()
    except Exception as exc:  # an unknown charset, a broken transfer encoding
        log.debug("undecodable body: %s", exc)
        payload = part.get_payload(decode=True) or b""
        content = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""
    if not isinstance(content, str):
        return ""
    if part.get_content_subtype() == "html":
        content = html_to_text(content)
    return tidy(content)


def html_to_text(html: str) -> str:
    """HTML as readable text (inscriptis keeps tables and lists legible)."""
    from inscriptis import get_text  # with lxml, MBs an idle agent does not need

    try:
        return get_text(html)
    except Exception:  # inscriptis on a pathological page: the tags stripped crudely
        return re.sub(r"<[^>]+>", " ", html)


def tidy(text: str) -> str:
    """Line ends normalised, trailing spaces and long blank runs removed."""
    lines = [_SPACES.sub(" ", line).rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def _attachment_parts(message: EmailMessage) -> list[EmailMessage]:
    parts = []
    for part in message.walk():
        if part.is_multipart():
            continue
        disposition = part.get_content_disposition()
        if disposition == "attachment" or (part.get_filename() and disposition != "inline") or (
            disposition == "inline" and part.get_filename()
            and part.get_content_maintype() not in ("text",)
        ):
            parts.append(part)
    return parts


def attachment_info(message: EmailMessage) -> list[Attachment]:
    """The files a mail carries (name, type, decoded size)."""
    found = []
    for number, part in enumerate(_attachment_parts(message), start=1):
        payload = part.get_payload(decode=True)
        size = len(payload) if isinstance(payload, bytes) else 0
        found.append(Attachment(_name(part, number), part.get_content_type(), size))
    return found


def attachment_bytes(raw: bytes, name: str) -> tuple[Attachment, bytes] | None:
    """The attachment called `name` and its decoded content, or None."""
    message = parse_bytes(raw)
    for number, part in enumerate(_attachment_parts(message), start=1):
        if _name(part, number) == name:
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
            return Attachment(name, part.get_content_type(), len(data)), data
    return None


def _name(part: EmailMessage, number: int) -> str:
    try:
        name = part.get_filename()
    except Exception:
        name = None
    # Only the last path component: a name is a label, never a place to write.
    name = (name or "").replace("\\", "/").rsplit("/", 1)[-1].strip()
    return name or f"attachment-{number}"
