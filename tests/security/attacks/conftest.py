"""Fixtures of the escape suite: the same small world as the other hands'
tests, and a separate process that swaps paths while the tools work."""

import pytest

from ..world import World


@pytest.fixture
def world(tmp_path):
    w = World.make(tmp_path)
    yield w
    w.close()


@pytest.fixture
def inner_world(tmp_path):
    """A world whose agent data lies inside the workspace."""
    w = World.make(tmp_path, agent_inside=True)
    yield w
    w.close()
