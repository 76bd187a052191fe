"""The `[telegram]` section of an agent's configuration.

    [telegram]
    chat_ids = [123456789]                  # the person's chats; empty = off
    token_secret = "TELEGRAM_BOT_TOKEN"     # the secret holding the bot token
    quiet_window_s = 0.6                    # a burst of messages becomes one
    max_hold_s = 10.0                       # ...but a steady stream still goes on
    # base_url = "http://127.0.0.1:8081"    # another Bot API server (local or a test's)

The token itself is never here: it is read from the environment or
secrets.toml under the name `token_secret` gives.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class TelegramSettings(BaseModel):
    """A Telegram bot the person talks to. Off while `chat_ids` is empty."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chat_ids: tuple[int, ...] = Field(
        (), description="The person's chats: a message there is the person speaking.")
    token_secret: str = Field(
        "TELEGRAM_BOT_TOKEN", min_length=1,
        description="The name of the secret (environment or secrets.toml) holding the bot token.")
    base_url: str = Field(
        "https://api.telegram.org", pattern=r"^https?://[^\s/]+(/[^\s]*)?$",
        description="The Bot API server: Telegram's, or a local Bot API server.")
    # Short, so that an answer starts within a second; a piece of the burst
    # that comes later is a message while busy, which by default restarts a
    # thought that has done nothing yet with both (a safe cancellation).
    quiet_window_s: float = Field(
        0.6, ge=0, le=60,
        description="Messages closer together than this become one message to the agent.")
    max_hold_s: float = Field(
        10.0, gt=0, le=600,
        description="The longest a burst is held back while it keeps coming.")
    poll_timeout_s: int = Field(
        30, ge=1, le=50, description="How long one long poll waits for news.")
    max_file_mb: int = Field(
        20, ge=1, le=2000, description="The largest attachment telegram_save_file downloads.")

    @model_validator(mode="after")
    def _hold_covers_window(self) -> TelegramSettings:
        if self.max_hold_s < self.quiet_window_s:
            raise ValueError("max_hold_s must be at least quiet_window_s")
        return self

    @property
    def configured(self) -> bool:
        return bool(self.chat_ids)

    @property
    def api_url(self) -> str:
        """The method prefix the library's Bot takes (the token follows it)."""
        return self.base_url.rstrip("/") + "/bot"

    @property
    def file_url(self) -> str:
        """The download prefix the library's Bot takes (the token follows it)."""
        return self.base_url.rstrip("/") + "/file/bot"
