"""An answer being written is rendered without raw Markdown markers
(`interfaces.web.streaming.heal`), at every prefix of a document."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from noema.interfaces.web.render import markdown_html_fresh
from noema.interfaces.web.streaming import heal

WORD = st.text(alphabet="abcdefghij", min_size=1, max_size=6)
WORDS = st.lists(WORD, min_size=1, max_size=4).map(" ".join)
INLINE = st.one_of(
    WORDS,
    WORDS.map(lambda w: f"**{w}**"),
    WORDS.map(lambda w: f"*{w}*"),
    WORDS.map(lambda w: f"`{w}`"),
    st.tuples(WORDS, WORD).map(lambda p: f"[{p[0]}](https://example.org/{p[1]})"),
)
LINE = st.lists(INLINE, min_size=1, max_size=5).map(" ".join)
BLOCK = st.one_of(
    LINE,
    LINE.map(lambda t: f"## {t}"),
    st.lists(LINE, min_size=1, max_size=3).map(lambda ls: "\n".join(f"- {x}" for x in ls)),
    st.lists(WORDS, min_size=1, max_size=3).map(lambda ls: "```\n" + "\n".join(ls) + "\n```"),
)
DOCUMENT = st.lists(BLOCK, min_size=1, max_size=5).map("\n\n".join)

CODE = re.compile(r"<(pre|code)>.*?</\1>", re.S)
TAG = re.compile(r"<[^>]+>")


def visible_text(html: str) -> str:
    """What a browser shows outside code (where markers are literal text)."""
    return TAG.sub("", CODE.sub("", html))


@settings(max_examples=150, deadline=None)
@given(DOCUMENT)
def test_no_prefix_of_a_document_shows_a_marker(document: str):
    for end in range(1, len(document) + 1):
        shown = visible_text(markdown_html_fresh(heal(document[:end])))
        for marker in ("**", "`", "##", "]("):
            assert marker not in shown, (document[:end], shown)


@settings(max_examples=100, deadline=None)
@given(DOCUMENT)
def test_a_finished_document_is_left_as_it_is(document: str):
    assert heal(document) == document


def test_plain_stars_and_snake_case_are_not_taken_for_markers():
    assert heal("2 * 3 = 6") == "2 * 3 = 6"
    assert heal("call read_file_now") == "call read_file_now"
    assert heal("so **very") == "so **very**"
    inline = heal("a ```py\nx = 1")  # not a fence: an inline code span, closed
    assert "`" not in visible_text(markdown_html_fresh(inline))
    assert heal("```py\nx = 1").endswith("\n```")
