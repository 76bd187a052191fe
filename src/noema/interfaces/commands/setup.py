"""`noema setup`: the first run, from nothing to a model that answers.

The person picks a provider from the catalogue, the server's address when it
is a local one, and a model from the list the server itself gives; the
context window is read from the server where it says it. A key typed here
goes to `secrets.toml` (mode 600), never to `config.toml`. A live request,
which offers the model a tool, shows that the model answers and can call
tools. Nothing is written until the end, and then each file at once: the
secret first, the configuration last, so a setup cut short leaves the
previous configuration in force.

The same steps run without questions when `--provider` is given: every
answer then comes from an option, and what the server says still decides
the model list and the window.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import click

from ... import config as configuration
from ...config import ConfigError
from ...paths import AgentPaths
from ...providers.base import Message, MessageRole, ModelRequest, ProviderError, ResponseBuilder, \
    ToolSpec
from ...providers.catalog import DEFAULT_CONTEXT_WINDOW, PROVIDERS, ProviderSpec
from ...providers.discovery import DiscoveryFailed, ServerProbe, Window
from ...providers.settings import ModelSettings

TEST_TIMEOUT_S = 90.0  # a small local model may take its time to load
# Offered by `setup`, in this order; the scripted model is for rehearsals, set by hand.
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
            raise SetupFailed(f"{self.spec.label} has no default address: give one with "
                              "--base-url (e.g. http://localhost:8000/v1)")
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


Say = Callable[[str], None]


# -- the steps -----------------------------------------------------------------


def local(spec: ProviderSpec) -> bool:
    """A server the person runs: it has no key of its own and an address to confirm."""
    return not spec.key_required


def secrets_with(paths: AgentPaths, answers: Answers) -> dict[str, str]:
    """The secrets as the agent will see them once the setup is written."""
    secrets = configuration.load_secrets(paths)
    if answers.key and answers.key_env:
        secrets[answers.key_env] = answers.key
    return secrets


async def served_models(answers: Answers, secrets: Mapping[str, str]) -> list[str]:
    key = secrets.get(answers.key_env) if answers.key_env else None
    async with ServerProbe(answers.provider, answers.address, key) as probe:
        return await probe.models()


async def served_window(answers: Answers, secrets: Mapping[str, str]) -> Window | None:
    key = secrets.get(answers.key_env) if answers.key_env else None
    async with ServerProbe(answers.provider, answers.address, key) as probe:
        return await probe.window(answers.model)


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
    from ...providers.catalog import build_provider

    settings = settings_of(answers).model_copy(update={"max_retries": 0})
    provider = build_provider(settings, secrets)
    request = ModelRequest((Message(MessageRole.USER, _PROBE_MESSAGE),), tools=(PROBE_TOOL,),
                           max_tokens=64)
    builder = ResponseBuilder()

    async def ask() -> None:
        async for event in provider.stream(request):
            builder.feed(event)

    try:
        await asyncio.wait_for(ask(), TEST_TIMEOUT_S)
    except TimeoutError:
        raise ProviderError(f"{answers.provider}/{answers.model} did not answer within "
                            f"{TEST_TIMEOUT_S:.0f} s") from None
    finally:
        closer = getattr(provider, "aclose", None)
        if closer is not None:
            await closer()
    response = builder.build()
    called = any(call.name == PROBE_TOOL.name for call in response.tool_calls)
    text = " ".join(response.text.split())
    return Outcome(text[:120] + ("…" if len(text) > 120 else ""), called)


def write(paths: AgentPaths, answers: Answers) -> None:
    """The secret first, then `[models.reasoning]`: each file replaced whole."""
    settings_of(answers)  # refuse before touching anything
    try:
        if answers.key and answers.key_env:
            configuration.write_secret(paths, answers.key_env, answers.key)
        configuration.write_model(paths, "reasoning", answers.table())
    except ConfigError as exc:
        raise SetupFailed(str(exc)) from None


def _window_line(window: Window) -> str:
    line = f"context window: {window.tokens:,} tokens (from {window.source})"
    return line + (f"\n  note: {window.note}" if window.note else "")


def _fallback_window(spec: ProviderSpec) -> int:
    return spec.context_window or DEFAULT_CONTEXT_WINDOW


def _outcome_lines(answers: Answers, outcome: Outcome) -> list[str]:
    name = f"{answers.provider}/{answers.model}"
    if outcome.called_tool:
        return [f"test: {name} answered and called a tool: it is ready."]
    said = f' ("{outcome.answered}")' if outcome.answered else ""
    return [f"test: {name} answered{said} but did not call the tool it was offered.",
            "  warning: the agent's files, commands and memory are tools; a model that does not "
            "call them can only talk. A larger model, or a server started with tool calling "
            "on, does better."]


# -- without questions -----------------------------------------------------------


def with_api_path(answers: Answers, say: Say) -> Answers:
    """A server's bare address (http://host:11434) with the `/v1` its catalogue
    address has: the chat requests go there, not to the server's root."""
    default = answers.spec.base_url
    if answers.base_url is None or default is None or not default.endswith("/v1"):
        return answers
    if urlsplit(answers.base_url).path not in ("", "/"):
        return answers
    url = answers.base_url.rstrip("/") + "/v1"
    say(f"address: {url} (the server's OpenAI-compatible API is under /v1)")
    return replace(answers, base_url=url)


