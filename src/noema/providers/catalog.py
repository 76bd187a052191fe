"""The providers Noema knows, as a table of spec records, and how to build one.

A provider is chosen by name in the configuration, never guessed from the
shape of a key or a model name. Adding a provider that speaks an existing
wire format is one record here.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from .base import AuthenticationFailed, Provider, SchemaStyle
from .endpoint import Endpoint
from .retry import RetryPolicy, Sleep

if TYPE_CHECKING:
    from .settings import ModelSettings

# When neither the settings nor the table know the window, assume a size
# that most current models exceed, so the context is never overfilled.
DEFAULT_CONTEXT_WINDOW = 32_768


class ProviderKind(enum.StrEnum):
    """The wire format a provider speaks."""

    OPENAI_COMPATIBLE = "openai-compatible"
    ANTHROPIC = "anthropic"
    SCRIPTED = "scripted"


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """What Noema knows about one provider before any setting is applied."""

    name: str
    label: str
    kind: ProviderKind
    base_url: str | None  # None: the person must give one
    key_env: str | None  # the variable that holds the key by default
    key_required: bool
    context_window: int | None  # None: DEFAULT_CONTEXT_WINDOW
    max_tokens_field: str = "max_tokens"  # OpenAI renamed it; most servers kept the old name
    counts_tokens: bool = False  # its server tokenizes on request (the estimates are calibrated)
    may_escape: bool = False  # its server may HTML-escape what the model reads (`entities.py`)
    # A local server that answers one request at a time: the person's requests
    # go first and a chronicle gives way (`traffic.py`), when both share it.
    one_at_a_time: bool = False
    # How its server is asked for an answer held to a JSON schema (structured
    # output), if it can be: the chronicler then asks for its save point so.
    answer_schema: SchemaStyle = SchemaStyle.NONE

    def __post_init__(self) -> None:
        if self.key_required and not self.key_env:
            raise ValueError(f"provider {self.name!r} requires a key but names no variable")


_SPECS = (
    ProviderSpec("openai", "OpenAI", ProviderKind.OPENAI_COMPATIBLE, "https://api.openai.com/v1",
                 "OPENAI_API_KEY", True, 128_000, max_tokens_field="max_completion_tokens",
                 answer_schema=SchemaStyle.JSON_SCHEMA),
    ProviderSpec("anthropic", "Anthropic", ProviderKind.ANTHROPIC, "https://api.anthropic.com",
                 "ANTHROPIC_API_KEY", True, 200_000, answer_schema=SchemaStyle.TOOL),
    # Ollama serves a model with its own num_ctx, often far below the model's
    # nominal window; assuming more would silently truncate the context.
    ProviderSpec("ollama", "Ollama", ProviderKind.OPENAI_COMPATIBLE, "http://localhost:11434/v1",
                 None, False, 8_192, one_at_a_time=True, answer_schema=SchemaStyle.JSON_SCHEMA),
    ProviderSpec("llamacpp", "llama.cpp server", ProviderKind.OPENAI_COMPATIBLE,
                 "http://localhost:8080/v1", None, False, None, counts_tokens=True,
                 may_escape=True, one_at_a_time=True, answer_schema=SchemaStyle.JSON_OBJECT),
    ProviderSpec("vllm", "vLLM", ProviderKind.OPENAI_COMPATIBLE, "http://localhost:8000/v1",
                 None, False, None, answer_schema=SchemaStyle.JSON_SCHEMA),
    ProviderSpec("lmstudio", "LM Studio", ProviderKind.OPENAI_COMPATIBLE,
                 "http://localhost:1234/v1", None, False, None, one_at_a_time=True,
                 answer_schema=SchemaStyle.JSON_SCHEMA),
    ProviderSpec("openrouter", "OpenRouter", ProviderKind.OPENAI_COMPATIBLE,
                 "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", True, None),
    ProviderSpec("deepseek", "DeepSeek", ProviderKind.OPENAI_COMPATIBLE,
                 "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", True, 128_000),
    ProviderSpec("openai-compatible", "OpenAI-compatible server", ProviderKind.OPENAI_COMPATIBLE,
                 None, None, False, None, one_at_a_time=True),
    ProviderSpec("scripted", "scripted model", ProviderKind.SCRIPTED, None, None, False, None),
)

PROVIDERS: Mapping[str, ProviderSpec] = MappingProxyType({s.name: s for s in _SPECS})


def build_provider(
    settings: ModelSettings, secrets: Mapping[str, str], *, sleep: Sleep | None = None
) -> Provider:
    """The provider the settings describe.

    `secrets` is the environment merged with the agent's secrets file; the key
    is read from it under the configured variable name and never logged.
    `sleep` replaces the wait between retries (tests pass one that does not wait).
    """
    spec = PROVIDERS[settings.provider]
    policy = RetryPolicy(max_retries=settings.max_retries, sleep=sleep or asyncio.sleep)
    return _BUILDERS[spec.kind](settings, spec, secrets, policy)


def _endpoint(settings: ModelSettings, spec: ProviderSpec, secrets: Mapping[str, str]) -> Endpoint:
    key_env = settings.resolved_key_env
    key = (secrets.get(key_env) or "").strip() if key_env else ""
    # A variable the person named explicitly is expected to hold a key.
    if not key and key_env and (spec.key_required or settings.api_key_env):
        raise AuthenticationFailed(
            f"{spec.label} needs an API key, but {key_env} is not set. Set it in the "
            f"environment (export {key_env}=...) or add the line {key_env} = \"...\" to the "
            "agent's secrets file (secrets.toml in the agent's folder)."
        )
    base_url = settings.resolved_base_url
    assert base_url is not None  # the settings validator guarantees one
    return Endpoint(
        provider=spec.name,
        label=spec.label,
        base_url=base_url,
        model=settings.model,
        key_env=key_env if key else None,
        api_key=key or None,
        timeout_s=settings.timeout_s,
        connect_timeout_s=settings.connect_timeout_s,
    )


def _openai_compatible(
    settings: ModelSettings, spec: ProviderSpec, secrets: Mapping[str, str], policy: RetryPolicy
) -> Provider:
    from .openai_compat import OpenAICompatProvider

    endpoint = _endpoint(settings, spec, secrets)
    return OpenAICompatProvider(
        endpoint,
        context_window=settings.resolved_context_window,
        max_output_tokens=settings.max_output_tokens,
        temperature=settings.temperature,
        policy=policy,
        max_tokens_field=spec.max_tokens_field,
        may_escape=spec.may_escape,
        schema_style=spec.answer_schema,
    )


def _anthropic(
    settings: ModelSettings, spec: ProviderSpec, secrets: Mapping[str, str], policy: RetryPolicy
) -> Provider:
    from .anthropic_native import AnthropicProvider

    return AnthropicProvider(
        _endpoint(settings, spec, secrets),
        context_window=settings.resolved_context_window,
        max_output_tokens=settings.max_output_tokens,
        temperature=settings.temperature,
        policy=policy,
    )


def _scripted(
    settings: ModelSettings, spec: ProviderSpec, secrets: Mapping[str, str], policy: RetryPolicy
) -> Provider:
    from .scripted import ScriptedProvider

    assert settings.script is not None  # the settings validator guarantees one
    return ScriptedProvider.from_file(settings.script, token_delay_s=settings.token_delay_s)


_BUILDERS: Mapping[
    ProviderKind,
    Callable[[ModelSettings, ProviderSpec, Mapping[str, str], RetryPolicy], Provider],
] = MappingProxyType({
    ProviderKind.OPENAI_COMPATIBLE: _openai_compatible,
    ProviderKind.ANTHROPIC: _anthropic,
    ProviderKind.SCRIPTED: _scripted,
})
