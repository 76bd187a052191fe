"""A common name's dense stretches ranked by meaning: the places they are given among the hits."""

from __future__ import annotations

from array import array
from dataclasses import replace
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noema.memory.embeddings import EmbeddingError, Meaning, PackedVectors, dot_products, unit
from noema.memory.embeddings_worker import backfill
from noema.memory.search import HistorySearch, SearchTuning
from noema.memory.turns import NewTurn, TurnKind

START = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()

# Budgets small enough that "Ana", in a turn out of six here and there, is
# over them while the question's other words are not (as in test_search_stretches).
SMALL = SearchTuning(listed_postings=40, wide_postings=200, joined_postings=400,
                     common_min_turns=10**9)


class Concepts:
    """A made-up model whose axes are subjects, each named by several words:
    two texts are close in meaning without sharing a word."""

    name = "concepts"
    axes = (("cold", "weather", "jumpers", "freezing"), ("kayak", "river", "paddle"),
            ("money", "rent"))

    def __init__(self, fail: str | None = None) -> None:
        self.fail = fail

    def embed(self, texts):
        if self.fail:
            raise EmbeddingError(self.fail)
        return [unit([sum(t.lower().count(w) for w in axis) + 0.01 for axis in self.axes])
                for t in texts]

    def close(self) -> None:
        pass


def add(store, text, *, sender=None, minute=0, kind=TurnKind.USER):
    return store.append(NewTurn(kind, text, sender=sender), at=START + minute * 60)


def history(store):
    """Ana named here and there, turns about trips elsewhere, then a long
    conversation with her where the answer shares no word with the question."""
    minute = 0
    for n in range(600):
        add(store, f"{'ana wrote' if n % 6 == 0 else 'nothing much'} {n}", minute=minute)
        minute += 1
    for n in range(14):  # the question's word, without the person or the subject
        add(store, f"the trip number {n} was booked", minute=minute)
        minute += 1
    for n in range(30):
        add(store, f"talk {n} about money and rent", sender="Ana" if n % 2 else "Ben", minute=minute)
        minute += 1
        if n == 15:
            answer = add(store, "so freezing that I wore two jumpers", sender="Ana", minute=minute)
            minute += 1
    return answer


QUERY = "What was the weather like on Ana's trip?"


def searched(store, tuning, meaning=True, **options):
    model = Concepts()
    backfill(store, model)
    search = HistorySearch(store, tuning, meaning=Meaning(store, model) if meaning else None)
    return search.search(QUERY, **options)


def test_the_stretch_turn_closest_in_meaning_gets_a_place_the_words_would_not_give(store):
    answer = history(store)
    without = searched(store, replace(SMALL, meant_hits=0), limit=10)
    assert "Ana" in without.terms and without.unmeant is None
    assert answer.id not in [f.turn.id for f in without.hits]  # words and the rerank miss it
    found = searched(store, SMALL, limit=10)
    ids = [f.turn.id for f in found.hits]
    assert answer.id in ids and len(ids) == len(set(ids)) == 10
    # The places given are the last ones: the rerank's own best stay ahead.
    kept = 10 - SMALL.meant_hits
    assert ids[:kept] == [f.turn.id for f in without.hits][:kept]
    scores = [f.score for f in found.hits]
    assert scores == sorted(scores, reverse=True)


def test_places_go_only_to_turns_of_the_kinds_wanted(store):
    answer = history(store)
    reply = add(store, "freezing weather, jumpers on", sender="Ana", minute=10_000,
                kind=TurnKind.ASSISTANT)
    for n in range(10):
        add(store, f"more talk {n}", sender="Ana" if n % 2 else "Ben", minute=10_001 + n)
    hits = searched(store, SMALL, limit=10, roles=["assistant"]).hits
    assert answer.id not in [f.turn.id for f in hits]
    assert all(f.turn.kind is TurnKind.ASSISTANT for f in hits)
    assert reply.id in [f.turn.id for f in hits]