def run_options(paths: AgentPaths, answers: Answers, *, test: bool, say: Say) -> None:
    """`noema setup --provider …`: every answer from the options."""
    answers = with_api_path(answers, say)
    secrets = secrets_with(paths, answers)
    _key_present(answers, secrets)
    try:
        served = asyncio.run(served_models(answers, secrets))
    except DiscoveryFailed as exc:
        served = None
        if test:
            raise SetupFailed(f"{exc}\nNothing was written (with --no-test the setup is "
                              "written without asking the server).") from None
        say(f"warning: {exc}; the model name is taken as given")
    if served is not None:
        if not answers.model:
            if len(served) != 1:
                raise SetupFailed(f"name the model with --model; {answers.spec.label} serves: "
                                  + ", ".join(served))
            answers = replace(answers, model=served[0])
        elif _served_name(answers, served) is None:
            raise SetupFailed(f"{answers.spec.label} at {answers.address} does not serve "
                              f"{answers.model!r}; it serves: {', '.join(served)}")
    if not answers.model:
        raise SetupFailed("name the model with --model")
    say(f"model: {answers.model}")
    if answers.context_window is None and served is not None:
        listed = replace(answers, model=_served_name(answers, served) or answers.model)
        answers = replace(answers, context_window=_read_window(listed, secrets, say))
    elif answers.context_window is not None:
        say(f"context window: {answers.context_window:,} tokens (as given)")
    settings_of(answers)
    if test:
        try:
            outcome = asyncio.run(live_test(answers, secrets))
        except ProviderError as exc:
            raise SetupFailed(f"the test request failed: {configuration.mask_secrets(str(exc))}"
                              "\nNothing was written.") from None
        for line in _outcome_lines(answers, outcome):
            say(line)
    write(paths, answers)
    say(f"written: [models.reasoning] in {paths.config_file}")


def _served_name(answers: Answers, served: list[str]) -> str | None:
    """The entry of the server's list the model name means: Ollama takes a name
    without a tag as its `:latest`."""
    if answers.model in served:
        return answers.model
    tagged = f"{answers.model}:latest"
    return tagged if answers.provider == "ollama" and tagged in served else None


def _read_window(answers: Answers, secrets: Mapping[str, str], say: Say) -> int | None:
    try:
        window = asyncio.run(served_window(answers, secrets))
    except DiscoveryFailed as exc:
        window = None
        say(f"warning: the window could not be read: {exc}")
    if window is None:
        say(f"context window: not said by the server; {_fallback_window(answers.spec):,} tokens "
            "are assumed (--context-window sets it)")
        return None
    say(_window_line(window))
    return window.tokens


def _key_present(answers: Answers, secrets: Mapping[str, str]) -> None:
    env = answers.key_env
    if env and not (secrets.get(env) or "").strip() and (answers.spec.key_required
                                                         or answers.api_key_env):
        raise SetupFailed(f"{answers.spec.label} needs an API key, but {env} is not set: "
                          f"export {env}=... first, or run `noema setup` without options to "
                          "type it (it is kept in secrets.toml, mode 600)")


# -- with questions -------------------------------------------------------------


