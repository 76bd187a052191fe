"""The orders the search relies on: turn IDs newest first, the best scores with
ties to the newer turn, and a scratch index for snippets left empty after each query."""

from __future__ import annotations

import heapq
from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from noema.memory.search import HistorySearch, _best
from noema.memory.turns import NewTurn, TurnKind

START = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()


@given(
    st.dictionaries(
        st.integers(min_value=1, max_value=10_000),
        st.sampled_from([0.25, 0.5, 1.0, 1.5, 3.0]),  # few values: many ties
        max_size=300,
    ),
    st.integers(min_value=0, max_value=320),
)
def test_the_best_scores_are_those_a_heap_would_pick_with_ties_to_the_newer_turn(scores, count):
    expected = heapq.nlargest(count, scores, key=lambda i: (scores[i], i))
    assert _best(scores, count) == expected


def test_turn_ids_come_newest_first_within_the_range_asked(store):
    for n in range(12):
        text = "the lighthouse keeper" if n % 3 else "the ferry left early"
        store.append(NewTurn(TurnKind.USER, text), at=START + n)
    search = HistorySearch(store)
    try:
        assert search._ids('"lighthouse"', 1, 12) == [12, 11, 9, 8, 6, 5, 3, 2]
        assert search._ids('"lighthouse"', 4, 9) == [9, 8, 6, 5]
        assert search._ids('"keeper" AND ("ferry" OR "lighthouse")', 1, 7) == [6, 5, 3, 2]
        assert search._ids('"submarine"', 1, 12) == []
    finally:
        search.close()


def test_the_same_query_twice_gives_the_same_snippets(store):
    for n in range(5):
        store.append(NewTurn(TurnKind.USER, f"note {n}: the lighthouse keeper waved"), at=START + n)
    search = HistorySearch(store)
    try:
        first = search.search("lighthouse keeper")
        second = search.search("lighthouse keeper")
    finally:
        search.close()
    assert first.hits and [h.snippet for h in first.hits] == [h.snippet for h in second.hits]
    assert all("«lighthouse»" in h.snippet for h in second.hits)
