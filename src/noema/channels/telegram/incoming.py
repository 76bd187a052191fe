"""What arrives from Telegram, as our own typed data, and how a burst of the
person's messages becomes one message to the agent.

Pure: no network, no storage. An `Incoming` is stored as JSON in the
channel's state file between its arrival and its submission.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .library import Message

# /stop, /status@noema_bot …: a command is the whole message.
_COMMAND = re.compile(r"^/([a-z_]+)(?:@\w+)?\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Attachment:
    """A photo or file the person sent: enough to name it and to fetch it."""

    kind: str  # "photo", "document", "audio", "video", "voice"
    name: str
    mime: str
    size: int | None
    file_id: str

    def line(self) -> str:
        """How the agent sees it in the person's message."""
        size = "size unknown" if self.size is None else _size(self.size)
        return (f"[attached {self.kind} {self.name!r} ({self.mime}, {size}), file_id "
                f"{self.file_id}: telegram_save_file(file_id, path) saves it]")


@dataclass(frozen=True, slots=True)
class Incoming:
    """One message from one of the person's chats."""

    update_id: int
    chat_id: int
    date: float  # when Telegram received it, seconds since the epoch
    text: str  # the text, or a photo's or file's caption
    attachments: tuple[Attachment, ...] = ()

    @property
    def command(self) -> str | None:
        """'stop' for '/stop' (a message that is only a command), else None."""
        match = _COMMAND.match(self.text.strip()) if not self.attachments else None
        return match.group(1).lower() if match else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Incoming:
        found = tuple(Attachment(**a) for a in data.get("attachments", ()))
        return cls(data["update_id"], data["chat_id"], data["date"], data["text"], found)


def incoming(update_id: int, message: Message) -> Incoming:
    """Our record of a Telegram message (text, caption, attachments)."""
    return Incoming(update_id, message.chat.id, message.date.timestamp(),
                    message.text or message.caption or "", attachments_of(message))


def attachments_of(message: Message) -> tuple[Attachment, ...]:
    """The photo (its largest size) and files a message carries."""
    found: list[Attachment] = []
    if message.photo:
        best = max(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        found.append(Attachment("photo", f"photo_{best.file_unique_id}.jpg", "image/jpeg",
                                best.file_size, best.file_id))
    for kind, default_mime, extension in _FILE_KINDS:
        item = getattr(message, kind, None)
        if item is None:
            continue
        name = getattr(item, "file_name", None) or f"{kind}_{item.file_unique_id}{extension}"
        found.append(Attachment(kind, name, getattr(item, "mime_type", None) or default_mime,
                                item.file_size, item.file_id))
    return tuple(found)


# (attribute of a Message, its MIME type when Telegram gives none, the name's extension)
_FILE_KINDS = (
    ("document", "application/octet-stream", ""),
    ("audio", "audio/mpeg", ".mp3"),
    ("video", "video/mp4", ".mp4"),
    ("voice", "audio/ogg", ".ogg"),
    ("video_note", "video/mp4", ".mp4"),
)


def utterance(messages: Sequence[Incoming]) -> str:
    """A burst of the person's messages as the one message the agent receives:
    the texts in order, one per line, each followed by its attachments."""
    lines: list[str] = []
    for message in messages:
        if message.text.strip():
            lines.append(message.text)
        lines.extend(a.line() for a in message.attachments)
    return "\n".join(lines)


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"
