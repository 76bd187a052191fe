"""Webhook settings: the `[webhook]` table of an agent's config.toml.

The tokens themselves are secrets: the table names them, and their values
come from `secrets.toml` or the environment. The intake is off by default,
and listens only on a loopback address unless `allow_remote` says otherwise.

A generic event may say how urgent it is. With the person's token that hint
is taken as given; an outside sender's hint is held to `outside_urgency_max`
(`priority` by default: it may ask to be seen soon, not to interrupt whatever
the agent is doing). The person's urgency rules still decide over any hint.

An intake that is on must have a usable token: with none set, or one set to
an empty or short value, the agent refuses to start and names the secret.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .events import CHANNEL_PATTERN, Urgency

SecretName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
SourceName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_.-]{0,63}$")]
Channel = Annotated[str, Field(pattern=CHANNEL_PATTERN.pattern)]

_LISTEN = re.compile(r"^(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[^:\[\]]+)):(?P<port>\d{1,5})$")


def split_listen(listen: str) -> tuple[str, int]:
    """`host:port` (`[::1]:port` for IPv6) as its host and port; ValueError if it is not one."""
    match = _LISTEN.match(listen)
    if match is None or not 0 <= int(match["port"]) <= 65535:
        raise ValueError(f"listen must be host:port, e.g. 127.0.0.1:8787, not {listen!r}")
    return match["v6"] or match["host"], int(match["port"])


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


class WebhookSettings(BaseModel):
    """The HTTP intake for events from outside (monitoring, scripts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    listen: str = "127.0.0.1:8787"
    allow_remote: bool = False  # listening beyond this machine must be asked for
    # The secret holding the person's own token: what is posted with it is authorised.
    person_token_secret: SecretName = "NOEMA_WEBHOOK_TOKEN"
    # Outside senders: the name each is known by, and the secret holding its token.
    sources: dict[SourceName, SecretName] = {}
    max_body_bytes: int = Field(256 * 1024, ge=1024, le=16 * 1024 * 1024)
    # A slow client is closed: its request's head must arrive within
    # head_timeout_s, its body within body_timeout_s after that.
    head_timeout_s: float = Field(10.0, gt=0, le=300)
    body_timeout_s: float = Field(15.0, gt=0, le=600)
    # Connections not yet past the token check, at once; past it the one that
    # has waited longest is closed, so a flood cannot crowd the token holder out.
    max_waiting_connections: int = Field(32, ge=2, le=1024)
    # The most urgent an outside sender's hint may make its event ("urgent"
    # lets any source with a token interrupt the agent); rules are not capped.
    outside_urgency_max: Literal["normal", "priority", "urgent"] = "priority"
    channel: Channel = "webhook"  # generic events
    alert_channel: Channel = "alertmanager"
    rejected_channel: Channel = "webhook.rejected"

    @field_validator("listen")
    @classmethod
    def _listen_is_host_port(cls, value: str) -> str:
        split_listen(value)
        return value

    @model_validator(mode="after")
    def _loopback_unless_allowed(self) -> WebhookSettings:
        host, _ = split_listen(self.listen)
        if not self.allow_remote and not is_loopback(host):
            raise ValueError(
                f"listen = {self.listen!r} is reachable from other machines; set "
                "allow_remote = true to mean it, or listen on 127.0.0.1")
        if len({self.channel, self.alert_channel, self.rejected_channel}) < 3:
            raise ValueError("the webhook's three channels must differ")
        return self

    @property
    def address(self) -> tuple[str, int]:
        return split_listen(self.listen)

    def granted_urgency(self, asked: Urgency, token: Token) -> Urgency:
        """The urgency hint an event keeps: the person's as asked, an outside
        sender's at most `outside_urgency_max`."""
        return asked if token.person else min(asked, Urgency(self.outside_urgency_max))


@dataclass(frozen=True, slots=True)
class Token:
    """A token that may post, and who posts with it."""

    value: bytes
    sender: str
    person: bool  # the person's own token: its events are authorised


MIN_TOKEN_CHARS = 16


class TokenProblem(ValueError):
    """The intake is on but its tokens cannot admit anyone safely; the message
    names the secret and the fix."""


def check_tokens(settings: WebhookSettings, secrets: dict[str, str]) -> None:
    """Refuse an intake with no usable token, or with a token that is set but
    empty, padded with spaces or too short to resist guessing."""
    named = [settings.person_token_secret, *sorted(set(settings.sources.values()))]
    fix = ("set it in secrets.toml or the environment to a long random value "
           "(e.g. the output of `openssl rand -hex 24`)")
    for name in named:
        if name not in secrets:
            continue
        value = secrets[name]
        if not value.strip():
            raise TokenProblem(f"the webhook token {name} is set but empty: {fix}, "
                               "or remove it")
        if value != value.strip():
            raise TokenProblem(f"the webhook token {name} has spaces around it, which no "
                               "Authorization header can carry: remove them")
        if len(value) < MIN_TOKEN_CHARS:
            raise TokenProblem(f"the webhook token {name} has {len(value)} characters; a token "
                               f"needs at least {MIN_TOKEN_CHARS}: {fix}")
    if not any(secrets.get(name) for name in named):
        raise TokenProblem(
            f"[webhook] enabled = true, but none of its tokens is set ({', '.join(named)}): "
            f"{fix}, or set [webhook] enabled = false")


def tokens_from(settings: WebhookSettings, secrets: dict[str, str]) -> list[Token]:
    """The tokens whose secrets are set (an unset or empty one admits nobody)."""
    out = []
    person = secrets.get(settings.person_token_secret, "")
    if person:
        out.append(Token(person.encode(), "person", True))
    for source, secret in sorted(settings.sources.items()):
        value = secrets.get(secret, "")
        if value:
            out.append(Token(value.encode(), source, False))
    return out
