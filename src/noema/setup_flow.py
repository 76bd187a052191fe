"""The first run's steps, from nothing to a model that answers, with no
interface of their own: `noema setup` asks them in a terminal, the web page's
first-run form asks them in fields.

The person picks a provider from the catalogue, the server's address when it
is one they run, and a model from the list the server itself gives; the
context window is read from the server where it says it. A key typed for the
setup goes to `secrets.toml` (mode 600), never to `config.toml`. A live
request, which offers the model a tool, shows that the model answers and can
call tools. Writing is the last step: the secret first, the configuration
last, so a setup cut short leaves the previous configuration in force.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from . import config as configuration
from .config import ConfigError
from .paths import AgentPaths
from .providers.base import BadRequest, EmptyAnswer, Message, MessageRole, ModelRequest, \
    ProtocolViolation, ProviderError, ProviderUnavailable, ResponseBuilder, TextDelta, \
    ToolCallDelta, ToolSpec
from .providers.catalog import DEFAULT_CONTEXT_WINDOW, PROVIDERS, ProviderSpec
from .providers.counting import server_root
from .providers.discovery import DiscoveryFailed, ServerProbe, Unreachable, Window
from .providers.failures import server_window
from .providers.settings import ModelSettings

TEST_TIMEOUT_S = 90.0  # a small local model may take its time to load
BUSY_CHECK_S = 10.0  # a server that does not list its models within this is busy
# The window assumed for a server of one's own that does not say its own: a
# small one, which a server started for chat takes (a request larger than
# the server's window is refused; a smaller one only leaves room unused).
SAFE_LOCAL_WINDOW = 4_096
# Tokens past any window a server of one's own runs (2**20): a request this
# long is refused, naming the window, before it is read.
PAST_ANY_WINDOW = (1 << 20) + 1
REFUSAL_TIMEOUT_S = 60.0
# Offered by the setup, in this order; the scripted model is for rehearsals, set by hand.
CHOICES = ("ollama", "llamacpp", "vllm", "lmstudio", "openai", "anthropic", "openrouter",
           "deepseek", "openai-compatible")
PROBE_TOOL = ToolSpec(
    name="report_ready",
    description="Tell the person that the setup works. Call it with the word 'ready'.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}},
                "required": ["word"]},
)
_PROBE_MESSAGE = "This is a setup check. Call the report_ready tool with word = \"ready\"."


class SetupFailed(Exception):
    """The setup cannot go on; the message says why and what to do. Nothing was written."""


@dataclass(frozen=True, slots=True)
class Answers:
    """What the person chose, before anything is written."""

    provider: str
    model: str = ""
    base_url: str | None = None  # None: the catalogue's address
    context_window: int | None = None  # None: the catalogue's figure
    api_key_env: str | None = None  # None: the catalogue's variable
    key: str | None = None  # typed during setup, for secrets.toml; never in config.toml

    @property
    def spec(self) -> ProviderSpec:
        return PROVIDERS[self.provider]

    @property
    def address(self) -> str:
        address = self.base_url or self.spec.base_url
        if address is None:
            raise SetupFailed(f"{self.spec.label} has no default address: give the server's "
                              "(e.g. http://localhost:8000/v1; `noema setup --base-url`)")
        return address

    @property
    def key_env(self) -> str | None:
        return self.api_key_env or self.spec.key_env

    def table(self) -> dict[str, Any]:
        """`[models.reasoning]` as it will be written (defaults left out)."""
        return {
            "provider": self.provider,
            "model": self.model,
            "base_url": self.base_url if self.base_url != self.spec.base_url else None,
            "api_key_env": self.api_key_env if self.api_key_env != self.spec.key_env else None,
            "context_window": self.context_window,
        }


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the live request showed."""

    answered: str  # the text, shortened
    called_tool: bool


def local(spec: ProviderSpec) -> bool:
    """A server the person runs: it has no key of its own and an address to confirm."""
    return not spec.key_required


def key_name(answers: Answers) -> str:
    """Where a key typed for these answers is kept: the provider's variable, or
    one named after it for a server that has none."""
    return answers.key_env or f"{answers.provider.upper().replace('-', '_')}_API_KEY"


def secrets_with(paths: AgentPaths, answers: Answers) -> dict[str, str]:
    """The secrets as the agent will see them once the setup is written."""
    secrets = configuration.load_secrets(paths)
    if answers.key and answers.key_env:
        secrets[answers.key_env] = answers.key
    return secrets


def sendable(secrets: Mapping[str, str], answers: Answers,
             configured: Iterable[ModelSettings] = ()) -> dict[str, str]:
    """The secrets the server of these answers may be sent. A key typed with
    them goes; a kept one only to an address it already goes to: its provider's
    own, or that of a configured model that names its variable. An address
    typed now gets no key but the one typed with it."""
    found = dict(secrets)
    env = answers.key_env
    if answers.key and env:
        found[env] = answers.key
    elif env:
        known = {spec.base_url for spec in PROVIDERS.values() if spec.key_env == env}
        known |= {s.resolved_base_url for s in configured if s.resolved_key_env == env}
        if answers.address.rstrip("/") not in {a.rstrip("/") for a in known if a}:
            found.pop(env, None)
    return found


