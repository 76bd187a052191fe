import pytest

from noema.memory.session import Session
from noema.memory.store import TurnStore


@pytest.fixture
def store(tmp_path):
    s = TurnStore(tmp_path / "turns.db")
    yield s
    s.close()


@pytest.fixture
def session(store):
    return Session.load(store)
