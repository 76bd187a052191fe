"""The README's configuration examples are real configurations."""

import re
import tomllib
from pathlib import Path

import pytest

from noema.config import validate

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```toml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_readme_has_configuration_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("block", BLOCKS)
def test_each_example_validates(block):
    validate(tomllib.loads(block), "README.md")
