"""What arrives from Telegram, as our own typed data, and how a burst of the
person's messages becomes one message to the agent.

A message the person forwards from someone else (`forward_origin`; the
older `forward_from`, `forward_from_chat` and `forward_sender_name` too)
holds that someone's words, not the person's: its `origin` names who wrote
it, and it reaches the agent as an outside event in that name
(`forwarded_text`), never inside the person's message. A forward of the
person's own message (from one of their chats) stays theirs.

Pure: no network, no storage. An `Incoming` is stored as JSON in the
channel's state file between its arrival and its submission.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ...perception.untrusted import escape_invisible
from .library import (
    Message,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
)

# /stop, /status@noema_bot …: a command is the whole message.
_COMMAND = re.compile(r"^/([a-z_]+)(?:@\w+)?\s*$", re.IGNORECASE)
NAME_CHARS = 100  # of a name or title in an origin


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
    origin: str = ""  # who wrote a forwarded message, as shown; "" for the person's own

    @property
    def command(self) -> str | None:
        """'stop' for '/stop' (a message that is only a command), else None. A
        forwarded "/stop" is someone else's text, never the person's command."""
        if self.attachments or self.origin:
            return None
        match = _COMMAND.match(self.text.strip())
        return match.group(1).lower() if match else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Incoming:
        found = tuple(Attachment(**a) for a in data.get("attachments", ()))
        return cls(data["update_id"], data["chat_id"], data["date"], data["text"], found,
                   data.get("origin", ""))


def incoming(update_id: int, message: Message,
             own_chats: frozenset[int] = frozenset()) -> Incoming:
    """Our record of a Telegram message (text, caption, attachments, and who wrote
    it when the person forwarded it; a forward from `own_chats` is the person's)."""
    return Incoming(update_id, message.chat.id, message.date.timestamp(),
                    message.text or message.caption or "", attachments_of(message),
                    origin_of(message, own_chats))


def origin_of(message: Message, own_chats: frozenset[int] = frozenset()) -> str:
    """Who wrote a forwarded message, in a few words ("" when it is not one,
    or forwards the person's own)."""
    origin = message.forward_origin
    if isinstance(origin, MessageOriginUser):
        user = origin.sender_user
        return "" if user.id in own_chats else _user(user.full_name, user.username, user.id)
    if isinstance(origin, MessageOriginHiddenUser):
        return f"{_shown(origin.sender_user_name)} (a Telegram user whose account is hidden)"
    if isinstance(origin, MessageOriginChat):
        return _chat("chat", origin.sender_chat, origin.author_signature)
    if isinstance(origin, MessageOriginChannel):
        return _chat("channel", origin.chat, origin.author_signature)
    if origin is not None:  # a kind of origin newer than this code
        return "someone else (a forwarded message)"
    # What older servers send; the library keeps fields it no longer knows here.
    extra = message.api_kwargs or {}
    user = extra.get("forward_from")
    if isinstance(user, dict):
        if user.get("id") in own_chats:
            return ""
        name = " ".join(str(user.get(k, "")) for k in ("first_name", "last_name")).strip()
        return _user(name, user.get("username"), user.get("id"))
    chat = extra.get("forward_from_chat")
    if isinstance(chat, dict):
        return (f"the {'channel' if chat.get('type') == 'channel' else 'chat'} "
                f"{_named(chat.get('title'), chat.get('username'), chat.get('id'))}")
    if extra.get("forward_sender_name") or extra.get("forward_date"):
        name = extra.get("forward_sender_name")
        return (f"{_shown(str(name))} (a Telegram user whose account is hidden)" if name
                else "someone else (a forwarded message)")
    return ""


def _shown(text: str | None) -> str:
    shown = escape_invisible(" ".join(str(text or "").split()))
    return shown if len(shown) <= NAME_CHARS else shown[:NAME_CHARS] + "…"


def _named(title: str | None, username: str | None, ident: object) -> str:
    handle = f"@{_shown(username)}, " if username else ""
    return f"\"{_shown(title) or '(no name)'}\" ({handle}id {ident})"


def _user(name: str | None, username: str | None, ident: object) -> str:
    handle = f"@{_shown(username)}, " if username else ""
    return f"{_shown(name) or '(no name)'} ({handle}Telegram user {ident})"


def _chat(kind: str, chat: Any, signature: str | None) -> str:
    shown = f"the {kind} {_named(chat.title, chat.username, chat.id)}"
    return shown + (f", signed \"{_shown(signature)}\"" if signature else "")


def forwarded_text(message: Incoming) -> str:
    """A forwarded message as the event that carries it: whose words, then them."""
    lines = [f"The person forwarded, in their Telegram chat, a message written by "
             f"{message.origin}: not the person's words."]
    if message.text.strip():
        lines.append(message.text)
    lines.extend(a.line() for a in message.attachments)
    return "\n".join(lines)


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


def runs(messages: Sequence[Incoming]) -> list[tuple[bool, list[Incoming]]]:
    """A burst cut into runs, in order: (True, the person's own messages), (False,
    messages they forwarded), alternating."""
    found: list[tuple[bool, list[Incoming]]] = []
    for message in messages:
        own = not message.origin
        if found and found[-1][0] == own:
            found[-1][1].append(message)
        else:
            found.append((own, [message]))
    return found


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
