"""`noema setup --provider llamacpp` against llama.cpp's real server
(llama-cpp-python with SmolLM2-135M-Instruct): the model is taken from the
server's own list and a real request with a tool offered is answered.

That server has no `/props` (llama.cpp's own server binary does), so it does
not say its window: setup says so and writes the window given."""

from __future__ import annotations

import os
import tomllib

import pytest
from click.testing import CliRunner

from noema.cli import cli
from noema.paths import AgentPaths

pytestmark = pytest.mark.slow


def test_setup_against_the_real_llama_server(llama_server, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
    unsaid = CliRunner().invoke(cli, ["setup", "--provider", "llamacpp", "--base-url",
                                      llama_server.base_url, "--no-test"],
                                env={**env, "NOEMA_HOME": str(tmp_path / "a")})
    assert unsaid.exit_code == 0, unsaid.output
    assert f"model: {llama_server.model}" in unsaid.output  # the only one it serves
    assert "context window: not said by the server" in unsaid.output
    done = CliRunner().invoke(cli, ["setup", "--provider", "llamacpp", "--base-url",
                                    llama_server.base_url, "--context-window",
                                    str(llama_server.context_window)],
                              env={**env, "NOEMA_HOME": str(tmp_path / "b")})
    assert done.exit_code == 0, done.output
    assert f"test: llamacpp/{llama_server.model} answered" in done.output
    paths = AgentPaths.for_agent("default", tmp_path / "b")
    section = tomllib.loads(paths.config_file.read_text())["models"]["reasoning"]
    assert section == {"provider": "llamacpp", "model": llama_server.model,
                       "base_url": llama_server.base_url,
                       "context_window": llama_server.context_window}
