"""The user guide: the README stays a page read in minutes that leads into it,
the guide builds as a site with no broken link or missing page, and the page
served by `noema ui` links and anchors the same way the site does."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from markdown.extensions.toc import slugify

from noema.interfaces.web.guide import GUIDE, NoSuchPage, contents, guide_page, render, slug

CLONE = Path(__file__).resolve().parents[2]
DOCS = CLONE / "docs"
README = CLONE / "README.md"
PAGES = sorted(p.stem for p in DOCS.glob("*.md"))


def test_the_readme_is_short_and_keeps_the_two_commands_of_the_quick_start():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    start = text.index("\n## Quick start\n")
    quick = text[start:text.index("\n## ", start + 1)]
    assert re.search(r"^1\. `\./run` ", quick, re.MULTILINE)
    assert re.search(r"^2\. `\./test` ", quick, re.MULTILINE)
    assert ".venv/bin/noema setup" in text


def test_every_link_of_the_readme_leads_to_a_file_of_the_clone():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)", text)
    assert targets  # it leads somewhere
    assert [t for t in targets if not (CLONE / t).is_file()] == []
    assert "docs/index.md" in targets  # the way into the guide


@pytest.mark.slow
def test_the_guide_builds_as_a_site_with_no_broken_link_or_missing_page(tmp_path):
    """`mkdocs build --strict` fails on a link to a page or anchor that does not
    exist and on a page left out of the navigation (see mkdocs.yml)."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=CLONE, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    built = {p.stem for p in (tmp_path / "site").glob("*.html")}
    assert set(PAGES) <= built
    for page in (tmp_path / "site").glob("*.html"):  # nothing is fetched from elsewhere
        assert not re.search(r"<(?:script|link)[^>]+(?:src|href)=\"https?://",
                             page.read_text(encoding="utf-8")), page.name


def test_the_package_ships_the_guides_pages():
    assert GUIDE.resolve() == DOCS.resolve()
    assert {name for name, _ in contents()} == set(PAGES)  # each page is in the contents


@pytest.mark.parametrize("name", PAGES)
def test_every_link_of_a_served_page_leads_to_a_page_and_an_anchor_it_has(name):
    html = guide_page(name).html
    for href in re.findall(r'href="(/guide/[^"]*)"', html):
        target, _, anchor = href.removeprefix("/guide/").partition("#")
        served = guide_page(target or "index").html
        if anchor:
            assert f'id="{anchor}"' in served, (name, href)
    for anchor in re.findall(r'href="#([^"]+)"', html):
        assert f'id="{anchor}"' in html, (name, anchor)
    assert ".md" not in "".join(re.findall(r'href="([^"]*)"', html))


def test_a_path_into_the_clone_is_kept_as_text_and_raw_html_is_shown_as_text():
    html = render("See [the script](../scripts/setup) and <script>alert(1)</script>.")
    assert "the script" in html and "href" not in html
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_a_page_the_guide_does_not_have_is_refused():
    for name in ("nope", "../README", "", "index.md", "a" * 100):
        with pytest.raises(NoSuchPage):
            guide_page(name)


@settings(max_examples=200, deadline=None)  # no timing limit: the machine is shared
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
               max_size=40))
def test_a_heading_gets_the_id_the_site_gives_it(text):
    assert slug(text) == slugify(text, "-")


def test_repeated_headings_are_told_apart_as_the_site_does():
    html = render("# A\n\n## Notes\n\n## Notes\n\n## Notes\n")
    assert re.findall(r'id="([^"]+)"', html) == ["a", "notes", "notes_1", "notes_2"]
