"""`noema setup` against real HTTP servers on 127.0.0.1: the fake Chat
Completions server dressed as Ollama, llama.cpp, vLLM or a hosted provider.
Without questions (options) and with them (a pty, as a person types)."""

from __future__ import annotations

import io
import os
import re
import socket
import stat
import sys
import tomllib
from pathlib import Path

import pexpect
import pytest
from click.testing import CliRunner

from noema.cli import cli
from noema.config import load_config
from noema.paths import AgentPaths
from tests.fakes import FakeFailure, FakeReply, FakeToolCall
from tests.fakes.local_servers import FakeLocalServer

READY = FakeReply(text="", tool_calls=(FakeToolCall("report_ready", '{"word": "ready"}'),))


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NOEMA") and not k.endswith("_API_KEY")}
    return {**env, "NOEMA_HOME": str(home), "HOME": str(home), **extra}


def setup(home: Path, *options: str, **env: str):
    return CliRunner().invoke(cli, ["setup", *options], env=clean_env(home, **env))


def written(home: Path) -> dict:
    return tomllib.loads(AgentPaths.for_agent("default", home).config_file.read_text())


def nothing_written(home: Path) -> bool:
    paths = AgentPaths.for_agent("default", home)
    return not paths.config_file.exists() and not paths.secrets_file.exists()


def test_ollama_without_questions_reads_the_window_and_tries_a_tool_call(tmp_path):
    with FakeLocalServer("ollama", {"llama3.1:8b": 131072, "qwen3:4b": 40960},
                         num_ctx={"qwen3:4b": 8192}) as server:
        server.script(READY)
        done = setup(tmp_path, "--provider", "ollama", "--model", "qwen3:4b",
                     "--base-url", server.base_url)
        asked = [r for r in server.requests if r.path == "/v1/chat/completions"]
    assert done.exit_code == 0, done.output
    assert "context window: 8,192 tokens" in done.output and "called a tool" in done.output
    assert written(tmp_path)["models"]["reasoning"] == {
        "provider": "ollama", "model": "qwen3:4b", "base_url": server.base_url,
        "context_window": 8192}
    assert [t["function"]["name"] for t in asked[0].body["tools"]] == ["report_ready"]
    assert load_config(AgentPaths.for_agent("default", tmp_path), {}).has_model


def test_llamacpp_serving_one_model_needs_no_model_name(tmp_path):
    with FakeLocalServer("llamacpp", {"SmolLM2-135M-Instruct.gguf": 2048}) as server:
        server.script(READY)
        done = setup(tmp_path, "--provider", "llamacpp", "--base-url", server.base_url)
    assert done.exit_code == 0, done.output
    section = written(tmp_path)["models"]["reasoning"]
    assert section["model"] == "SmolLM2-135M-Instruct.gguf" and section["context_window"] == 2048
    assert "from llama.cpp's /props (n_ctx)" in done.output


def test_a_model_the_server_does_not_serve_is_refused_with_the_list(tmp_path):
    with FakeLocalServer("vllm", {"Qwen/Qwen3-8B": 32768}) as server:
        done = setup(tmp_path, "--provider", "vllm", "--model", "qwen3-8b",
                     "--base-url", server.base_url)
    assert done.exit_code == 1
    assert "does not serve 'qwen3-8b'; it serves: Qwen/Qwen3-8B" in done.output
    assert nothing_written(tmp_path)


def test_a_failing_test_request_writes_nothing_and_is_not_retried(tmp_path):
    with FakeLocalServer("vllm", {"m": 8192}) as server:
        server.script(FakeFailure(500, "the model could not be loaded"))
        done = setup(tmp_path, "--provider", "vllm", "--model", "m", "--base-url", server.base_url)
        asked = [r for r in server.requests if r.path == "/v1/chat/completions"]
    assert done.exit_code == 1 and "the test request failed" in done.output
    assert "Nothing was written" in done.output and "Traceback" not in done.output
    assert len(asked) == 1 and nothing_written(tmp_path)


def test_a_model_that_does_not_call_the_tool_is_written_with_a_warning(tmp_path):
    with FakeLocalServer("vllm", {"m": 8192}) as server:
        server.script(FakeReply(text="Ready!"))
        done = setup(tmp_path, "--provider", "vllm", "--model", "m", "--base-url", server.base_url)
    assert done.exit_code == 0, done.output
    assert 'answered ("Ready!") but did not call the tool' in done.output
    assert written(tmp_path)["models"]["reasoning"]["context_window"] == 8192


