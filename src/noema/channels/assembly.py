"""The channels an agent's configuration turns on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Channel, ChannelContext

if TYPE_CHECKING:
    from ..config import Config


def build_channels(config: Config, around: ChannelContext) -> list[Channel]:
    """Mail and Telegram, each when its section is filled in."""
    channels: list[Channel] = []
    if config.mail.configured:
        from .mail import build_mail_channel

        channels.append(build_mail_channel(config.mail, around))
    if config.telegram.configured:
        from .telegram import build_telegram_channel

        channels.append(build_telegram_channel(config.telegram, around))
    return channels
