"""Suite-wide settings and servers.

Property tests run with a fixed seed so the suite gives the same verdict on
every run and in CI; set NOEMA_EXPLORE=1 to let hypothesis draw new examples
(and keep what it finds in .hypothesis/).
"""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

settings.register_profile("reproducible", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile("explore" if os.environ.get("NOEMA_EXPLORE") else "reproducible")


@pytest.fixture(scope="session")
def telegram_server() -> Iterator:
    """One fake Telegram Bot API on 127.0.0.1 per session (reset it per test)."""
    from tests.fakes.telegram_server import FakeTelegramServer

    with FakeTelegramServer() as server:
        yield server
