"""Model settings validation and the provider table."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from pydantic import ValidationError

from noema.providers.anthropic_native import AnthropicProvider
from noema.providers.base import AuthenticationFailed, Provider
from noema.providers.catalog import DEFAULT_CONTEXT_WINDOW, PROVIDERS, ProviderKind, build_provider
from noema.providers.openai_compat import OpenAICompatProvider
from noema.providers.settings import ModelSettings


def error_text(**fields) -> str:
    with pytest.raises(ValidationError) as caught:
        ModelSettings(**fields)
    return str(caught.value)


def test_unknown_provider_lists_the_known_ones() -> None:
    text = error_text(provider="openia", model="x")

    assert "unknown provider 'openia'" in text
    for name in ("openai", "anthropic", "ollama", "llamacpp", "vllm", "lmstudio", "openrouter",
                 "deepseek", "openai-compatible", "scripted"):
        assert name in text


def test_a_key_pasted_as_the_variable_name_is_refused_without_echoing_it() -> None:
    text = error_text(provider="openai", model="gpt-4o", api_key_env="sk-proj-abc123secret")

    assert "NAME of the variable" in text
    assert "sk-proj-abc123secret" not in text


def test_a_custom_server_needs_its_address() -> None:
    assert "set base_url" in error_text(provider="openai-compatible", model="m")


def test_base_url_must_be_http() -> None:
    assert "http:// or https://" in error_text(provider="ollama", model="m", base_url="localhost:11434")


def test_the_script_belongs_to_the_scripted_provider() -> None:
    assert "needs script" in error_text(provider="scripted", model="s")
    assert "only to provider 'scripted'" in error_text(provider="ollama", model="m", script="a.json")


@pytest.mark.parametrize("fields", [
    {"max_output_tokens": 0}, {"timeout_s": 0}, {"temperature": 3}, {"max_retries": -1},
    {"context_window": -5}, {"model": "  "}, {"api_key": "sk-1"},
])
def test_out_of_range_and_unknown_fields_are_refused(fields) -> None:
    with pytest.raises(ValidationError):
        ModelSettings(**{"provider": "ollama", "model": "m", **fields})


def test_defaults_come_from_the_table() -> None:
    openai = ModelSettings(provider="openai", model="gpt-4o")
    lmstudio = ModelSettings(provider="lmstudio", model="qwen")

    assert openai.resolved_base_url == "https://api.openai.com/v1"
    assert openai.resolved_key_env == "OPENAI_API_KEY"
    assert openai.resolved_context_window == 128_000
    assert lmstudio.resolved_key_env is None
    assert lmstudio.resolved_context_window == DEFAULT_CONTEXT_WINDOW == 32_768
    assert ModelSettings(provider="ollama", model="m", context_window=65536).resolved_context_window == 65536


def test_every_spec_is_complete() -> None:
    for spec in PROVIDERS.values():
        if spec.key_required:
            assert spec.key_env
        if spec.kind is not ProviderKind.SCRIPTED and spec.name != "openai-compatible":
            assert spec.base_url and spec.base_url.startswith(("http://", "https://"))


def test_a_missing_required_key_says_where_to_put_it() -> None:
    settings = ModelSettings(provider="deepseek", model="deepseek-chat")

    with pytest.raises(AuthenticationFailed) as caught:
        build_provider(settings, {"OPENAI_API_KEY": "wrong one"})
    message = str(caught.value)
    assert "DEEPSEEK_API_KEY is not set" in message
    assert "environment" in message and "secrets file" in message


def test_an_explicitly_named_variable_must_exist_even_for_a_local_server() -> None:
    settings = ModelSettings(provider="vllm", model="m", api_key_env="VLLM_KEY")

    with pytest.raises(AuthenticationFailed, match="VLLM_KEY"):
        build_provider(settings, {"VLLM_KEY": "   "})


async def test_the_table_picks_the_adapter_and_the_key() -> None:
    deepseek = build_provider(ModelSettings(provider="deepseek", model="deepseek-chat"),
                              {"DEEPSEEK_API_KEY": "ds-key"})
    claude = build_provider(ModelSettings(provider="anthropic", model="claude-x", max_retries=1),
                            {"ANTHROPIC_API_KEY": "an-key"})
    local = build_provider(ModelSettings(provider="ollama", model="llama3.1:8b"), {})
    try:
        assert isinstance(deepseek, OpenAICompatProvider) and isinstance(deepseek, Provider)
        assert (deepseek.name, deepseek.model) == ("deepseek", "deepseek-chat")
        assert deepseek.endpoint.base_url == "https://api.deepseek.com/v1"
        assert deepseek.endpoint.api_key == "ds-key" and deepseek.endpoint.key_env == "DEEPSEEK_API_KEY"
        assert isinstance(claude, AnthropicProvider) and claude.context_window == 200_000
        assert local.endpoint.api_key is None and local.context_window == 8_192
    finally:
        for provider in (deepseek, claude, local):
            await provider.aclose()


def test_scripted_is_built_from_its_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = []

    class Recorder:
        @classmethod
        def from_file(cls, path, *, token_delay_s=0.0):
            calls.append((path, token_delay_s))
            return "scripted provider"

    module = types.ModuleType("noema.providers.scripted")
    module.ScriptedProvider = Recorder
    monkeypatch.setitem(sys.modules, "noema.providers.scripted", module)
    script = tmp_path / "script.json"
    settings = ModelSettings(provider="scripted", model="s", script=script, token_delay_s=0.01)

    assert build_provider(settings, {}) == "scripted provider"
    assert calls == [(script, 0.01)]
