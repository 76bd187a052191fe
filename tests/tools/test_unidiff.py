"""Applying model-written unified diffs."""

from __future__ import annotations

import pytest

from noema.tools.unidiff import PatchError, apply, parse

TEXT = "".join(f"line {n}\n" for n in range(1, 21))


def test_applies_a_plain_diff():
    diff = "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE THREE\n line 4\n"
    assert apply(TEXT, diff) == TEXT.replace("line 3\n", "LINE THREE\n")


def test_wrong_line_numbers_are_tolerated():
    diff = "@@ -40,3 +40,3 @@\n line 10\n-line 11\n+eleven\n line 12\n"
    assert apply(TEXT, diff) == TEXT.replace("line 11\n", "eleven\n")


def test_several_hunks_in_order():
    diff = (
        "@@ -1,2 +1,2 @@\n-line 1\n+first\n line 2\n"
        "@@ -19,2 +19,3 @@\n line 19\n line 20\n+line 21\n"
    )
    out = apply(TEXT, diff)
    assert out.startswith("first\nline 2\n") and out.endswith("line 20\nline 21\n")


def test_a_hunk_that_does_not_fit_changes_nothing():
    diff = "@@ -1,2 +1,2 @@\n-line 1\n+first\n@@ -5,2 +5,2 @@\n-line 99\n+x\n"
    with pytest.raises(PatchError, match="hunk 2"):
        apply(TEXT, diff)


def test_unnumbered_ambiguous_hunk_is_refused():
    with pytest.raises(PatchError, match="matches 2 places"):
        apply("a\nb\na\nb\n", "@@ @@\n a\n-b\n+c\n")


def test_trailing_whitespace_is_forgiven():
    assert (
        apply("x = 1   \ny = 2\n", "@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n")
        == "x = 1   \ny = 3\n"
    )


def test_new_file_and_missing_final_newline():
    assert apply("", "--- /dev/null\n+++ b/new\n@@ -0,0 +1,2 @@\n+a\n+b\n") == "a\nb\n"
    diff = "@@ -1 +1 @@\n-old\n+new\n\\ No newline at end of file\n"
    assert apply("old\n", diff) == "new"


def test_crlf_files_keep_their_line_ends():
    assert apply("a\r\nb\r\n", "@@ -1,2 +1,2 @@\n a\n-b\n+c\n") == "a\r\nc\r\n"


def test_two_files_are_refused():
    diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(PatchError, match="more than one file"):
        parse(diff)


def test_garbage_is_refused():
    with pytest.raises(PatchError, match="no hunks"):
        parse("please change line 3 to foo")
    with pytest.raises(PatchError, match="not part of a hunk"):
        parse("@@ -1 +1 @@\n-a\n*b\n")


def test_adding_after_a_last_line_without_newline():
    assert apply("a", "@@ -1 +1,2 @@\n a\n+b\n") == "a\nb\n"
    assert apply("a\nz", "@@ -1,2 +1,2 @@\n-a\n+A\n z\n") == "A\nz"
