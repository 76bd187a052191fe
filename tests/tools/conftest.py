import pytest

from tests.security.world import World


@pytest.fixture
def world(tmp_path):
    w = World.make(tmp_path)
    yield w
    w.close()