def run_questions(paths: AgentPaths, *, say: Say, ask: Callable[..., Any],
                  confirm: Callable[..., bool]) -> bool:
    """The interactive first run; False when the person chose not to write."""
    say(f"Setting up a model for agent {paths.name!r} (Ctrl-C leaves; nothing is written "
        "until the end).\n")
    for number, name in enumerate(CHOICES, 1):
        spec = PROVIDERS[name]
        where = "on your machine" if local(spec) and spec.base_url else (
            "any address" if spec.base_url is None else "hosted, needs a key")
        say(f"  {number}. {spec.label} ({name}, {where})")
    provider = ask("Provider (number or name)", default="1", value_proc=_provider_choice)
    answers = Answers(provider)
    spec = answers.spec
    if local(spec):
        url = ask("Server address", default=spec.base_url or "http://localhost:8000/v1")
        answers = with_api_path(replace(answers, base_url=url.strip()), say)
    answers = _ask_key(paths, answers, say=say, ask=ask)
    answers, served = _ask_served(paths, answers, say=say, ask=ask)
    secrets = secrets_with(paths, answers)
    if served:
        say(f"\n{spec.label} serves:")
        for number, name in enumerate(served, 1):
            say(f"  {number}. {name}")
        model = ask("Model (number or name)", default="1",
                    value_proc=lambda text: _listed(text, served))
    else:
        model = ask("Model name", value_proc=_non_empty)
    answers = replace(answers, model=model)
    answers = _ask_window(answers, secrets, asked_server=bool(served), say=say, ask=ask)
    try:
        settings_of(answers)
    except SetupFailed as exc:
        say(f"error: {exc}")
        return False
    say("\nTrying a request (with a tool offered)…")
    try:
        for line in _outcome_lines(answers, asyncio.run(live_test(answers, secrets))):
            say(line)
    except ProviderError as exc:
        say(f"test: it failed: {configuration.mask_secrets(str(exc))}")
        if not confirm("Write this setup anyway?", default=False):
            say("Nothing was written.")
            return False
    say("")
    say(f"[models.reasoning] in {paths.config_file}:")
    for name, value in answers.table().items():
        if value is not None:
            say(f"  {name} = {json.dumps(value)}")
    if answers.key and answers.key_env:
        say(f"and {answers.key_env} in {paths.secrets_file} (mode 600)")
    if not confirm("Write it?", default=True):
        say("Nothing was written.")
        return False
    write(paths, answers)
    say("Written. `noema chat` talks with it; `noema config check` checks it again.")
    return True


def _ask_window(answers: Answers, secrets: Mapping[str, str], *, asked_server: bool, say: Say,
                ask: Callable[..., Any]) -> Answers:
    """The window, offering what the server says (or the catalogue's figure)."""
    window: Window | None = None
    if asked_server:
        try:
            window = asyncio.run(served_window(answers, secrets))
        except DiscoveryFailed as exc:
            say(f"warning: the window could not be read: {exc}")
    if window is not None:
        say(_window_line(window))
    else:
        say("The server does not say its context window (the tokens the model reads at once).")
    tokens = ask("Context window in tokens", type=click.IntRange(min=256),
                 default=window.tokens if window else _fallback_window(answers.spec))
    return replace(answers, context_window=tokens)


def _ask_served(paths: AgentPaths, answers: Answers, *, say: Say,
                ask: Callable[..., Any]) -> tuple[Answers, list[str]]:
    """The models the server serves. When a local server's list cannot be
    read, its address is asked again, until it answers or the person keeps
    the address and goes on without the list."""
    while True:
        try:
            return answers, asyncio.run(served_models(answers, secrets_with(paths, answers)))
        except (DiscoveryFailed, SetupFailed) as exc:
            say(f"warning: {exc}")
        if not local(answers.spec):
            return answers, []
        url = ask("Server address (another, or Enter to go on without its list)",
                  default=answers.address).strip()
        if url == answers.address:
            return answers, []
        answers = with_api_path(replace(answers, base_url=url), say)


def _ask_key(paths: AgentPaths, answers: Answers, *, say: Say,
             ask: Callable[..., Any]) -> Answers:
    spec = answers.spec
    env = spec.key_env
    secrets = configuration.load_secrets(paths)
    if env and (secrets.get(env) or "").strip():
        where = "secrets.toml" if env in configuration.read_secrets_file(paths.secrets_file) \
            else "the environment"
        say(f"The key in {env} (from {where}) is used.")
        return answers
    if spec.key_required:
        key = ask(f"{spec.label} API key (kept in secrets.toml, mode 600)", hide_input=True,
                  value_proc=_non_empty)
        return replace(answers, key=key.strip())
    key = ask("API key, if the server asks for one (Enter: none)", default="", hide_input=True,
              show_default=False)
    if not key.strip():
        return answers
    name = env or f"{answers.provider.upper().replace('-', '_')}_API_KEY"
    return replace(answers, key=key.strip(), api_key_env=name)


def _provider_choice(text: str) -> str:
    text = text.strip()
    if text.isdigit() and 1 <= int(text) <= len(CHOICES):
        return CHOICES[int(text) - 1]
    if text in CHOICES:
        return text
    raise click.BadParameter(f"{text!r} is not one of 1–{len(CHOICES)} or "
                             f"{', '.join(CHOICES)}")


def _listed(text: str, names: list[str]) -> str:
    text = text.strip()
    if text.isdigit() and 1 <= int(text) <= len(names):
        return names[int(text) - 1]
    if text in names:
        return text
    raise click.BadParameter(f"{text!r} is not on the list; give its number or its name")


def _non_empty(text: str) -> str:
    if not text.strip():
        raise click.BadParameter("it cannot be empty")
    return text.strip()


__all__ = ["Answers", "CHOICES", "Outcome", "SetupFailed", "live_test", "run_options",
           "run_questions", "write"]
