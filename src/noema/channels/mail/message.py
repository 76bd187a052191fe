"""A mail as the agent reads it: who, what about, when, its text and the
files it carries, from the raw RFC 5322 bytes, with bounds.

Reading is one pass over the bytes, line by line, with an explicit stack of
MIME boundaries instead of recursion, so what a mail costs is bounded
whatever it holds:

- the header block: `MAX_HEADER_BYTES` and `MAX_FIELDS` at most; an
  address field over `MAX_FIELD_CHARS` is cut at an address and the ones
  left out are counted (`to_more`);
- nesting: `MAX_DEPTH` levels of multipart; deeper parts are passed over
  and said to be, never followed (a mail nested 1,000 deep keeps its
  sender and subject);
- parts: `MAX_PARTS`; attachments are listed (name, type, decoded size)
  and never held, their content only counted as it streams by, or written
  to a file when one is saved;
- the text: `MAX_TEXT_BYTES` of its part, decoded at the end.

What was left out is said in `Mail.notes`. Parsing never raises on a broken
mail: a header that cannot be decoded is kept as the raw text the standard
library recovered, a body part that cannot be decoded becomes a note.
"""

from __future__ import annotations

import binascii
import email
import email.policy
import email.utils
import io
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from email.header import decode_header, make_header
from email.parser import BytesHeaderParser
from typing import BinaryIO

log = logging.getLogger(__name__)

# Headers are kept raw (compat32) and decoded when read: the modern policy parses an
# address field each time it is read, about a millisecond per address.
_POLICY = email.policy.compat32
_SPACES = re.compile(r"[ \t]+")
_BLANK_RUNS = re.compile(r"\n{3,}")

MAX_HEADER_BYTES = 256 * 1024  # a mail's own header block (a part's: an eighth)
MAX_FIELDS = 2000  # header fields kept of a header block
MAX_FIELD_CHARS = 8 * 1024  # an address field parsed at most (about 300 addresses)
MAX_NAME_CHARS = 500  # of a sender's display name
MAX_LINE = 64 * 1024  # one read; a longer line is read in pieces
MAX_DEPTH = 20  # multipart levels followed
MAX_PARTS = 2000  # parts read; later ones are only counted
MAX_TEXT_BYTES = 2 * 1024 * 1024  # the encoded text part kept
MAX_ADDRESSES = 200  # addresses kept of one field
ADDRESS_FIELDS = ("from", "to", "cc", "bcc", "reply-to", "sender")


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
    from_display: str  # as written, decoded, e.g. 'Ana <ana@example.org>': never for display
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
    to_more: int = 0  # recipients (To and Cc) beyond those kept
    notes: tuple[str, ...] = ()  # what was left out of this reading, in words
    from_name: str = ""  # the display name of from_address, decoded ("Ana")
    from_others: tuple[str, ...] = ()  # the From line's other addresses: it should hold one


def human_size(size: int) -> str:
    """Bytes in a short human form."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def parse_bytes(raw: bytes) -> Message:
    """The headers of raw mail bytes as a message object (bounded; no body)."""
    headers, _ = _header_block(io.BytesIO(raw), MAX_HEADER_BYTES)
    return headers.message


def decoded(value: object) -> str:
    """A raw header value as text: encoded words decoded, 8-bit bytes read as UTF-8."""
    text = str(value)
    if any("\udc80" <= c <= "\udcff" for c in text):  # raw 8-bit bytes, as the parser kept them
        text = text.encode("ascii", "surrogateescape").decode("utf-8", "replace")
    if "=?" in text:
        try:
            text = str(make_header(decode_header(text)))
        except Exception:  # a broken encoded word: the raw text is what can be shown
            pass
    return " ".join(text.split())


def header(message: Message, name: str) -> str:
    """A header's decoded text, '' when absent or undecodable beyond repair."""
    try:
        value = message.get(name)
    except Exception:  # a header the parser cannot even recover: treated as absent
        log.debug("undecodable %s header", name, exc_info=True)
        return ""
    return decoded(value) if value is not None else ""


def addresses(message: Message, name: str) -> tuple[str, ...]:
    """The addresses of an address header, lower case, in order."""
    try:
        values = [str(v) for v in message.get_all(name) or []]
        pairs = email.utils.getaddresses([v[:MAX_FIELD_CHARS] for v in values])
    except Exception:
        return ()
    return tuple(a.strip().lower() for _, a in pairs if "@" in a)


