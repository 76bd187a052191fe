"""The pure parts of the query plan's scoring: which words found a candidate,
and what each word weighs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from noema.memory.search import SearchTuning, Term, _Gathered, term_weights


def word(text: str, postings: int, *, name: bool = False) -> Term:
    return Term(text, f'"{text}"', postings, (text.lower(),), name=name)


WORDS = (word("violin", 40), word("lesson", 900), word("moved", 5_000), word("Ana", 300, name=True))


@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(min_value=1, max_value=30), max_size=20),
            st.sets(st.sampled_from(range(len(WORDS))), min_size=1),
        ),
        max_size=12,
    ),
    st.lists(st.floats(min_value=0.0, max_value=20.0), min_size=len(WORDS), max_size=len(WORDS)),
)
def test_a_word_counts_once_however_many_lists_found_the_turn(finds, per_word):
    gathered = _Gathered(WORDS)
    holding: dict[int, set[int]] = {}
    for turn_ids, words in finds:
        gathered.add(turn_ids, *(WORDS[n] for n in words))
        for turn_id in turn_ids:
            holding.setdefault(turn_id, set()).update(words)
    weights = gathered.weights(per_word)
    assert weights.keys() == holding.keys()
    for turn_id, words in holding.items():
        assert abs(weights[turn_id] - sum(per_word[n] for n in words)) < 1e-9


def test_the_same_list_twice_scores_like_once():
    gathered = _Gathered(WORDS)
    gathered.add([7, 8], WORDS[0], WORDS[1])  # a time bucket, every word together
    gathered.add([7], WORDS[0])  # then the rarest word alone in the newest stretch
    assert gathered.weights([2.0, 1.0, 0.5, 0.1]) == {7: 3.0, 8: 3.0}


def test_rarer_words_weigh_more_and_every_weight_is_positive():
    weights = term_weights(WORDS[:3], 100_000, SearchTuning())
    assert weights[0] > weights[1] > weights[2] > 0


def test_a_name_weighs_at_most_its_share_of_the_least_telling_content_word():
    tuning = SearchTuning(name_weight=0.5)
    weights = dict(zip((t.text for t in WORDS), term_weights(WORDS, 100_000, tuning), strict=True))
    assert weights["Ana"] == weights["moved"] * 0.5  # rarer than "moved", yet capped below it


def test_a_query_of_names_alone_keeps_their_weight():
    names = (word("Ana", 300, name=True), word("Jon", 3_000, name=True))
    weights = term_weights(names, 100_000, SearchTuning())
    assert weights[0] > weights[1] > 0
