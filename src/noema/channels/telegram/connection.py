"""The library's Bot, built from the settings and the token, and what its
errors mean for the person.

The token is part of every Bot API address, so a library that logs the
addresses it calls (httpx does, at INFO) would write it to the log: a filter
on those loggers replaces it before any handler sees the record.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .library import (
    Bot,
    Conflict,
    Forbidden,
    HTTPXRequest,
    InvalidToken,
    NetworkError,
    RetryAfter,
    create_ssl_context,
)
from .settings import TelegramSettings

_LIBRARIES = ("httpx", "httpcore", "telegram")
_OURS = tuple(f"{__package__}.{module}" for module in ("poller", "sender", "channel"))


class _Redact(logging.Filter):
    """Replaces the bot token in a log record with `<telegram token>`."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self.token in text:
            record.msg = text.replace(self.token, "<telegram token>")
            record.args = None
        return True


def build_bot(settings: TelegramSettings, token: str) -> Bot:
    """A Bot for `token` on the configured server (not yet initialised)."""
    # A filter applies to its own logger only, not to its children: each is named.
    known = logging.root.manager.loggerDict
    names = {*_LIBRARIES, *_OURS, "telegram.Bot", "telegram.request.BaseRequest",
             "telegram.request.HTTPXRequest",
             *(n for n in known if n.split(".")[0] in _LIBRARIES)}
    for name in sorted(names):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Redact) and f.token == token for f in logger.filters):
            logger.addFilter(_Redact(token))
    # One TLS context for both clients: each would otherwise load the
    # certificate authorities again (about 1 MB resident each).
    tls = {"verify": create_ssl_context()}
    return Bot(
        token, base_url=settings.api_url, base_file_url=settings.file_url,
        request=HTTPXRequest(connection_pool_size=4, connect_timeout=10, read_timeout=30,
                             write_timeout=30, media_write_timeout=60, httpx_kwargs=tls),
        # A long poll's own read timeout is this plus the poll's `timeout`.
        get_updates_request=HTTPXRequest(connection_pool_size=1, connect_timeout=10,
                                         read_timeout=10, httpx_kwargs=tls),
    )


@dataclass(frozen=True, slots=True)
class Trouble:
    """A failed call as the channel treats it."""

    kind: str  # "token", "forbidden", "conflict", "wait", "network"
    sentence: str
    wait_s: float | None = None  # what Telegram asked for (RetryAfter)


def trouble(exc: Exception, token_secret: str, token: str = "") -> Trouble | None:
    """What a library error means, or None for one that is not Telegram's (a bug).
    The sentence never holds the token (the library puts it in some messages)."""
    said = str(exc).replace(token, "<telegram token>") if token else str(exc)
    if isinstance(exc, InvalidToken):
        return Trouble("token", f"Telegram refused the bot token in {token_secret}. Set the "
                       "right token (from @BotFather) in secrets.toml or the environment and "
                       "restart the agent; until then Telegram is off")
    if isinstance(exc, Forbidden):  # the chat blocked the bot, or it was removed from a group
        return Trouble("forbidden", f"Telegram refused: {said}")
    if isinstance(exc, Conflict):
        return Trouble("conflict", f"Telegram says another program is reading this bot's "
                       f"messages ({said}); stop it (or delete the bot's webhook) so that "
                       "this agent receives them")
    if isinstance(exc, RetryAfter):
        wait = exc.retry_after
        seconds = wait.total_seconds() if hasattr(wait, "total_seconds") else float(wait)
        return Trouble("wait", f"Telegram asked to wait {seconds:.0f} s", seconds)
    if isinstance(exc, (NetworkError, OSError)):
        return Trouble("network", f"Telegram could not be reached ({said})")
    return None