def sender_name(message: Message) -> str:
    """The display name of the From line's first address, decoded: a name
    only, never read for an address (an encoded word may decode to
    "ana@example.org"; the address is what `addresses` finds)."""
    try:
        values = [str(v) for v in message.get_all("From") or []]
        pairs = email.utils.getaddresses([v[:MAX_FIELD_CHARS] for v in values])
    except Exception:
        return ""
    for name, address in pairs:
        if "@" in address:
            return decoded(name)[:MAX_NAME_CHARS]
    return ""


# -- the header block --------------------------------------------------------------


@dataclass
class _Headers:
    message: Message
    cut_addresses: int = 0  # addresses in the cut-off parts of long address fields
    notes: list[str] = field(default_factory=list)


def _read_line(stream: BinaryIO) -> bytes:
    return stream.readline(MAX_LINE)


def _header_block(stream: BinaryIO, limit: int) -> tuple[_Headers, bytes]:
    """The header fields up to the blank line (bounded), and the first body line
    when the block ended without one (a mail of headers only gives b"")."""
    fields: list[bytearray] = []
    size = 0
    dropped = 0
    lost = 0  # addresses in the dropped part of address fields
    keeping = True  # the field being read is kept (so far)
    address_field = False
    continuing = False  # the last read ended inside a line longer than MAX_LINE
    while True:
        line = _read_line(stream)
        if not line or (line in (b"\r\n", b"\n") and not continuing):
            break
        was_continuing, continuing = continuing, not line.endswith(b"\n")
        if (was_continuing or line[:1] in (b" ", b"\t")) and (fields or dropped):
            if keeping and fields and size + len(line) <= limit:
                fields[-1] += line
                size += len(line)
            else:
                keeping = False
                lost += line.count(b"@") if address_field else 0
            continue
        if b":" not in line[:1000] and not line.startswith(b"From "):
            # Not a header: the body started without a blank line.
            return _finish_headers(fields, dropped, lost), line
        name = line.split(b":", 1)[0].strip().lower()
        address_field = name.decode("ascii", "replace") in ADDRESS_FIELDS
        if size + len(line) > limit or len(fields) >= MAX_FIELDS:
            dropped += 1
            keeping = False
            lost += line.count(b"@") if address_field else 0
            continue
        keeping = True
        fields.append(bytearray(line))
        size += len(line)
    return _finish_headers(fields, dropped, lost), b""


def _finish_headers(fields: list[bytearray], dropped: int, lost: int = 0) -> _Headers:
    cut = lost
    kept = []
    for raw in fields:
        name = bytes(raw).split(b":", 1)[0].strip().lower().decode("ascii", "replace")
        if name in ADDRESS_FIELDS and len(raw) > MAX_FIELD_CHARS:
            head, tail = bytes(raw[:MAX_FIELD_CHARS]), bytes(raw[MAX_FIELD_CHARS:])
            comma = head.rfind(b",")
            if comma > 0:  # cut between two addresses
                head, tail = head[:comma], head[comma:] + tail
            cut += tail.count(b"@")
            raw = bytearray(head + b"\r\n")
        if not raw.endswith(b"\n"):
            raw += b"\r\n"
        kept.append(bytes(raw))
    try:
        message = BytesHeaderParser(policy=_POLICY).parsebytes(b"".join(kept) + b"\r\n")
    except Exception:  # the standard library's bug on a hostile header: no headers
        log.debug("unparsable header block", exc_info=True)
        message = Message(policy=_POLICY)
    headers = _Headers(message, cut)
    if dropped:
        headers.notes.append(f"{dropped} header fields beyond the first "
                             f"{human_size(MAX_HEADER_BYTES)} were left out")
    return headers


# -- the body, part by part ------------------------------------------------------------

Sink = Callable[[bytes], None]


