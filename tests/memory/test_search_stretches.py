"""A common name searched where it is dense: the stretches of its person's conversations."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from noema.memory.search import HistorySearch, SearchTuning, dense_stretches
from noema.memory.turns import NewTurn, TurnKind

START = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()


@given(
    st.sets(st.integers(min_value=1, max_value=300), max_size=80),
    st.integers(min_value=1, max_value=6),
    st.integers(min_value=0, max_value=30),
)
def test_dense_stretches_keep_the_turns_with_enough_others_close_by(ids, more, span):
    expected = sorted(
        turn_id for turn_id in ids
        # some window of `span` turns holding this one holds `more` others
        if any(sum(start <= i <= start + span for i in ids) > more
               for start in range(turn_id - span, turn_id + 1))
    )
    assert dense_stretches(sorted(ids), more, span) == expected


# Listing budgets small enough that "Ana", in a turn out of six here and there,
# is over them while the words of the question are not; a name is dense where
# nine of its turns fit in 41 (the defaults: 8 more, twice a reach of 20).
SMALL = SearchTuning(listed_postings=40, wide_postings=200, joined_postings=400,
                     common_min_turns=10**9)


def add(store, text, *, sender=None, minute=0):
    return store.append(NewTurn(TurnKind.USER, text, sender=sender), at=START + minute * 3600)


def history(store):
    """Ana named here and there in a long history, then a conversation with her
    where the answer holds none of the question's words."""
    minute = 0
    for n in range(600):
        words = "ana wrote" if n % 6 == 0 and n < 500 else "nothing much"
        add(store, f"{words} {n}", minute=minute)
        minute += 1
    for n in range(4):
        add(store, f"a kayak number {n} for sale", minute=minute)  # the word alone, elsewhere
        minute += 1
    add(store, "how was the weekend", sender="Ben", minute=minute)
    add(store, "we went down the river by kayak", sender="Ana", minute=minute)
    answer = add(store, "it was so cold I wore two jumpers", sender="Ana", minute=minute)
    for n in range(20):
        add(store, f"talk {n}", sender="Ana" if n % 2 else "Ben", minute=minute)
    return answer


def test_a_common_name_finds_its_persons_turns_that_share_no_other_word(store):
    answer = history(store)
    query = "How was Ana's kayak trip?"
    with_stretches = HistorySearch(store, SMALL).search(query, limit=10)
    assert "Ana" in with_stretches.terms
    assert answer.id in [f.turn.id for f in with_stretches.hits]
    found = next(f for f in with_stretches.hits if f.turn.id == answer.id)
    assert found.matched == ("Ana",)
    without = HistorySearch(store, replace(SMALL, name_stretch_turns=0)).search(query, limit=10)
    assert "Ana" not in without.terms
    assert all(f.matched != ("Ana",) for f in without.hits)


def test_the_name_here_and_there_adds_no_candidates(store):
    history(store)
    result = HistorySearch(store, SMALL).search("How was Ana's kayak trip?", limit=50)
    lone = [f for f in result.hits if f.turn.content.startswith("ana wrote")]
    assert lone == []


def test_stretches_kept_from_one_search_grow_with_the_turns_added_after_it(store):
    history(store)
    search = HistorySearch(store, SMALL)
    query = "How was Ana's kayak trip?"
    search.search(query)
    minute = 10_000
    for n in range(6):  # a new conversation with Ana, the name dense again
        add(store, f"more news {n}", sender="Ana", minute=minute + n)
        add(store, f"tell me {n}", sender="Ben", minute=minute + n)
    later = add(store, "the kayak leaks", sender="Ana", minute=minute + 7)
    for n in range(4):
        add(store, f"oh no {n}", sender="Ana", minute=minute + 8 + n)
    kept = search.search(query, limit=50)
    fresh = HistorySearch(store, SMALL).search(query, limit=50)
    assert [(f.turn.id, f.score) for f in kept.hits] == [(f.turn.id, f.score) for f in fresh.hits]
    assert later.id in [f.turn.id for f in kept.hits]
    assert any(f.matched == ("Ana",) and f.turn.content.startswith("oh no") for f in kept.hits)
