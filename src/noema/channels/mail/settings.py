"""The `[mail]` section of an agent's configuration (one account)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Security = Literal["tls", "starttls", "none"]
ImapSecurity = Literal["tls", "none"]  # the IMAP client speaks implicit TLS only


class MailSettings(BaseModel):
    """One mail account: IMAP to hear and read, SMTP to send. Off while
    `imap_host` is unset. Passwords are never here: `password_env` names the
    secret (environment over secrets.toml) that holds it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    imap_host: str | None = Field(None, description="The IMAP server, e.g. 'imap.example.org'.")
    imap_port: int | None = Field(
        None, ge=1, le=65535, description="Default 993 with tls, 143 otherwise.")
    imap_security: ImapSecurity = Field(
        "tls", description="'tls' (implicit, port 993) or 'none' (a loopback server only).")
    smtp_host: str | None = Field(None, description="The SMTP server; default the IMAP host.")
    smtp_port: int | None = Field(
        None, ge=1, le=65535, description="Default 465 with tls, 587 with starttls, 25 none.")
    smtp_security: Security = Field("starttls", description="'tls', 'starttls' or 'none'.")
    username: str | None = Field(None, description="The login for IMAP and SMTP.")
    password_env: str = Field(
        "NOEMA_MAIL_PASSWORD", description="The secret holding the password.")
    address: str | None = Field(
        None, description="The agent's own address (From of what it sends); default username.")
    display_name: str = Field("", description="The name on the From line of what it sends.")
    folder: str = Field("INBOX", description="The folder the agent listens to.")
    allow_from: tuple[str, ...] = Field(
        (), description="The person's own addresses: mail from them is the person speaking.")
    authentication: Literal["auto", "require", "off"] = Field(
        "auto", description=(
            "How a mail from the person's address proves it: 'auto' requires a dkim, spf or "
            "auth pass when the server added Authentication-Results, and always once "
            "authserv_id is set; 'require' always does; 'off' trusts the From line."))
    authserv_id: str | None = Field(
        None, description="Whose Authentication-Results are trusted; default the IMAP host. "
                          "Set, it makes 'auto' require them.")
    known_recipients: tuple[str, ...] = Field(
        (), description="Addresses mail may go to without asking, besides allow_from and "
                        "those the person's own mails wrote with (saying 'always').")
    poll_interval: float = Field(
        60.0, gt=0, description="Seconds between looks when the server has no IDLE.")
    idle_renew: float = Field(
        20 * 60.0, gt=0, description="Seconds before an IDLE is renewed (servers drop ~30 min).")
    excerpt_chars: int = Field(400, ge=40, le=4000, description="A stranger's mail excerpt.")
    max_body_chars: int = Field(
        20_000, ge=1000, description="The person's mail body handed to the model, at most.")
    max_attachment_bytes: int = Field(
        25 * 1024 * 1024, ge=1, description="The largest attachment email_save_attachment writes.")
    timeout: float = Field(30.0, gt=0, description="Seconds for a server to answer.")

    @field_validator("allow_from", "known_recipients")
    @classmethod
    def _lower(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(a.strip().lower() for a in value if a.strip())

    @model_validator(mode="after")
    def _needs_login(self) -> MailSettings:
        if self.imap_host is not None and not self.username:
            raise ValueError("[mail] needs username (the login) when imap_host is set")
        return self

    @property
    def configured(self) -> bool:
        return self.imap_host is not None

    @property
    def imap_address(self) -> tuple[str, int]:
        default = 993 if self.imap_security == "tls" else 143
        return (self.imap_host or "", self.imap_port or default)

    @property
    def smtp_address(self) -> tuple[str, int]:
        default = {"tls": 465, "starttls": 587, "none": 25}[self.smtp_security]
        return (self.smtp_host or self.imap_host or "", self.smtp_port or default)

    @property
    def own_address(self) -> str:
        """The agent's address, lower case."""
        return (self.address or self.username or "").strip().lower()

    @property
    def authserv_configured(self) -> bool:
        """The person named the server whose results vouch (so 'auto' requires them)."""
        return bool((self.authserv_id or "").strip())

    @property
    def trusted_authserv_id(self) -> str:
        return (self.authserv_id or self.imap_host or "").strip().lower()