def test_no_meaning_no_places(store):
    history(store)
    plain = searched(store, SMALL, meaning=False, limit=10)
    none = searched(store, replace(SMALL, meant_hits=0), meaning=False, limit=10)
    assert [f.turn.id for f in plain.hits] == [f.turn.id for f in none.hits]


def test_a_rare_name_is_listed_and_gives_no_places(store):
    history(store)
    roomy = replace(SMALL, listed_postings=6_000, wide_postings=30_000, joined_postings=30_000)
    listed = searched(store, roomy, limit=10)
    assert "Ana" in listed.terms and "Ana" not in listed.joined
    assert listed.hits == searched(store, replace(roomy, meant_hits=0), limit=10).hits


def test_closest_orders_stored_vectors_by_their_cosine_to_the_query(store):
    ids = [add(store, text, minute=n).id for n, text in enumerate(
        ["rent is due", "the river was high", "cold and freezing", "paddle hard", "no vector"])]
    model = Concepts()
    backfill(store, model)
    meaning = Meaning(store, model)
    assert meaning.closest("kayak on the river", ids, 2) == [ids[3], ids[1]] or \
        meaning.closest("kayak on the river", ids, 2) == [ids[1], ids[3]]
    assert meaning.closest("weather", ids, 1) == [ids[2]]
    assert meaning.closest("weather", ids, 0) == []
    assert Meaning(store, Concepts(fail="down")).closest("weather", ids, 3) == []
    assert Meaning(store, Concepts()).closest("weather", [10**6], 3) == []  # no vector there


@pytest.mark.parametrize("places", [1, 3])
def test_as_many_places_as_tuned_and_never_more_hits_than_asked(store, places):
    history(store)
    found = searched(store, replace(SMALL, meant_hits=places), limit=5).hits
    base = searched(store, replace(SMALL, meant_hits=0), limit=5).hits
    assert len(found) == 5
    assert [f.turn.id for f in found][: 5 - places] == [f.turn.id for f in base][: 5 - places]


@given(st.integers(min_value=1, max_value=40).flatmap(lambda dims: st.tuples(
    st.lists(st.lists(st.integers(-127, 127), min_size=dims, max_size=dims), max_size=30),
    st.lists(st.integers(-127, 127), min_size=dims, max_size=dims))))
def test_packed_dot_products_equal_the_plain_ones(case):
    vectors, query = case
    packed = [array("b", v) for v in vectors]
    expected = [sum(a * b for a, b in zip(v, query, strict=True)) for v in vectors]
    assert dot_products(packed, array("b", query)) == expected


def test_dot_products_of_vectors_of_another_size_are_still_exact():
    query = array("b", [3, -4, 5])
    assert dot_products([array("b", [1, 1, 1]), array("b", [2, 2])], query) == [4, -2]
    assert dot_products([], query) == []


def test_packed_vectors_refuse_a_query_of_another_size_and_score_again_the_same():
    packed = PackedVectors([array("b", [1, -2, 3]), array("b", [-127, 127, 0])])
    assert packed.dot(array("b", [2, 2, 2])) == [4, 0]
    assert packed.dot(array("b", [-1, 0, 1])) == [2, 127]
    with pytest.raises(ValueError, match="2 dimensions"):
        packed.dot(array("b", [1, 1]))
    with pytest.raises(ValueError, match="same size"):
        PackedVectors([array("b", [1]), array("b", [1, 2])])


def test_closest_kept_packed_sees_vectors_written_since(store):
    ids = [add(store, text, minute=n).id for n, text in enumerate(["rent is due", "the river"])]
    model = Concepts()
    backfill(store, model)
    meaning = Meaning(store, model)
    assert meaning.closest("weather", ids, 2)[0] in ids
    later = add(store, "freezing cold weather", minute=5).id
    backfill(store, model)
    assert meaning.closest("weather", [*ids, later], 1) == [later]
