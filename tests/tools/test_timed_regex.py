"""The time-limited engine finds exactly the lines Python's `re` finds, line by
line, whatever the first pass over the whole file does."""

from __future__ import annotations

import re
import threading

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.tools.timed_regex import Budget, compile_query

QUERIES = [
    r"a",
    r"^a",
    r"a$",
    r"^$",
    r"^\s*b",
    r"b\s*$",
    r"a\sb",  # \s could cross a line break in a whole file
    r"[^x]+b",  # so could a negated class
    r"(?<=a)b",
    r"(?<!\s)b",  # negative lookbehind: a line's start has nothing before it
    r"a(?!\s)",  # negative lookahead: nor anything after its end
    r"\Aa",
    r"b\Z",
    r"\bab\b",
    r"\Bb",
    r"(?s)a.b",
    r"(?m)^b",
    r"(a)\1",
    r"(?>a\s*)$",  # an atomic group could swallow a line break
    r"a*+b",
    r"(?i)AB",
    r".",
    r"x*",
]
# The regex package's own syntax, which `re` would read as literal text.
REGEX_ONLY = [
    r"(?r)a\sb",  # reverse search returns the rightmost match
    r"(?:a\nb){e<=1}",  # fuzzy matching
]

TEXT = st.text(alphabet="ab \t.\n\r\x0b\x0c\u2028\x85", max_size=40)


def _expected(query: str, text: str) -> list[int]:
    """Line by line, with Python's `re` where the syntax is its own."""
    pattern = regex.compile(query, regex.VERSION0) if query in REGEX_ONLY else re.compile(query)
    return [n for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]


@pytest.mark.parametrize("query", QUERIES + REGEX_ONLY)
@settings(max_examples=60, deadline=None, derandomize=True)
@given(text=TEXT)
def test_the_same_lines_as_re(query: str, text: str):
    budget = Budget(threading.Event())
    found = [n for n, _ in budget.lines(compile_query(query), text, "f.txt")]
    assert found == _expected(query, text)


def test_patterns_that_a_whole_file_pass_could_miss_go_line_by_line():
    for query in (r"\Aa", r"b\Z", r"(?<!a)b", r"a(?!b)", r"(?>a)", r"a++", r"(?-m:^a)",
                  r"(?r)ab", r"(?:ab){e<=1}", r"a(*SKIP)b"):
        assert compile_query(query).whole is None, query
    for query in (r"^a", r"a$", r"(?<=a)b", r"\bab"):
        assert compile_query(query).whole is not None, query


def test_windows_line_endings():
    text = "first\r\nsecond line\r\nthird\r\n"
    budget = Budget(threading.Event())
    assert list(budget.lines(compile_query(r"line$"), text, "f")) == [(2, "second line")]
    assert list(budget.lines(compile_query(r"^third$"), text, "f")) == [(3, "third")]
