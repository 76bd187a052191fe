"""The configuration examples of the README and the guide are real configurations."""

import re
import tomllib
from pathlib import Path

import pytest

from noema.config import validate

CLONE = Path(__file__).resolve().parents[2]
PAGES = [CLONE / "README.md", *sorted((CLONE / "docs").glob("*.md"))]
BLOCKS = [(page.name, block) for page in PAGES
          for block in re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.S)]


def test_the_guide_has_configuration_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize(("page", "block"), BLOCKS)
def test_each_example_validates(page, block):
    validate(tomllib.loads(block), page)