def test_a_hosted_provider_uses_the_key_in_the_environment_and_never_writes_it(tmp_path):
    with FakeLocalServer("openai", {"gpt-4o-mini": None}, key="sk-test-key-0001") as server:
        server.script(READY)
        missing = setup(tmp_path, "--provider", "openai", "--model", "gpt-4o-mini",
                        "--base-url", server.base_url)
        assert missing.exit_code == 1 and "OPENAI_API_KEY is not set" in missing.output
        done = setup(tmp_path, "--provider", "openai", "--model", "gpt-4o-mini",
                     "--base-url", server.base_url, OPENAI_API_KEY="sk-test-key-0001")
    assert done.exit_code == 0, done.output
    paths = AgentPaths.for_agent("default", tmp_path)
    assert "sk-test" not in paths.config_file.read_text() and not paths.secrets_file.exists()
    assert "not said by the server; 128,000 tokens are assumed" in done.output  # the catalogue's


def test_no_test_writes_even_when_the_server_is_away(tmp_path):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    refused = setup(tmp_path, "--provider", "ollama", "--model", "llama3.1:8b", "--base-url", url)
    assert refused.exit_code == 1 and "cannot reach Ollama" in refused.output
    assert nothing_written(tmp_path)
    done = setup(tmp_path, "--provider", "ollama", "--model", "llama3.1:8b", "--base-url", url,
                 "--context-window", "8192", "--no-test")
    assert done.exit_code == 0, done.output
    assert "warning: cannot reach Ollama" in done.output
    assert written(tmp_path)["models"]["reasoning"]["context_window"] == 8192


def test_setup_replaces_the_old_model_and_keeps_the_rest_of_the_file(tmp_path):
    paths = AgentPaths.for_agent("default", tmp_path).ensure()
    paths.config_file.write_text("# my agent\n[agent]\nlanguage = 'es'\n\n[models.reasoning]\n"
                                 "provider = 'scripted'\nmodel = 's'\nscript = 's.toml'\n"
                                 "timeout_s = 45\n")
    with FakeLocalServer("vllm", {"m": 16384}) as server:
        server.script(READY)
        done = setup(tmp_path, "--provider", "vllm", "--model", "m", "--base-url", server.base_url)
    assert done.exit_code == 0, done.output
    text = paths.config_file.read_text()
    assert "# my agent" in text and "script" not in text
    config = load_config(paths, {})
    assert config.agent.language == "es" and config.models.reasoning.timeout_s == 45
    assert config.models.reasoning.context_window == 16384


def test_setup_without_a_terminal_or_with_stray_options_says_what_to_pass(tmp_path):
    done = setup(tmp_path)
    assert done.exit_code == 2 and "pass --provider and --model" in done.output
    done = setup(tmp_path, "--model", "x")
    assert done.exit_code == 2 and "go with --provider" in done.output


# -- with questions, in a pty -------------------------------------------------------


def spawn_setup(home: Path) -> pexpect.spawn:
    child = pexpect.spawn(sys.executable, ["-m", "noema", "setup"],
                          env={**clean_env(home), "TERM": "dumb"}, encoding="utf-8", timeout=30)
    child.logfile_read = io.StringIO()  # the whole transcript, as the person saw it
    return child


@pytest.mark.slow
def test_the_first_run_asks_and_keeps_the_key_in_secrets_for_the_person_only(tmp_path):
    with FakeLocalServer("vllm", {"Qwen/Qwen3-8B": 32768, "Qwen/Qwen3-0.6B": 40960},
                         key="local-key-42") as server:
        server.script(READY)
        child = spawn_setup(tmp_path)
        try:
            child.expect(r"Provider \(number or name\) \[1\]: ")
            child.sendline("12")  # not on the list: asked again
            child.expect("is not one of")
            child.sendline("vllm")
            child.expect(r"Server address \[http://localhost:8000/v1\]: ")
            child.sendline(server.base_url)
            child.expect(r"API key, if the server asks for one \(Enter: none\): ")
            child.sendline("local-key-42")
            child.expect("vLLM serves:")
            child.expect(r"2\. Qwen/Qwen3-0\.6B")
            child.expect(r"Model \(number or name\) \[1\]: ")
            child.sendline("2")
            child.expect(r"context window: 40,960 tokens \(from vLLM's list of models")
            child.expect(r"Context window in tokens \[40960\]: ")
            child.sendline("")
            child.expect("answered and called a tool")
            child.expect("VLLM_API_KEY in .*secrets.toml")
            child.expect(r"Write it\? \[Y/n\]: ")
            child.sendline("y")
            child.expect("Written.")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert "local-key-42" not in child.logfile_read.getvalue()  # typed hidden
    assert child.exitstatus == 0
    paths = AgentPaths.for_agent("default", tmp_path)
    assert stat.S_IMODE(paths.secrets_file.stat().st_mode) == 0o600
    assert tomllib.loads(paths.secrets_file.read_text()) == {"VLLM_API_KEY": "local-key-42"}
    assert "local-key-42" not in paths.config_file.read_text()
    assert written(tmp_path)["models"]["reasoning"] == {
        "provider": "vllm", "model": "Qwen/Qwen3-0.6B", "base_url": server.base_url,
        "api_key_env": "VLLM_API_KEY", "context_window": 40960}


