"""The first-run form's answers as the server reads them: each problem names its
field, and a kept key reaches only its provider's own address."""

from __future__ import annotations

import pytest

from noema import config as configuration
from noema.interfaces.web.first_run import FieldProblem, choices, filled
from noema.paths import AgentPaths


@pytest.fixture
def paths(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    paths = AgentPaths.for_agent("new", tmp_path / "home")
    paths.ensure()
    return paths


@pytest.mark.parametrize("body, field, says", [
    ({"provider": "hal9000"}, "provider", "choose a provider"),
    ({"provider": "vllm"}, "base_url", "give the server's address"),
    ({"provider": "vllm", "base_url": "localhost:8000"}, "base_url", "http:// or https://"),
    ({"provider": "openai"}, "key", "OpenAI needs an API key"),
    ({"provider": "vllm", "base_url": "http://h:1/v1", "context_window": "a lot"},
     "context_window", "whole number"),
    ({"provider": "vllm", "base_url": "http://h:1/v1", "model": 7}, "model", "must be text"),
])
def test_each_problem_names_its_field(paths, body, field, says):
    with pytest.raises(FieldProblem) as refused:
        filled(paths, body)
    assert refused.value.field == field and says in str(refused.value)


def test_a_model_is_needed_to_test_or_save(paths):
    body = {"provider": "vllm", "base_url": "http://h:1/v1"}
    assert filled(paths, body).answers.model == ""
    with pytest.raises(FieldProblem) as refused:
        filled(paths, body, model=True)
    assert refused.value.field == "model"


def test_a_bare_address_gets_its_api_path_and_a_typed_key_its_own_name(paths):
    form = filled(paths, {"provider": "vllm", "base_url": "http://gpu-box:8000", "key": " k1 "})
    assert form.answers.base_url == "http://gpu-box:8000/v1" and "/v1" in form.note
    assert form.answers.key == "k1" and form.answers.api_key_env == "VLLM_API_KEY"
    assert form.secrets["VLLM_API_KEY"] == "k1"


def test_a_kept_key_goes_to_its_provider_s_own_address_only(paths):
    configuration.write_secret(paths, "OPENAI_API_KEY", "sk-kept-0001")
    configuration.write_secret(paths, "VLLM_API_KEY", "kept-for-another-box")
    offered = {c.name: c for c in choices(paths)}
    assert offered["openai"].key_kept and not offered["vllm"].key_kept
    hosted = filled(paths, {"provider": "openai"})
    assert hosted.answers.key_env == "OPENAI_API_KEY"
    assert hosted.secrets["OPENAI_API_KEY"] == "sk-kept-0001"
    # A server the person runs gets the key typed with its address, or none.
    local = filled(paths, {"provider": "vllm", "base_url": "http://collector.example/v1"})
    assert local.answers.key_env is None
    typed = filled(paths, {"provider": "vllm", "base_url": "http://collector.example/v1",
                           "key": "typed-now"})
    assert typed.secrets["VLLM_API_KEY"] == "typed-now"
