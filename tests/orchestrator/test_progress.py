"""Whether calls make progress: noise is told apart from a change of meaning."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from noema.orchestrator.progress import ALIKE_RUN, alike, noise_free, repeats, seen_call

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)


@given(TEXT)
def test_removing_noise_twice_changes_nothing(text):
    assert noise_free(noise_free(text)) == noise_free(text)


@given(TEXT, TEXT)
def test_alike_is_reflexive_and_symmetric(first, second):
    a, b = noise_free(first), noise_free(second)
    assert alike(a, a)
    assert alike(a, b) == alike(b, a)


@given(st.lists(st.integers(0, 10**12), min_size=2, max_size=2), st.text("abc xyz", max_size=40))
def test_numbers_are_noise(numbers, words):
    first, second = (f"{words} at {n} and {n * 7}" for n in numbers)
    assert alike(noise_free(first), noise_free(second))


def test_a_hash_is_noise_and_a_short_word_is_not():
    assert noise_free("version 3f9a2c1e04 saved") == noise_free("version 77be00aa91 saved")
    assert noise_free("the cafe") != noise_free("the face")  # words of hex letters stay
    assert not alike(noise_free('{"path": "a.py"}'), noise_free('{"path": "b.py"}'))


def test_a_long_text_with_a_few_characters_changed_is_alike():
    body = "the same long note about the garden, the lamp and the harbour " * 4
    assert alike(noise_free("alpha.txt " + body), noise_free("omega.txt " + body))
    assert not alike(noise_free(body), noise_free(body[::-1]))


def history(calls):
    return [seen_call(tool, json.dumps(args), result) for tool, args, result in calls]


def test_repeats_count_calls_alike_in_arguments_and_in_results():
    ticking = history([("clock", {}, f"It is 18:{m:02d}") for m in range(ALIKE_RUN)])
    assert repeats(ticking, "clock", "{}") == ALIKE_RUN
    assert repeats(ticking, "clock", '{"zone": "Europe/Madrid"}') == 0
    paging = history([("page", {"offset": n}, f"page {n}: {w * 30}")
                      for n, w in enumerate(["river", "stone", "lamp", "bread"])])
    assert repeats(paging, "page", '{"offset": 9}') == 1  # only the newest result is alike itself
