"""Suite-wide settings and servers.

Property tests run with a fixed seed so the suite gives the same verdict on
every run and in CI; set NOEMA_EXPLORE=1 to let hypothesis draw new examples
(and keep what it finds in .hypothesis/).
"""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from noema.privacy import go_private, person_umask

settings.register_profile("reproducible", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile("explore" if os.environ.get("NOEMA_EXPLORE") else "reproducible")


@pytest.fixture(scope="session")
def telegram_server() -> Iterator:
    """One fake Telegram Bot API on 127.0.0.1 per session (reset it per test)."""
    from tests.fakes.telegram_server import FakeTelegramServer

    with FakeTelegramServer() as server:
        yield server


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """llama.cpp's real server with SmolLM2-135M-Instruct on 127.0.0.1, once per
    session: `.base_url` (ends in /v1), `.model`, `.context_window`. Skipped
    where `scripts/llama_server install` has not run; under CI=true that fails."""
    from tests.realmodel.server import ServerProcess, Unavailable

    try:
        with ServerProcess(tmp_path_factory.mktemp("llama") / "server.log") as server:
            yield server
    except Unavailable as missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the real model server is missing in CI: {missing}")
        pytest.skip(str(missing))


@pytest.fixture
def private_process():
    """This process as the `noema` command runs it: under the umask 077, the
    person's own (the umask the tests run with) remembered."""
    previous = os.umask(0o077)
    os.umask(previous)
    go_private()
    os.umask(0o077)
    try:
        assert person_umask() != 0o077
        yield person_umask()
    finally:
        os.umask(previous)