def with_api_path(answers: Answers) -> tuple[Answers, str | None]:
    """A server's bare address (http://host:11434) with the `/v1` its catalogue
    address has, since the chat requests go there and not to the server's root;
    and a line saying so, when it was added."""
    default = answers.spec.base_url
    if answers.base_url is None or default is None or not default.endswith("/v1"):
        return answers, None
    if urlsplit(answers.base_url).path not in ("", "/"):
        return answers, None
    url = answers.base_url.rstrip("/") + "/v1"
    return (replace(answers, base_url=url),
            f"address: {url} (the server's OpenAI-compatible API is under /v1)")


async def served_models(answers: Answers, secrets: Mapping[str, str]) -> list[str]:
    """The models the server serves, in its order; DiscoveryFailed in one line."""
    key = secrets.get(answers.key_env) if answers.key_env else None
    async with ServerProbe(answers.provider, answers.address, key) as probe:
        return await probe.models()


async def served_window(answers: Answers, secrets: Mapping[str, str]) -> Window | None:
    """The window the server serves the model with; None when it does not say."""
    key = secrets.get(answers.key_env) if answers.key_env else None
    async with ServerProbe(answers.provider, answers.address, key) as probe:
        window = await probe.window(answers.model)
    if window is None and answers.provider == "llamacpp":
        window = await window_from_refusal(answers.address, answers.model, key)
    return window


async def window_from_refusal(address: str, model: str, key: str | None) -> Window | None:
    """The window llama.cpp's Python server runs, which it says nowhere but in
    its refusal of a request longer than it: a request past any window a
    server of one's own runs is refused before a word of it is read (a few
    seconds of counting, nothing generated). Asked only of a server that
    answers that server's own count route; None otherwise."""
    import httpx2

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    unit = "a "
    try:
        async with httpx2.AsyncClient(headers=headers, timeout=REFUSAL_TIMEOUT_S,
                                      follow_redirects=False) as client:
            counted = await client.post(server_root(address) + "/extras/tokenize/count",
                                        json={"input": unit * 1000, "model": model})
            count = counted.json().get("count") if counted.status_code == 200 else None
            if not isinstance(count, int) or count <= 0:
                return None  # not that server: it would read the request, not refuse it
            units = -(-PAST_ANY_WINDOW * 1000 // count)
            refused = await client.post(address.rstrip("/") + "/chat/completions", json={
                "model": model, "max_tokens": 1,
                "messages": [{"role": "user", "content": unit * units}]})
    except (httpx2.HTTPError, ValueError, AttributeError):
        return None
    if refused.status_code != 400:
        return None
    try:
        message = refused.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return None
    tokens = server_window(message) if isinstance(message, str) else None
    if not tokens:
        return None
    return Window(tokens, "llama.cpp's Python server, refusing a request longer than its window")


def served_name(answers: Answers, served: list[str]) -> str | None:
    """The entry of the server's list the model name means: Ollama takes a name
    without a tag as its `:latest`."""
    if answers.model in served:
        return answers.model
    tagged = f"{answers.model}:latest"
    return tagged if answers.provider == "ollama" and tagged in served else None


def fallback_window(spec: ProviderSpec) -> int:
    """The window assumed when the server does not say its own: the
    catalogue's figure for a hosted provider, a small safe one for a server
    the person runs (whatever window it was started with)."""
    if spec.context_window:
        return spec.context_window
    return SAFE_LOCAL_WINDOW if local(spec) else DEFAULT_CONTEXT_WINDOW


def window_to_write(spec: ProviderSpec) -> int | None:
    """The window to write when the server does not say its own: None when the
    catalogue knows the provider's, else the assumed one, written so that the
    agent does not assume a larger one."""
    return None if spec.context_window else fallback_window(spec)


def unsaid_window(spec: ProviderSpec) -> str:
    """What to say when the server does not tell its window."""
    assumed = fallback_window(spec)
    if spec.context_window:
        return f"not said by the server; {assumed:,} tokens are assumed (the catalogue's figure)"
    return (f"not said by the server; {assumed:,} tokens are assumed, a small safe figure: "
            "give the window the server runs with (the -c or --n_ctx it was started with; "
            "llama.cpp's Python server runs 2,048 unless told), or the agent reads less than "
            "it could")


def settings_of(answers: Answers) -> ModelSettings:
    """The validated settings these answers make; SetupFailed naming what is wrong."""
    values = {k: v for k, v in answers.table().items() if v is not None}
    try:
        return ModelSettings(**values)
    except ValueError as exc:
        raise SetupFailed(configuration.mask_secrets(_first_error(exc))) from None


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where + ': ' if where else ''}{str(first['msg']).removeprefix('Value error, ')}"
    return str(exc)


