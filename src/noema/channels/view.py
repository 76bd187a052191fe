"""How a channel looks from outside: the line `noema status` and the page show for it.

It lives with the channels, below the interfaces, so a channel can say how it is
without importing the attach protocol that carries the view."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ChannelView(BaseModel):
    """A channel (mail, Telegram…) as `noema status` shows it."""

    # The attach protocol's rules: a newer peer may add optional fields.
    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    state: str  # "connected", "connecting", "retrying in 8 s", "off"…
    detail: str = ""  # one line: the account, the last error, what was ignored
