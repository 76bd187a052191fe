"""search_full_history: ranked, filtered, bounded, with snippets."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from noema.memory.queries import date_spans
from noema.memory.search import HistorySearch, SearchTuning
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind

DAY = 86_400.0
START = datetime(2025, 3, 1, 10, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def dated(store: TurnStore) -> TurnStore:
    """Two days of conversation between Ana and the agent, plus noise."""
    lines = [
        (0, TurnKind.USER, "Ana", "How should we plan the kitchen renovation?"),
        (1, TurnKind.ASSISTANT, None, "Start with the plumbing, then the cabinets."),
        (2, TurnKind.USER, "Ana", "What colour for the tiles?"),
        (3, TurnKind.ASSISTANT, None, "A pale green would suit the oak cabinets."),
        (DAY, TurnKind.USER, "Luis", "Did the plumber call back about the leak?"),
        (DAY + 1, TurnKind.ASSISTANT, None, "Not yet; he promised Thursday."),
        (DAY + 2, TurnKind.USER, "Luis", "Remind me about the invoice from the plumber."),
        (DAY + 3, TurnKind.ASSISTANT, None, "I will remind you on Friday."),
    ]
    for offset, kind, sender, text in lines:
        store.append(NewTurn(kind, text, sender=sender), at=START + offset)
    for n in range(30):
        store.append(NewTurn(TurnKind.NOTE, f"unrelated note {n} about weather and trains"),
                     at=START + 2 * DAY + n)
    return store


def ids(result) -> list[int]:
    return [f.turn.id for f in result.hits]


def test_the_best_match_comes_first_with_a_snippet(dated):
    found = HistorySearch(dated).search("what colour did we choose for the tiles")
    assert found.hits[0].turn.id == 3
    assert "«tiles»" in found.hits[0].snippet
    assert "what" in found.dropped and "tiles" in found.terms


def test_an_answer_is_found_through_its_question(dated):
    # "pale green" never mentions tiles; its neighbour does
    found = HistorySearch(dated).search("tiles", limit=3)
    assert 4 in ids(found)
    assert found.hits[0].turn.id == 3


def test_roles_and_time_windows_filter(dated):
    search = HistorySearch(dated)
    assert all(f.turn.kind is TurnKind.ASSISTANT for f in search.search("plumber", roles=["assistant"]).hits)
    assert ids(search.search("plumber", roles=["assistant"]))
    later = search.search("plumbing plumber", since=START + DAY / 2)
    assert ids(later) and all(f.turn.ts >= START + DAY / 2 for f in later.hits)
    earlier = search.search("plumbing plumber", until=START + DAY / 2)
    assert ids(earlier) and all(f.turn.ts <= START + DAY / 2 for f in earlier.hits)
    with pytest.raises(ValueError):
        search.search("plumber", roles=["robot"])


def test_a_named_sender_and_a_named_date_are_favoured(dated):
    search = HistorySearch(dated)
    assert search.search("what did Luis say about the plumber").hits[0].turn.sender == "Luis"
    on_the_day = search.search("plumber on 2 March 2025")
    assert on_the_day.hits[0].turn.ts >= START + DAY - 11 * 3600


def test_recall_turns_are_never_returned(store):
    store.append(NewTurn(TurnKind.USER, "the quarterly budget spreadsheet"))
    store.append(NewTurn(TurnKind.TOOL_CALL, tool_name="search_full_history", call_id="c",
                         arguments='{"query": "quarterly budget"}'))
    store.append(NewTurn(TurnKind.TOOL_RESULT, "[turn 1 · user · x]\nthe quarterly budget",
                         tool_name="search_full_history", call_id="c"))
    assert ids(HistorySearch(store).search("quarterly budget")) == [1]


def test_phrases_prefixes_and_stop_word_queries(dated):
    search = HistorySearch(dated)
    assert ids(search.search('"oak cabinets"'))[0] == 4
    assert 1 in ids(search.search("renov*"))
    assert search.search("what did we do").terms  # nothing but stop words still searches
    assert ids(search.search("zzzz qqqq")) == []


def test_a_query_of_common_words_widens_by_time_buckets_and_says_from_when(store):
    for n in range(60):
        store.append(NewTurn(TurnKind.USER, f"status update number {n}"), at=START + n * DAY)
    tuning = SearchTuning(listed_postings=20, wide_postings=20, bucket_postings=20, common_min_turns=10**9)
    one = HistorySearch(store, replace(tuning, buckets=1))
    found = one.search("status update", limit=50)
    assert found.recent_only == 20 and min(ids(found)) == 41
    assert found.searched_from == START + 40 * DAY
    two = HistorySearch(store, replace(tuning, buckets=2))
    assert min(ids(two.search("status update", limit=50))) == 21


def test_date_spans_read_common_forms():
    day = datetime(2023, 2, 1, tzinfo=timezone.utc).timestamp()
    for text in ("on 1 February, 2023", "February 1st, 2023", "2023-02-01", "el 1 de febrero de 2023"):
        assert (day, day + DAY) in date_spans(text), text
    month = date_spans("in May 2023")
    assert month == [(datetime(2023, 5, 1, tzinfo=timezone.utc).timestamp(),
                      datetime(2023, 6, 1, tzinfo=timezone.utc).timestamp())]
    assert date_spans("no date here") == []