class _Decoder:
    """Counts (and, with a sink, writes) a part's decoded content as it streams by."""

    def __init__(self, encoding: str, sink: Sink | None) -> None:
        self.encoding = encoding
        self.sink = sink
        self.size = 0
        self._carry = b""  # base64 characters short of a group of four
        self._eol = b""  # a line end held back: the one before a boundary is not content
        self._chars = 0  # base64 characters skimmed (see `skim`)
        self._pads = 0

    def feed(self, line: bytes) -> None:
        if self.encoding == "base64":
            data = self._carry + _B64_DROP.sub(b"", line)
            usable = len(data) - len(data) % 4
            self._carry = data[usable:]
            self._emit(_b64(data[:usable]))
            return
        body, eol = _split_eol(line)
        if self.encoding == "quoted-printable":
            soft = body.endswith(b"=")
            decoded = binascii.a2b_qp(body[:-1] if soft else body)
            self._emit(self._eol + decoded)
            self._eol = b"" if soft else eol
            return
        self._emit(self._eol + body)
        self._eol = eol

    def can_skim(self) -> bool:
        """Whether the content may be counted by blocks instead of decoded by lines."""
        return self.sink is None and self.encoding != "quoted-printable"

    def skim(self, block: bytes) -> None:
        """Count a block of content without decoding it (see `can_skim`)."""
        if not block:
            return
        if self.encoding == "base64":
            self._chars += len(block) - sum(block.count(c) for c in (b"\r", b"\n", b" ", b"\t"))
            self._pads += block.count(b"=")
            return
        body, eol = _split_eol(block)
        self.size += len(self._eol) + len(body)
        self._eol = eol

    def close(self) -> None:
        if self._chars:
            self.size += max(0, self._chars * 3 // 4 - self._pads)
            self._chars = self._pads = 0
        if self.encoding == "base64" and self._carry:
            padded = self._carry + b"=" * (-len(self._carry) % 4)
            self._emit(_b64(padded))
            self._carry = b""

    def _emit(self, data: bytes) -> None:
        if data:
            self.size += len(data)
            if self.sink is not None:
                self.sink(data)


_B64_DROP = re.compile(rb"[^A-Za-z0-9+/=]")


def _b64(data: bytes) -> bytes:
    try:
        return binascii.a2b_base64(data)
    except binascii.Error:  # padding in the middle, a lone character: what can be read
        bare = data.replace(b"=", b"")
        bare = bare[: len(bare) - len(bare) % 4 if len(bare) % 4 == 1 else len(bare)]
        try:
            return binascii.a2b_base64(bare + b"=" * (-len(bare) % 4))
        except binascii.Error:
            return b""


def _split_eol(line: bytes) -> tuple[bytes, bytes]:
    if line.endswith(b"\r\n"):
        return line[:-2], b"\r\n"
    if line.endswith(b"\n"):
        return line[:-1], b"\n"
    return line, b""


@dataclass
class _Part:
    """The part being read: what its headers said, and what is kept of it."""

    headers: Message
    number: int  # attachments are numbered from 1, for those with no name
    kind: str  # 'text' (a candidate for the body), 'attachment', 'skip'
    decoder: _Decoder | None = None
    text: bytearray | None = None
    text_cut: bool = False


@dataclass
class _Reading:
    """The state of one pass."""

    want: str | None  # the attachment to write out, by name
    sink: Sink | None
    attachments: list[Attachment] = field(default_factory=list)
    plain: tuple[Message, bytes, bool] | None = None
    html: tuple[Message, bytes, bool] | None = None
    parts: int = 0
    too_deep: int = 0
    too_many: int = 0
    found: Attachment | None = None


def _encoding(headers: Message) -> str:
    try:
        return str(headers.get("Content-Transfer-Encoding", "7bit")).strip().lower()
    except Exception:
        return "7bit"


def _content_type(headers: Message) -> str:
    try:
        return headers.get_content_type()
    except Exception:
        return "text/plain"


def _boundary(headers: Message) -> bytes | None:
    try:
        found = headers.get_boundary()
    except Exception:
        return None
    if not found:
        return None
    return found.encode("utf-8", "replace").rstrip()


def _is_attachment(headers: Message) -> bool:
    try:
        disposition = headers.get_content_disposition()
        filename = headers.get_filename()
    except Exception:
        return True  # unreadable: listed rather than read as text
    if disposition == "attachment":
        return True
    if filename and disposition != "inline":
        return True
    return bool(disposition == "inline" and filename
                and _content_type(headers).split("/")[0] != "text")


def _name(headers: Message, number: int) -> str:
    try:
        name = headers.get_filename()
        name = decoded(name) if name else name
    except Exception:
        name = None
    # Only the last path component: a name is a label, never a place to write.
    name = (name or "").replace("\\", "/").rsplit("/", 1)[-1].strip()
    return name or f"attachment-{number}"


def _start_part(reading: _Reading, headers: Message) -> _Part:
    reading.parts += 1
    kind = _content_type(headers)
    if reading.parts > MAX_PARTS:
        reading.too_many += 1
        return _Part(headers, 0, "skip")
    if _is_attachment(headers) or kind == "message/rfc822":
        number = len(reading.attachments) + 1
        name = _name(headers, number)
        sink = reading.sink if reading.want is not None and reading.found is None and (
            name == reading.want) else None
        part = _Part(headers, number, "attachment", _Decoder(_encoding(headers), sink))
        return part
    if kind in ("text/plain", "text/html") and (
            (kind == "text/plain" and reading.plain is None)
            or (kind == "text/html" and reading.html is None)):
        return _Part(headers, 0, "text", text=bytearray())
    return _Part(headers, 0, "skip")


def _feed(part: _Part, line: bytes) -> None:
    if part.kind == "attachment" and part.decoder is not None:
        part.decoder.feed(line)
    elif part.kind == "text" and part.text is not None:
        if len(part.text) + len(line) <= MAX_TEXT_BYTES:
            part.text += line
        else:
            part.text_cut = True


def _end_part(reading: _Reading, part: _Part | None) -> None:
    if part is None:
        return
    if part.kind == "attachment" and part.decoder is not None:
        part.decoder.close()
        found = Attachment(_name(part.headers, part.number), _content_type(part.headers),
                           part.decoder.size)
        reading.attachments.append(found)
        if part.decoder.sink is not None:
            reading.found = found
    elif part.kind == "text" and part.text is not None:
        kept = (part.headers, bytes(part.text), part.text_cut)
        if _content_type(part.headers) == "text/plain":
            reading.plain = reading.plain or kept
        else:
            reading.html = reading.html or kept


SKIM_BYTES = 256 * 1024


def _skim(stream: BinaryIO, stack: list[bytes], count: Callable[[bytes], None]) -> None:
    """Pass over content by blocks up to the next line that is one of the boundaries
    of `stack` (the stream is left at its start) or the end; `count` gets the content.
    An attachment's megabytes are not worth a Python step per line."""
    marks = {b"--" + b for b in stack} | {b"--" + b + b"--" for b in stack}
    while True:
        start = stream.tell()
        block = stream.read(SKIM_BYTES)
        if not block:
            return
        at = 0 if block.startswith(b"--") else _dashes(block, 0)
        while at != -1:
            end = block.find(b"\n", at)
            if end == -1 and at > 0 and len(block) == SKIM_BYTES:
                break  # the line goes on in the next block: read again from its start
            if block[at:end if end != -1 else len(block)].rstrip() in marks:
                count(block[:at])
                stream.seek(start + at)
                return
            at = _dashes(block, at + 1)
        if at == -1:
            count(block)
        else:
            count(block[:at])
            stream.seek(start + at)


def _dashes(block: bytes, after: int) -> int:
    """Where the next line starting with "--" begins in `block`, or -1."""
    found = block.find(b"\n--", after)
    return found + 1 if found != -1 else -1


def _walk(stream: BinaryIO, top: Message, first: bytes, reading: _Reading) -> None:
    """One pass over the body, with the boundaries on an explicit stack."""
    stack: list[bytes] = []
    part: _Part | None = None
    boundary = _boundary(top) if _content_type(top).startswith("multipart/") else None
    if boundary is not None:
        stack.append(boundary)
    else:
        part = _start_part(reading, top)
    line = first or _read_line(stream)
    while line:
        if stack and line.startswith(b"--"):
            mark = line.rstrip()
            level = next((i for i in range(len(stack) - 1, -1, -1)
                          if mark in (b"--" + stack[i], b"--" + stack[i] + b"--")), None)
            if level is not None:
                _end_part(reading, part)
                part = None
                closing = mark.endswith(b"--") and mark != b"--" + stack[level]
                del stack[level + 1:]
                if closing:
                    stack.pop()  # the container ends; its epilogue is skipped
                    line = _read_line(stream)
                    continue
                headers, line = _header_block(stream, MAX_HEADER_BYTES // 8)
                message = headers.message
                inner = _boundary(message) if _content_type(message).startswith(
                    "multipart/") else None
                if inner is not None:
                    if len(stack) >= MAX_DEPTH:
                        reading.too_deep += 1  # passed over: its lines match no boundary kept
                    else:
                        stack.append(inner)
                else:
                    part = _start_part(reading, message)
                if not line:
                    line = _read_line(stream)
                continue
        if part is not None:
            _feed(part, line)
            if part.kind == "attachment" and part.decoder is not None and (
                    part.decoder.can_skim()):
                _skim(stream, stack, part.decoder.skim)
            elif part.kind == "skip" or (part.kind == "text" and part.text_cut):
                _skim(stream, stack, lambda block: None)
        line = _read_line(stream)
    _end_part(reading, part)


# -- the mail ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reading:
    """One mail read: the agent's view, and its headers for the checks."""

    mail: Mail
    headers: Message


def scan(uid: int, stream: BinaryIO, size: int, *, partial: bool = False,
         want: str | None = None, sink: Sink | None = None) -> Reading:
    """Read one mail from `stream` (its `size` bytes in all; `partial` when the
    stream holds only its beginning). With `want`, the attachment of that name
    is decoded into `sink` as it streams by."""
    headers, first = _header_block(stream, MAX_HEADER_BYTES)
    message = headers.message
    reading = _Reading(want, sink)
    notes = list(headers.notes)
    try:
        _walk(stream, message, first, reading)
    except Exception as exc:  # a shape the walk did not foresee: what was read stands
        log.warning("mail uid %d: reading stopped at %s", uid, exc, exc_info=True)
        notes.append(f"reading stopped early ({type(exc).__name__})")
    if reading.too_deep:
        notes.append(f"{reading.too_deep} parts nested deeper than {MAX_DEPTH} levels "
                     "were not read")
    if reading.too_many:
        notes.append(f"{reading.too_many} parts beyond the first {MAX_PARTS} were not read")
    if partial:
        notes.append(f"only the first {human_size(stream.tell())} of {human_size(size)} "
                     "were read here")
    text, cut = _body(reading)
    if cut:
        notes.append(f"the text was cut at {human_size(MAX_TEXT_BYTES)}")
    senders = addresses(message, "From")
    to, cc = addresses(message, "To"), addresses(message, "Cc")
    more = headers.cut_addresses + max(0, len(to) - MAX_ADDRESSES) + max(
        0, len(cc) - MAX_ADDRESSES)
    date_text = header(message, "Date")
    mail = Mail(
        uid=uid,
        from_address=senders[0] if senders else "",
        from_display=header(message, "From")[:1000],
        to=to[:MAX_ADDRESSES],
        cc=cc[:MAX_ADDRESSES],
        reply_to=addresses(message, "Reply-To")[:MAX_ADDRESSES],
        subject=header(message, "Subject"),
        date=_timestamp(date_text),
        date_text=date_text[:200],
        message_id=_first_id(header(message, "Message-ID")[:2000]),
        references=_ids(header(message, "References")[:20_000])[-100:],
        text=text,
        attachments=tuple(reading.attachments),
        size=size,
        to_more=more,
        notes=tuple(notes),
        from_name=sender_name(message),
        from_others=senders[1:MAX_ADDRESSES],
    )
    return Reading(mail, message)


def read_mail(uid: int, raw: bytes, message: Message | None = None) -> Mail:
    """The agent's view of one raw mail held in memory (`message` is ignored:
    the headers are read again, within bounds)."""
    return scan(uid, io.BytesIO(raw), len(raw)).mail


def attachment_bytes(raw: bytes, name: str) -> tuple[Attachment, bytes] | None:
    """The attachment called `name` and its decoded content, or None."""
    out = bytearray()
    reading = _find(io.BytesIO(raw), name, out.extend)
    return (reading, bytes(out)) if reading is not None else None


def save_attachment(stream: BinaryIO, name: str, sink: Sink) -> Attachment | None:
    """Decode the attachment called `name` from a mail in `stream` into `sink`."""
    return _find(stream, name, sink)


def _find(stream: BinaryIO, name: str, sink: Sink) -> Attachment | None:
    headers, first = _header_block(stream, MAX_HEADER_BYTES)
    reading = _Reading(name, sink)
    _walk(stream, headers.message, first, reading)
    return reading.found


def _body(reading: _Reading) -> tuple[str, bool]:
    chosen = reading.plain or reading.html
    if chosen is None:
        return "", False
    headers, raw, cut = chosen
    out = bytearray()
    decoder = _Decoder(_encoding(headers), out.extend)
    for line in raw.splitlines(keepends=True):
        decoder.feed(line)
    decoder.close()
    try:
        charset = headers.get_content_charset() or "utf-8"
        content = bytes(out).decode(charset, errors="replace")
    except (LookupError, Exception):  # an unknown charset
        content = bytes(out).decode("utf-8", errors="replace")
    if chosen is reading.html and reading.plain is None:
        from .html_text import html_to_text

        content = html_to_text(content)
    return tidy(content), cut


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
    try:
        stamp = when.timestamp()
    except (OverflowError, ValueError, OSError):
        return None
    return stamp if stamp > 0 else None


def _ids(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"<[^<>\s]+>", text))


def _first_id(text: str) -> str:
    found = _ids(text)
    return found[0] if found else ""


def tidy(text: str) -> str:
    """Line ends normalised, trailing spaces and long blank runs removed."""
    lines = [_SPACES.sub(" ", line).rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()
