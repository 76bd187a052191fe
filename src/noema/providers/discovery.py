"""What a model server says about itself: the models it serves, and the
context window it serves one with.

`noema setup` asks once, before anything is written, so that the model is
chosen from the server's own list and the window is the one the server
really holds rather than the model's nominal one. Each server says it in its
own place: Ollama in `/api/tags`, `/api/ps` and `/api/show`, llama.cpp in
`/props`, vLLM as `max_model_len` in `/v1/models` (OpenRouter and LM Studio
have their own fields there). Every failure is one line, `DiscoveryFailed`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .catalog import PROVIDERS

if TYPE_CHECKING:
    import httpx2

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 15.0
OLLAMA_SERVED_DEFAULT = 4096  # Ollama's num_ctx when nothing raises it (below 24 GiB of VRAM)
ANTHROPIC_VERSION = "2023-06-01"
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)
_WINDOW_FIELDS = ("max_model_len", "context_length", "context_window", "loaded_context_length",
                  "max_context_length")


class DiscoveryFailed(Exception):
    """The server could not be asked, or its answer could not be read; one line."""


class Unreachable(DiscoveryFailed):
    """The server did not answer at that address (nothing listens, or too slowly)."""


class KeyRefused(DiscoveryFailed):
    """The server answered 401 or 403: the key is missing or wrong."""


@dataclass(frozen=True, slots=True)
class Window:
    """A context window a server reported."""

    tokens: int
    source: str  # where the figure comes from, for the person
    note: str | None = None  # what the person should know about it

    def __post_init__(self) -> None:
        if self.tokens <= 0:
            raise ValueError("a context window is a positive number of tokens")


class ServerProbe:
    """Asks one server what it serves; use as an async context manager."""

    def __init__(self, provider: str, base_url: str, api_key: str | None = None, *,
                 timeout_s: float = READ_TIMEOUT_S) -> None:
        if provider not in PROVIDERS:
            raise ValueError(f"unknown provider {provider!r}")
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.label = PROVIDERS[provider].label
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._client: httpx2.AsyncClient | None = None

    async def __aenter__(self) -> ServerProbe:
        import httpx2

        self._client = httpx2.AsyncClient(
            headers=self._headers(),
            timeout=httpx2.Timeout(self._timeout_s, connect=CONNECT_TIMEOUT_S),
            follow_redirects=False,  # followed here, within the server's own origin only
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _headers(self) -> dict[str, str]:
        if not self._api_key:
            return {}
        if self.provider == "anthropic":
            return {"x-api-key": self._api_key, "anthropic-version": ANTHROPIC_VERSION}
        return {"Authorization": f"Bearer {self._api_key}"}

    @property
    def root(self) -> str:
        """The server's own address: the base URL without its `/v1`, where
        Ollama's and llama.cpp's native endpoints live."""
        return self.base_url.removesuffix("/v1")

    async def models(self) -> list[str]:
        """The names of the models the server serves, in its order."""
        lister = _LISTERS.get(self.provider, _openai_models)
        names = await lister(self)
        if not names:
            raise DiscoveryFailed(f"{self.label} at {self.base_url} serves no model yet"
                                  + (" (`ollama pull NAME` fetches one)"
                                     if self.provider == "ollama" else ""))
        return names

    async def window(self, model: str) -> Window | None:
        """The window the server serves `model` with; None when it does not say."""
        reader = _READERS.get(self.provider, _window_in_models)
        return await reader(self, model)

    # -- HTTP -----------------------------------------------------------------

    async def get_json(self, url: str, *, body: Any = None, missing_ok: bool = False) -> Any:
        """The JSON answer of GET (or POST with `body`) `url`; None for a 404 when
        `missing_ok`; DiscoveryFailed in one line for anything else that goes wrong."""
        import httpx2

        assert self._client is not None, "use the probe as an async context manager"
        method = "GET" if body is None else "POST"
        try:
            response = await self._same_origin(method, url, body)
        except httpx2.ConnectError as exc:
            raise Unreachable(f"cannot reach {self.label} at {url} ({_reason(exc)}); "
                                  "is the server running, at that address?") from None
        except httpx2.TimeoutException:
            raise Unreachable(f"{self.label} at {url} did not answer within "
                                  f"{self._timeout_s:g} s") from None
        except httpx2.HTTPError as exc:
            raise DiscoveryFailed(f"asking {self.label} at {url} failed ({_reason(exc)})") from None
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code in (401, 403):
            raise KeyRefused(f"{self.label} at {url} refused the request (HTTP "
                                  f"{response.status_code}): the key is missing or wrong")
        if response.status_code >= 400:
            raise DiscoveryFailed(f"{self.label} answered HTTP {response.status_code} to "
                                  f"{method} {url}")
        try:
            return response.json()
        except ValueError:
            raise DiscoveryFailed(f"{self.label} at {url} did not answer JSON") from None


    async def _same_origin(self, method: str, url: str, body: Any) -> httpx2.Response:
        """The answer to `method url`, following redirects that stay on the
        server's origin (scheme, host and port) and refusing any other.

        A server the person typed must not send the probe, and the key it
        carries (`Authorization` or Anthropic's `x-api-key`), to another
        address: an internal service's answer would then fill the page's list
        and be posted back to the first server."""
        assert self._client is not None
        origin = _origin(url)
        for _ in range(_MAX_REDIRECTS + 1):
            response = await self._client.request(method, url, json=body)
            if not response.is_redirect:
                return response
            target = str(response.url.join(response.headers["location"]))
            if _origin(target) != origin:
                raise DiscoveryFailed(
                    f"{self.label} at {url} redirected to another address ({_shown(target)}); "
                    "it was not followed, and no key was sent there. If that is the "
                    "server's real address, give it instead")
            if response.status_code in (301, 302, 303):
                method, body = "GET", None  # as browsers do: the body is not sent on
            url = target
        raise DiscoveryFailed(f"{self.label} at {url} redirects more than {_MAX_REDIRECTS} "
                              "times; giving up")


_MAX_REDIRECTS = 3


def _origin(url: str) -> tuple[str, str, int | None]:
    import httpx2

    parsed = httpx2.URL(url)
    return parsed.scheme, parsed.host, parsed.port or {"http": 80, "https": 443}.get(
        parsed.scheme)


def _shown(url: str) -> str:
    """An address as told to the person: its origin, not a path that may carry data."""
    import httpx2

    parsed = httpx2.URL(url)
    return f"{parsed.scheme}://{parsed.netloc.decode('ascii', 'replace')}"


def _reason(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    text = str(cause or exc) or type(exc).__name__
    return text.splitlines()[0][:200]


# -- model lists ------------------------------------------------------------------


async def _openai_models(probe: ServerProbe) -> list[str]:
    return [entry["id"] for entry in _entries(await probe.get_json(f"{probe.base_url}/models"),
                                              probe, "id")]


async def _anthropic_models(probe: ServerProbe) -> list[str]:
    base = probe.base_url if probe.base_url.endswith("/v1") else f"{probe.base_url}/v1"
    return [entry["id"] for entry in _entries(await probe.get_json(f"{base}/models"), probe, "id")]


async def _ollama_models(probe: ServerProbe) -> list[str]:
    answer = await probe.get_json(f"{probe.root}/api/tags")
    if not isinstance(answer, dict) or not isinstance(answer.get("models"), list):
        raise DiscoveryFailed(f"{probe.label}'s /api/tags answer has no list of models")
    return [m["name"] for m in answer["models"] if isinstance(m, dict)
            and isinstance(m.get("name"), str)]


def _entries(answer: Any, probe: ServerProbe, name_field: str) -> list[dict]:
    """The model entries of an OpenAI-style list (`{"data": [...]}`)."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise DiscoveryFailed(f"{probe.label}'s list of models is not in the expected "
                              'form ({"data": [...]})')
    return [e for e in data if isinstance(e, dict) and isinstance(e.get(name_field), str)]


