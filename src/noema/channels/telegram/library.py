"""python-telegram-bot, loaded without two extras the channel never uses.

Every module of the channel takes the library's names from here, so the
first import of `telegram` in a process is this one. Importing it as is also
loads:

- `cryptography` (34 modules and a 6 MB native library), which the library
  imports only to decrypt Telegram Passport data;
- httpx's command-line client (`httpx._main`), which brings rich, pygments
  and click along.

Together they are 11 MB of the resident memory of an agent that runs for
weeks, for nothing: the channel reads messages and sends answers. Both
libraries expect these to be missing (each import sits in a `try` that
catches `ImportError`), so they are hidden for the time of this one import
and then shown again: a later `import cryptography` anywhere in the process
works as usual. One that is already loaded is not hidden.
"""

from __future__ import annotations

import importlib
import sys

UNUSED_EXTRAS = ("cryptography", "httpx._main")


def _import_without_extras() -> None:
    hidden = [name for name in UNUSED_EXTRAS if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # makes `import name` fail
    try:
        for module in ("telegram", "telegram.constants", "telegram.error",
                       "telegram.helpers", "telegram.request"):
            importlib.import_module(module)
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


_import_without_extras()

from httpx import create_ssl_context  # noqa: E402  (after the library: see above)
from telegram import (  # noqa: E402
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    Update,
)
from telegram.constants import MessageLimit, ParseMode  # noqa: E402
from telegram.error import (  # noqa: E402
    BadRequest,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
)
from telegram.helpers import escape_markdown  # noqa: E402
from telegram.request import HTTPXRequest  # noqa: E402

__all__ = [
    "UNUSED_EXTRAS", "BadRequest", "Bot", "Conflict", "Forbidden", "HTTPXRequest",
    "InlineKeyboardButton", "InlineKeyboardMarkup", "InvalidToken", "Message", "MessageLimit",
    "MessageOriginChannel", "MessageOriginChat", "MessageOriginHiddenUser", "MessageOriginUser",
    "NetworkError", "ParseMode", "RetryAfter",
    "Update", "create_ssl_context", "escape_markdown",
]
