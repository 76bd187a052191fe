"""`noema setup --provider llamacpp` against llama.cpp's real server
(llama-cpp-python with SmolLM2-135M-Instruct): the model is taken from the
server's own list and a real request with a tool offered is answered.

That server has no `/props` (llama.cpp's own server binary does) and says its
window only when it refuses a request longer than it: setup asks it so, and
writes the window it runs."""

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
    read = CliRunner().invoke(cli, ["setup", "--provider", "llamacpp", "--base-url",
                                      llama_server.base_url, "--no-test"],
                                env={**env, "NOEMA_HOME": str(tmp_path / "a")})
    assert read.exit_code == 0, read.output
    assert f"model: {llama_server.model}" in read.output  # the only one it serves
    assert (f"context window: {llama_server.context_window:,} tokens (from llama.cpp's "
            "Python server, refusing a request longer than its window)") in read.output
    written = AgentPaths.for_agent("default", tmp_path / "a").config_file.read_text()
    assert tomllib.loads(written)["models"]["reasoning"]["context_window"] == \
        llama_server.context_window
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
