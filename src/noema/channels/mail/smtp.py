"""Sending over SMTP (aiosmtplib): TLS as the settings say, a login when
the server offers one and a password is set."""

from __future__ import annotations

import asyncio

from .settings import MailSettings


class MailSendError(Exception):
    """The SMTP server could not be reached or refused the mail."""


async def send(settings: MailSettings, password: str, message: bytes, sender: str,
               recipients: tuple[str, ...]) -> None:
    """Hand `message` to the SMTP server for `recipients`; MailSendError on failure."""
    import aiosmtplib  # loaded on the first send: an idle agent does not carry it

    host, port = settings.smtp_address
    client = aiosmtplib.SMTP(
        hostname=host, port=port, timeout=settings.timeout,
        use_tls=settings.smtp_security == "tls",
        start_tls=True if settings.smtp_security == "starttls" else False,
    )
    try:
        async with client:
            if password and client.supports_extension("auth"):
                await client.login(settings.username or sender, password)
            errors, _ = await client.sendmail(sender, list(recipients), message)
    except (aiosmtplib.SMTPException, OSError, asyncio.TimeoutError) as exc:
        raise MailSendError(f"the SMTP server {host}:{port} did not take the mail "
                            f"({type(exc).__name__}: {exc})") from None
    if errors:  # some recipients refused, the others accepted
        refused = ", ".join(f"{who} ({code} {text})" for who, (code, text) in errors.items())
        raise MailSendError(f"the SMTP server refused some recipients: {refused}")
