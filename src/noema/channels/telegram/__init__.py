"""Telegram: the person's chats with the agent's bot (see `channel.py`).

The library is imported only when a channel is built, not when the
configuration is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .settings import TelegramSettings

if TYPE_CHECKING:
    from ..base import ChannelContext
    from .channel import TelegramChannel

__all__ = ["TelegramSettings", "build_telegram_channel"]


def build_telegram_channel(settings: TelegramSettings, ctx: ChannelContext) -> TelegramChannel:
    """The channel for the `[telegram]` section."""
    from .channel import TelegramChannel

    return TelegramChannel(settings, ctx)
