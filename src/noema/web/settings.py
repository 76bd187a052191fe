"""The `[web]` section of an agent's configuration."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SearchBackend = Literal["searxng", "brave", "tavily"]

# Where each backend answers when the person names no address, and the
# variable that holds its key (SearXNG is self-hosted and needs none).
DEFAULT_SEARCH_URLS: dict[str, str] = {
    "brave": "https://api.search.brave.com/res/v1/web/search",
    "tavily": "https://api.tavily.com/search",
}
DEFAULT_KEY_ENVS: dict[str, str] = {"brave": "BRAVE_API_KEY", "tavily": "TAVILY_API_KEY"}

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def trusted_host(entry: str) -> str:
    """One `trusted_hosts` entry in the form the guard compares: lowercase,
    punycode for a Unicode name, no trailing dot; ValueError says what is wrong."""
    import idna  # the encoder httpx uses, so the name compares with what it sends

    text = entry.strip().lower().rstrip(".")
    wildcard = text.startswith("*.")
    name = text[2:] if wildcard else text
    if not name or any(c in name for c in "/:@?#[]*% \t"):
        raise ValueError(
            f"{entry!r} is not a host name; write only the name, like 'example.org' or "
            "'*.example.org', without http://, a port or a path"
        )
    try:
        ascii_name = idna.encode(name, uts46=True).decode("ascii")
    except idna.IDNAError as exc:
        raise ValueError(f"{entry!r} is not a valid host name ({exc})") from None
    labels = ascii_name.split(".")
    if len(labels) < 2 or not all(_HOST_LABEL.match(label) for label in labels):
        raise ValueError(
            f"{entry!r} is not a full host name; write one like 'example.org' (a top-level "
            "domain alone, or a name without a dot, is not accepted)"
        )
    return ("*." if wildcard else "") + ascii_name


class WebSettings(BaseModel):
    """Search backend, fetch limits, allowed private ranges and proxy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    search: SearchBackend | None = Field(
        None, description="The search backend ('searxng', 'brave', 'tavily'); none: no web_search."
    )
    search_url: str | None = Field(
        None, description="The backend's address (required for SearXNG: 'http://localhost:8888')."
    )
    search_key_env: str | None = Field(
        None, description="Name of the variable holding the backend's key (not the key itself)."
    )
    fetch: bool = Field(True, description="Offer web_get_content.")
    allow_ranges: tuple[str, ...] = Field(
        (), description="Address ranges the fetch may reach although private, e.g. '10.0.0.0/8'."
    )
    proxy: str | None = Field(None, description="An http://, https:// or socks5:// proxy.")
    connect_timeout_s: float = Field(10, gt=0, le=120)
    read_timeout_s: float = Field(20, gt=0, le=600, description="Longest wait for the next bytes.")
    total_timeout_s: float = Field(60, gt=0, le=1800, description="Longest time for one fetch.")
    max_bytes: int = Field(10_000_000, ge=1024, le=200_000_000, description="Response size cap.")
    max_redirects: int = Field(5, ge=0, le=5)
    page_chars: int = Field(8000, ge=500, le=100_000, description="Characters per page of text.")
    trusted_hosts: tuple[str, ...] = Field(
        (), description=(
            "Hosts the agent may send anything to in a web address it wrote itself, without "
            "asking: 'example.org' (that host only) or '*.example.org' (its subdomains, and "
            "itself). An address the conversation showed (the person's messages, search "
            "results, pages, mails, events) needs no entry here."
        ),
    )

    @field_validator("search_url", "proxy")
    @classmethod
    def _http_address(cls, value: str | None, info) -> str | None:
        if value is None:
            return None
        value = value.strip()
        schemes = ("http", "https", "socks5", "socks5h") if info.field_name == "proxy" else (
            "http", "https")
        parts = urlsplit(value)
        if parts.scheme not in schemes or not parts.hostname:
            raise ValueError(
                f"{info.field_name} must be an address starting with "
                f"{' or '.join(s + '://' for s in schemes)}"
            )
        return value

    @field_validator("search_key_env")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            # The value is not repeated: it may well be the key itself.
            raise ValueError(
                "search_key_env must be the NAME of the variable that holds the key "
                "(letters, digits and '_', e.g. BRAVE_API_KEY), not the key itself"
            )
        return value

    @field_validator("allow_ranges")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            try:
                ipaddress.ip_network(item.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"{item!r} is not an address range; write one like '10.0.0.0/8' or 'fd00::/8'"
                ) from None
        return tuple(item.strip() for item in value)

    @field_validator("trusted_hosts")
    @classmethod
    def _hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(trusted_host(item) for item in value)

    @model_validator(mode="after")
    def _searxng_has_address(self) -> WebSettings:
        if self.search == "searxng" and not self.search_url:
            raise ValueError(
                "search = 'searxng' needs search_url, the address of the SearXNG instance "
                "(e.g. 'http://localhost:8888')"
            )
        return self

    @property
    def allowed_networks(self) -> tuple[Network, ...]:
        return tuple(ipaddress.ip_network(item, strict=False) for item in self.allow_ranges)

    @property
    def resolved_search_url(self) -> str | None:
        if self.search is None:
            return None
        return self.search_url or DEFAULT_SEARCH_URLS.get(self.search)

    @property
    def resolved_key_env(self) -> str | None:
        if self.search is None:
            return None
        return self.search_key_env or DEFAULT_KEY_ENVS.get(self.search)
