"""Web search over the backend the person configured: a SearXNG instance
(self-hosted, no key), the Brave Search API or Tavily.

Each backend is one record: how to ask it and how to read its answer into
results of title, address and snippet. The backend's address is the
person's choice, so it is not held to the fetch's address rules (a SearXNG
instance on localhost is the usual case).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..tools.errors import ToolError, shorten
from .settings import WebSettings

if TYPE_CHECKING:  # loaded at the first request, not at start
    import httpx2

MAX_RESULTS = 20


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One hit: its title, address and the backend's snippet (all outside text)."""

    title: str
    url: str
    snippet: str


@dataclass(frozen=True, slots=True)
class Backend:
    """How to ask one search service, and how to read its JSON answer."""

    name: str
    label: str
    request: Callable[[str, str, int, str | None], httpx2.Request]  # url, query, limit, key
    results: Callable[[Any], list[dict]]
    snippet_field: str


def _searxng_request(url: str, query: str, limit: int, key: str | None) -> httpx2.Request:
    import httpx2

    base = url.rstrip("/")
    endpoint = base if base.endswith("/search") else base + "/search"
    return httpx2.Request("GET", endpoint, params={"q": query, "format": "json"})


def _brave_request(url: str, query: str, limit: int, key: str | None) -> httpx2.Request:
    import httpx2

    headers = {"Accept": "application/json", "X-Subscription-Token": key or ""}
    return httpx2.Request("GET", url, params={"q": query, "count": limit}, headers=headers)


def _tavily_request(url: str, query: str, limit: int, key: str | None) -> httpx2.Request:
    import httpx2

    return httpx2.Request(
        "POST", url, json={"query": query, "max_results": limit},
        headers={"Authorization": f"Bearer {key or ''}"},
    )


BACKENDS: dict[str, Backend] = {
    "searxng": Backend("searxng", "SearXNG", _searxng_request,
                       lambda data: data.get("results") or [], "content"),
    "brave": Backend("brave", "Brave Search", _brave_request,
                     lambda data: (data.get("web") or {}).get("results") or [], "description"),
    "tavily": Backend("tavily", "Tavily", _tavily_request,
                      lambda data: data.get("results") or [], "content"),
}

_TAG = re.compile(r"<[^>]{0,200}>")


def _plain(text: Any) -> str:
    """A snippet without the markup some backends put in (Brave's <strong>)."""
    return " ".join(html.unescape(_TAG.sub("", str(text or ""))).split())


class Searcher:
    """Searches the configured backend with the key found in the secrets."""

    def __init__(self, settings: WebSettings, secrets: Mapping[str, str]) -> None:
        if settings.search is None:
            raise ValueError("no search backend is configured")
        self.backend = BACKENDS[settings.search]
        self.settings = settings
        key_env = settings.resolved_key_env
        self._key = (secrets.get(key_env) or "").strip() if key_env else None

    @property
    def provenance(self) -> str:
        return self.backend.label

    async def search(self, query: str, limit: int) -> list[SearchResult]:
        """At most `limit` results for `query`; a ToolError says what failed."""
        import httpx2

        s = self.settings
        url = s.resolved_search_url
        assert url is not None  # the settings guarantee an address for every backend
        request = self.backend.request(url, query, min(limit, MAX_RESULTS), self._key)
        timeout = httpx2.Timeout(s.read_timeout_s, connect=s.connect_timeout_s)
        label = self.backend.label
        try:
            async with httpx2.AsyncClient(
                timeout=timeout, proxy=s.proxy, trust_env=False
            ) as client:
                response = await client.send(request)
        except httpx2.TimeoutException:
            raise ToolError(f"{label} did not answer in time; try again later") from None
        except httpx2.TransportError as exc:
            reason = shorten(str(exc) or type(exc).__name__)
            raise ToolError(f"{label} could not be reached ({reason})") from None
        if response.status_code in (401, 403):
            raise ToolError(
                f"{label} refused the key (HTTP {response.status_code}); tell the person"
            )
        if response.status_code == 429:
            raise ToolError(
                f"{label} says too many searches were made; wait before searching again"
            )
        if response.status_code >= 400:
            raise ToolError(f"{label} answered HTTP {response.status_code}; try again later")
        try:
            data = response.json()
            raw = self.backend.results(data)
        except (ValueError, AttributeError):
            raise ToolError(f"{label} answered something other than search results") from None
        found = []
        for item in raw[:limit]:
            if isinstance(item, dict) and item.get("url"):
                found.append(SearchResult(
                    _plain(item.get("title")), str(item["url"]),
                    _plain(item.get(self.backend.snippet_field)),
                ))
        return found


def search_problem(settings: WebSettings, secrets: Mapping[str, str]) -> str | None:
    """Why web_search cannot be offered, or None when it can."""
    if settings.search is None:
        return "no search backend is configured ([web] search = 'searxng', 'brave' or 'tavily')"
    key_env = settings.resolved_key_env
    if key_env and not (secrets.get(key_env) or "").strip():
        return (
            f"{BACKENDS[settings.search].label} needs a key, but {key_env} is not set (in the "
            "environment or the agent's secrets.toml)"
        )
    return None
