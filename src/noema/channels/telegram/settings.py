"""The `[telegram]` section of an agent's configuration."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TelegramSettings(BaseModel):
    """A Telegram bot the person talks to. Off while `chat_ids` is empty."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chat_ids: tuple[int, ...] = Field(
        (), description="The person's chats: a message there is the person speaking.")

    @property
    def configured(self) -> bool:
        return bool(self.chat_ids)
