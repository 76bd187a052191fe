"""The `[mail]` section of an agent's configuration (one account)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class MailSettings(BaseModel):
    """One mail account: IMAP to hear and read, SMTP to send. Off while
    `imap_host` is unset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    imap_host: str | None = Field(None, description="The IMAP server, e.g. 'imap.example.org'.")
    allow_from: tuple[str, ...] = Field(
        (), description="The person's own addresses: mail from them is the person speaking.")

    @property
    def configured(self) -> bool:
        return self.imap_host is not None