@pytest.mark.slow
def test_the_first_run_writes_nothing_when_the_test_fails_and_the_person_says_no(tmp_path):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        away = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
    with FakeLocalServer("ollama", {"llama3.1:8b": 131072}) as server:
        server.script(FakeFailure(401, "no such key"))
        child = spawn_setup(tmp_path)
        try:
            child.expect(r"Provider \(number or name\) \[1\]: ")
            child.sendline("")  # 1: Ollama
            child.expect(r"Server address \[http://localhost:11434/v1\]: ")
            child.sendline(away)
            child.expect(r"\(Enter: none\): ")
            child.sendline("")
            child.expect("warning: cannot reach Ollama")  # a mistyped address is asked again
            child.expect(r"Server address \(another, or Enter to go on without its list\) "
                         rf"\[{re.escape(away)}\]: ")
            child.sendline(server.base_url)
            child.expect(r"Model \(number or name\) \[1\]: ")
            child.sendline("llama3.1:8b")
            child.expect("OLLAMA_CONTEXT_LENGTH")
            child.expect(r"Context window in tokens \[4096\]: ")
            child.sendline("8192")
            child.expect("test: it failed")
            child.expect(r"Write this setup anyway\? \[y/N\]: ")
            child.sendline("")
            child.expect("Nothing was written.")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 1 and nothing_written(tmp_path)


def test_setup_finishes_a_section_begun_with_config_set_and_refuses_a_broken_file(tmp_path):
    begun = CliRunner().invoke(cli, ["config", "set", "models.reasoning.provider", "openai"],
                               env=clean_env(tmp_path))
    assert begun.exit_code == 0 and "note:" in begun.output
    with FakeLocalServer("llamacpp", {"only.gguf": 4096}) as server:
        server.script(READY)
        done = setup(tmp_path, "--provider", "llamacpp", "--base-url", server.base_url)
        assert done.exit_code == 0, done.output
        assert written(tmp_path)["models"]["reasoning"]["provider"] == "llamacpp"
        paths = AgentPaths.for_agent("default", tmp_path)
        paths.config_file.write_text(paths.config_file.read_text() + "[cycle]\nmax_step = 3\n")
        broken = setup(tmp_path, "--provider", "llamacpp", "--base-url", server.base_url)
    assert broken.exit_code == 1 and "cycle.max_step: unknown setting" in broken.output
    assert len([r for r in server.requests if r.path == "/v1/chat/completions"]) == 1


def test_ollama_takes_a_name_without_tag_as_its_latest(tmp_path):
    with FakeLocalServer("ollama", {"llama3.1:latest": 131072},
                         num_ctx={"llama3.1:latest": 16384}) as server:
        server.script(READY)
        done = setup(tmp_path, "--provider", "ollama", "--model", "llama3.1",
                     "--base-url", server.base_url)
        wrong = setup(tmp_path, "--provider", "ollama", "--model", "llama3",
                      "--base-url", server.base_url)
    assert done.exit_code == 0, done.output
    assert written(tmp_path)["models"]["reasoning"]["model"] == "llama3.1"
    assert written(tmp_path)["models"]["reasoning"]["context_window"] == 16384
    assert wrong.exit_code == 1 and "it serves: llama3.1:latest" in wrong.output


def test_a_bare_server_address_gets_the_api_path(tmp_path):
    with FakeLocalServer("vllm", {"m": 8192}) as server:
        server.script(READY)
        bare = server.base_url.removesuffix("/v1")
        done = setup(tmp_path, "--provider", "vllm", "--model", "m", "--base-url", bare + "/")
    assert done.exit_code == 0, done.output
    assert f"address: {server.base_url} (the server's OpenAI-compatible API is under /v1)" \
        in done.output
    assert written(tmp_path)["models"]["reasoning"]["base_url"] == server.base_url
