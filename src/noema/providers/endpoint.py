"""Where a model lives and how to reach it, as the adapters and their error
messages need it. The key is kept out of `repr` so it never reaches a log."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # loaded with the SDK, at the first request
    import httpx2


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One model at one server, with the credentials and timeouts to use."""

    provider: str  # catalog name, e.g. "openrouter"
    label: str  # for people, e.g. "OpenRouter"
    base_url: str
    model: str
    key_env: str | None = None  # the variable the key came from, for messages
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 120.0  # longest wait for the next bytes
    connect_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not self.base_url:
            raise ValueError("an endpoint needs a base_url")
        if not self.model:
            raise ValueError("an endpoint needs a model")
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ValueError("timeouts must be positive")

    @property
    def where(self) -> str:
        """How messages name the endpoint: 'OpenRouter at https://…'."""
        return f"{self.label} at {self.base_url}"

    def http_client(self, sdk_client: type[httpx2.AsyncClient]) -> httpx2.AsyncClient:
        """The SDK's own HTTP client class (its limits and defaults), told never
        to follow a redirect: httpx drops `Authorization` on a redirect to
        another origin but keeps Anthropic's `x-api-key`, so a server that
        redirects could hand the key to any address. A redirect is reported
        as the server's answer instead (`failures.py` says what to do)."""
        return sdk_client(follow_redirects=False, timeout=self.timeout())

    def timeout(self) -> httpx2.Timeout:
        """The SDKs' transport timeout: connecting, and waiting for each read."""
        import httpx2

        return httpx2.Timeout(self.timeout_s, connect=self.connect_timeout_s)
