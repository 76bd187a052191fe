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

__all__ = ["TOOL_NAMES", "TelegramSettings", "build_telegram_channel"]

# The tools a configured channel offers, named without importing the library
# (for checking `[autonomy.tools]` entries against what is offered).
TOOL_NAMES = ("telegram_send", "telegram_save_file")


def build_telegram_channel(settings: TelegramSettings, ctx: ChannelContext) -> TelegramChannel:
    """The channel for the `[telegram]` section."""
    from .channel import TelegramChannel

    return TelegramChannel(settings, ctx)