async def live_test(answers: Answers, secrets: Mapping[str, str]) -> Outcome:
    """One real request with a tool offered; ProviderError when the model does not answer."""
    return await live_test_of(settings_of(answers), secrets)


async def live_test_of(settings: ModelSettings, secrets: Mapping[str, str]) -> Outcome:
    """The live test of a model as configured (every setting of its own kept, but
    retries): one request with a tool offered; ProviderError when it does not answer."""
    from .providers.catalog import build_provider

    settings = settings.model_copy(update={"max_retries": 0})
    provider = build_provider(settings, secrets)
    request = ModelRequest((Message(MessageRole.USER, _PROBE_MESSAGE),), tools=(PROBE_TOOL,),
                           max_tokens=64)
    builder = ResponseBuilder()
    began = False

    async def ask() -> None:
        nonlocal began
        async for event in provider.stream(request):
            began = began or isinstance(event, (TextDelta, ToolCallDelta))
            builder.feed(event)

    try:
        await asyncio.wait_for(ask(), TEST_TIMEOUT_S)
    except TimeoutError:
        raise ProviderError(await why_silent(settings, secrets, began=began)) from None
    except ProviderError as exc:
        exc.args = (with_hint(exc, settings),)  # its kind and fields kept, the hint added
        raise
    finally:
        closer = getattr(provider, "aclose", None)
        if closer is not None:
            await closer()
    response = builder.build()
    called = any(call.name == PROBE_TOOL.name for call in response.tool_calls)
    text = " ".join(response.text.split())
    return Outcome(text[:120] + ("…" if len(text) > 120 else ""), called)


async def why_silent(settings: ModelSettings, secrets: Mapping[str, str], *, began: bool,
                     waited: float | None = None) -> str:
    """Why the test had no answer in time, in words, with what to do: a busy
    server (it does not even list its models), a model that began and is
    slow, or one that said nothing while its server answers."""
    waited = TEST_TIMEOUT_S if waited is None else waited
    name = f"{settings.provider}/{settings.model}"
    label = PROVIDERS[settings.provider].label
    where = settings.resolved_base_url
    if began:
        return (f"{name} began to answer but had not finished after {waited:.0f} s: the model "
                "is slow on this machine. Hint: a smaller model, or more threads for the "
                "server (llama.cpp: -t), answers sooner; then test again")
    env = settings.resolved_key_env
    key = secrets.get(env) if env else None
    try:
        async with ServerProbe(settings.provider, where, key, timeout_s=BUSY_CHECK_S) as probe:
            await probe.models()
    except Unreachable:
        return (f"{label} at {where} took the test request but did not answer within "
                f"{waited:.0f} s, and does not list its models within {BUSY_CHECK_S:.0f} s "
                "either: it is busy, most likely still working on an earlier request (one a "
                "chat closed mid-answer left keeps llama.cpp's Python server busy until it is "
                "done). Hint: wait until it is done, or restart the server; then test again")
    except DiscoveryFailed:
        pass
    return (f"{name} said nothing within {waited:.0f} s, although {label} at {where} answers: "
            "the model may still be loading, or be slow on this machine. Hint: test again in "
            "a minute; a smaller model answers sooner")


def with_hint(exc: ProviderError, settings: ModelSettings) -> str:
    """A failed test's own words, with what to do where they do not say it."""
    text = str(exc)
    if isinstance(exc, BadRequest) and exc.server_window:
        return text  # it says the window to set
    if isinstance(exc, ProviderUnavailable):
        return (f"{text}. Hint: is the server running at {settings.resolved_base_url}? Start "
                "it (or give its address) and test again")
    if isinstance(exc, EmptyAnswer):
        return (f"{text}. Hint: a very small model may not follow the test; a larger one, or "
                "a server started with tool calling on, does")
    if isinstance(exc, ProtocolViolation):
        return (f"{text}. Hint: the server's chat format and the model may not agree on how "
                "to write a call; a server started with the model's own template does better")
    return text


def write(paths: AgentPaths, answers: Answers) -> None:
    """The secret first, then `[models.reasoning]`: each file replaced whole."""
    settings_of(answers)  # refuse before touching anything
    try:
        # The whole file as it will be, first: a key must not be written over
        # a secret another setting names (the webhook's token, say).
        configuration.check_model(paths, "reasoning", answers.table())
        if answers.key and answers.key_env:
            configuration.write_secret(paths, answers.key_env, answers.key)
        configuration.write_model(paths, "reasoning", answers.table())
    except ConfigError as exc:
        raise SetupFailed(str(exc)) from None


__all__ = ["Answers", "CHOICES", "Outcome", "PROBE_TOOL", "SAFE_LOCAL_WINDOW", "SetupFailed",
           "fallback_window", "key_name", "live_test", "live_test_of", "local", "secrets_with",
           "sendable", "served_models", "served_name", "served_window", "settings_of",
           "unsaid_window", "why_silent", "window_to_write", "with_api_path", "with_hint",
           "write"]
