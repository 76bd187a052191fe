"""Only a plain YES or NO answers a question by mail (the rule itself, no server)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.channels.mail.plain_answer import NO_WORDS, YES_WORDS, plain_answer

QUOTED_QUESTION = ("On Tue, 7 Dec 2026, Noema <agent@noema.test> wrote:\n"
                   "> Your agent asks before it runs file_write.\n"
                   "> Reply with YES to allow it or NO to refuse it.\n")


@pytest.mark.parametrize("text, answer", [
    ("Yes", True), ("YES.", True), ("yes!\n", True), ("¡Sí!", True), ("si", True),
    ("Sí.", True), ("No.", False), ("NO!!", False), ("no", False),
    (f"Yes\n\n{QUOTED_QUESTION}", True),
    (f"no\n{QUOTED_QUESTION}", False),
    ("> yes\nno", False),
    ("Yes\nThanks\n\nSent from my phone", True),
    ("yes\n-- \nAna\nIs this my signature?", True),
    ("Yes\nYes", True),
    ("Yes\n\nFrom: Noema <agent@noema.test>\nSent: Monday\n"
     "Subject: Allow file_write? (question 0123456789ab)\n\nYour agent asks…", True),
    ("Sí\n\nDe: Noema <agent@noema.test>\nAsunto: Allow file_write?", True),
    # questioning, hedged or mixed: no answer
    ("Yes? What is this about? I never asked for it.", None),
    ("Yes\nWhat is this about?", None),
    ("Yes\n¿Qué es esto?", None),
    ("Yes\nNo.", None),
    ("yes, please", None), ("yes please", None), ("Yes, but not today", None),
    ("I say yes", None), ("Okay", None), ("Nope", None), ("allow", None),
    ("Yes?", None), ("yes...?", None), ("maybe", None), ("", None),
    ("> yes\n> yes", None), ("--\nyes", None), (QUOTED_QUESTION, None),
    ("El mar, Noema escribió:\n> YES", None),
])
def test_only_a_plain_word_on_the_first_line_answers(text, answer):
    assert plain_answer(text) is answer


WORDS = sorted(YES_WORDS | NO_WORDS)
_lines = st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                        blacklist_characters="\r\n"), max_size=60)


def _cased(word: str, data) -> str:
    return "".join(c.upper() if data.draw(st.booleans()) else c for c in word)


@settings(deadline=None)
@given(st.sampled_from(WORDS), st.text(alphabet=".!", max_size=3), st.data())
def test_a_plain_word_answers_whatever_is_quoted_below_it(word, punctuation, data):
    quoted = data.draw(st.lists(_lines, max_size=5))
    below = "\n".join("> " + line for line in quoted)
    text = f"{_cased(word, data)}{punctuation}\n\n{QUOTED_QUESTION}{below}"
    assert plain_answer(text) is (word in YES_WORDS)


@settings(deadline=None)
@given(st.lists(_lines, max_size=8))
def test_quoted_text_never_answers_for_the_person(lines):
    quoted = "\n".join("> " + line for line in lines)
    assert plain_answer(quoted) is None
    assert plain_answer(f"{quoted}\nno") is False


@settings(deadline=None)
@given(st.sampled_from(WORDS), _lines.filter(lambda s: s.strip(". !\n\r") != ""))
def test_a_word_with_anything_else_on_its_line_is_no_answer(word, rest):
    # Only "." and "!" may follow the word; anything else is something to interpret.
    assert plain_answer(f"{word}{rest}") is None or rest.strip(".! \t\u00a0") == ""


# A line that starts a signature or a quoted block ends what the person wrote.
_STARTS_QUOTED = re.compile(r"\s*(-- |>|(from|de):\s)", re.IGNORECASE)


@settings(deadline=None)
@given(st.sampled_from(WORDS), _lines.filter(lambda t: not _STARTS_QUOTED.match(t)))
def test_a_question_the_person_writes_beside_the_word_unmakes_it(word, text):
    assert plain_answer(f"{word}\n{text}?\n\n{QUOTED_QUESTION}") is None


@settings(deadline=None)
@given(st.sampled_from(WORDS), st.sampled_from(WORDS), st.data())
def test_both_answers_at_once_are_no_answer(first, second, data):
    text = f"{_cased(first, data)}\n{_cased(second, data)}."
    expected = (first in YES_WORDS) if (first in YES_WORDS) == (second in YES_WORDS) else None
    assert plain_answer(text) is expected
