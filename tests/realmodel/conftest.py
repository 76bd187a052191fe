"""The second real model family: Gemma 3 270M on llama.cpp's server, once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def gemma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """llama.cpp's real server with Gemma 3 270M (its own chat template) on
    127.0.0.1, once per session, as `llama_server` is with SmolLM2; skipped
    where `scripts/llama_server install` has not run, failed under CI=true."""
    from tests.realmodel.server import ServerProcess, Unavailable

    try:
        with ServerProcess(tmp_path_factory.mktemp("gemma") / "server.log",
                           family="gemma3") as server:
            yield server
    except Unavailable as missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the real model server is missing in CI: {missing}")
        pytest.skip(str(missing))
