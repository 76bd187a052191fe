"""Skills as people write them: plain Markdown, or with the YAML front matter
(`name`, `description`) that skills written for other agents carry, as a
file or as a folder holding SKILL.md. A broken front matter is said once and
never becomes the description."""

from __future__ import annotations

import logging

import pytest

from noema.identity import Identity, front_matter

AGENT_SKILL = """\
---
name: pdf-processing
description: >-
  Extract text and tables from PDF files, fill forms and merge documents.
  Use when the person works with PDFs.
license: Apache-2.0
metadata:
  author: someone
---

# PDF processing

## Quick start
Use pypdf to read a file.
"""


@pytest.fixture
def identity(tmp_path) -> Identity:
    found = Identity(tmp_path / "identity")
    found.ensure_defaults()
    return found


def test_a_skill_folder_with_front_matter_loads_as_it_is(identity):
    folder = identity.skills_dir / "pdf-processing"
    folder.mkdir()
    (folder / "SKILL.md").write_text(AGENT_SKILL)
    (skill,) = identity.skills()
    assert skill.id == "pdf-processing" and skill.title == "pdf-processing"
    assert skill.description == ("Extract text and tables from PDF files, fill forms and merge "
                                 "documents. Use when the person works with PDFs.")
    assert identity.read_skill("pdf-processing") == AGENT_SKILL


def test_a_skill_file_with_front_matter_and_one_without(identity):
    (identity.skills_dir / "review.md").write_text(
        "---\nname: Weekly review\ndescription: Go over the week's notes.\n---\n# Ignored\n")
    (identity.skills_dir / "plain.md").write_text("# Backups\n\nHow to check last night's backup.\n")
    skills = {s.id: s for s in identity.skills()}
    assert (skills["review"].title, skills["review"].description) == (
        "Weekly review", "Go over the week's notes.")
    assert (skills["plain"].title, skills["plain"].description) == (
        "Backups", "How to check last night's backup.")


def test_front_matter_without_a_description_takes_it_from_the_text(identity):
    (identity.skills_dir / "tidy.md").write_text(
        "---\nname: tidy\n---\n# Tidy the downloads\n\nMove old files to the archive.\n")
    (skill,) = identity.skills()
    assert (skill.title, skill.description) == ("tidy", "Move old files to the archive.")


@pytest.mark.parametrize("text, problem", [
    ("---\nname: [unclosed\ndescription: x\n---\n# Title\n\nThe body.\n", "not valid YAML (line 3)"),
    ("---\n- a\n- b\n---\n# Title\n\nThe body.\n", "not a list of `key: value` lines"),
    ("---\nname: open\n# Title\n\nThe body.\n", "never closed"),
])
def test_a_broken_front_matter_is_said_once_and_never_listed_raw(identity, caplog, text, problem):
    path = identity.skills_dir / "broken.md"
    path.write_text(text)
    with caplog.at_level(logging.WARNING, logger="noema.identity"):
        (skill,) = identity.skills()
        identity.skills()  # the same file again: no second warning
    warnings = [r.getMessage() for r in caplog.records if "broken.md" in r.getMessage()]
    assert len(warnings) == 1 and problem in warnings[0], warnings
    assert "---" not in skill.description and "name:" not in skill.description
    assert (skill.title, skill.description) == ("Title", "The body.")


def test_a_file_wins_over_a_folder_of_the_same_name_and_ids_stay_plain_names(identity):
    (identity.skills_dir / "same.md").write_text("# From the file\n\nFile.\n")
    (identity.skills_dir / "same").mkdir()
    (identity.skills_dir / "same" / "SKILL.md").write_text("# From the folder\n\nFolder.\n")
    (identity.skills_dir / "-bad").mkdir()
    (identity.skills_dir / "-bad" / "SKILL.md").write_text("# Not listed\n")
    assert [(s.id, s.title) for s in identity.skills()] == [("same", "From the file")]
    assert identity.read_skill("same").startswith("# From the file")
    assert identity.read_skill("../same") is None


def test_front_matter_parts():
    fields, body, problem = front_matter("\ufeff---\r\nname: x\r\n...\r\nbody\r\n")
    assert fields == {"name": "x"} and body == "body\r\n" and problem is None
    assert front_matter("no front matter\n") == ({}, "no front matter\n", None)
    assert front_matter("---\n---\nbody") == ({}, "body", None)