_LISTERS: Mapping[str, Callable[[ServerProbe], Awaitable[list[str]]]] = MappingProxyType({
    "ollama": _ollama_models,
    "anthropic": _anthropic_models,
})


# -- windows ------------------------------------------------------------------


async def _window_in_models(probe: ServerProbe, model: str) -> Window | None:
    """A window field in the model's entry of `/v1/models` (vLLM's max_model_len,
    OpenRouter's context_length, …)."""
    if probe.provider == "anthropic":
        return None  # its list says no window; the catalogue's figure holds
    answer = await probe.get_json(f"{probe.base_url}/models")
    for entry in _entries(answer, probe, "id"):
        if entry["id"] != model:
            continue
        for name in _WINDOW_FIELDS:
            tokens = _positive(entry.get(name))
            if tokens:
                return Window(tokens, f"{probe.label}'s list of models ({name})")
    return None


async def _llamacpp_window(probe: ServerProbe, model: str) -> Window | None:
    """llama.cpp's `/props`: the window of its slots, `n_ctx`."""
    props = await probe.get_json(f"{probe.root}/props", missing_ok=True)
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        tokens = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
        tokens = tokens or _positive(props.get("n_ctx"))
        if tokens:
            return Window(tokens, "llama.cpp's /props (n_ctx)")
    return await _window_in_models(probe, model)


async def _ollama_window(probe: ServerProbe, model: str) -> Window | None:
    """What Ollama serves `model` with: the loaded model's window (`/api/ps`), else
    the model's own num_ctx parameter, else Ollama's default, never above the
    model's length (`/api/show` model info)."""
    running = await probe.get_json(f"{probe.root}/api/ps", missing_ok=True)
    for entry in (running or {}).get("models", []) if isinstance(running, dict) else []:
        if isinstance(entry, dict) and model in (entry.get("name"), entry.get("model")):
            tokens = _positive(entry.get("context_length"))
            if tokens:
                return Window(tokens, "Ollama's /api/ps (the model as loaded now)")
    shown = await probe.get_json(f"{probe.root}/api/show", body={"model": model})
    if not isinstance(shown, dict):
        return None
    parameters = shown.get("parameters")
    found = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    if found and int(found.group(1)) > 0:
        return Window(int(found.group(1)), "the model's num_ctx parameter (Ollama's /api/show)")
    info = shown.get("model_info")
    lengths = [_positive(v) for k, v in info.items() if k.endswith(".context_length")] \
        if isinstance(info, dict) else []
    length = next((n for n in lengths if n), None)
    if length is None:
        return None
    if length <= OLLAMA_SERVED_DEFAULT:
        return Window(length, "the model's length (Ollama's /api/show)")
    return Window(OLLAMA_SERVED_DEFAULT, "Ollama's default num_ctx", note=(
        f"the model holds {length:,} tokens, but Ollama serves {OLLAMA_SERVED_DEFAULT:,} unless "
        "told more (OLLAMA_CONTEXT_LENGTH=... ollama serve, or PARAMETER num_ctx in a "
        "Modelfile); give the window it then serves"))


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


_READERS: Mapping[str, Callable[[ServerProbe, str], Awaitable[Window | None]]] = MappingProxyType({
    "ollama": _ollama_window,
    "llamacpp": _llamacpp_window,
})


__all__ = ["DiscoveryFailed", "KeyRefused", "ServerProbe", "Unreachable", "Window"]
