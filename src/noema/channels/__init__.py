"""Channels: mail and chat, each both a voice of the person and a sense of the world.

A channel hears messages: those from the person's configured identities are
the person speaking (`Desk.submit`, the same path as a typed line); anything
else is outside data, emitted as events by the channel's sensors through the
hub and the orchestrator like any other sense. It may also act (its tools),
and it answers a question where it came from (`Channel.reply`, driven by
`replies.ReplyRouter`).
"""

from .base import Channel, ChannelContext, Desk
from .replies import ReplyRouter

__all__ = ["Channel", "ChannelContext", "Desk", "ReplyRouter"]
