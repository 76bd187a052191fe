"""How the query plan chooses the candidates it refines: by their own words,
and by the words found in the turns beside them."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from noema.memory.search import HistorySearch, SearchTuning, Term, _Gathered
from noema.memory.turns import NewTurn, TurnKind

START = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()
ALL_WORDS = SearchTuning(common_min_turns=10**9)


def add(store, text, *, sender=None, minute=0):
    return store.append(NewTurn(TurnKind.USER, text, sender=sender), at=START + minute * 60)


def ids(found) -> list[int]:
    return [f.turn.id for f in found.hits]


def word(text: str, postings: int, *, name: bool = False) -> Term:
    return Term(text, f'"{text}"', postings, (text.lower(),), name=name)


def test_the_words_beside_a_turn_are_counted_once_each_and_only_when_it_lacks_them():
    keeper, light, ferry = word("keeper", 10), word("lighthouse", 10), word("ferry", 10)
    gathered = _Gathered((keeper, light, ferry))
    gathered.add([10, 30], keeper)
    gathered.add([11, 12, 30], light)
    gathered.add([12, 40], ferry)
    beside = gathered.beside([1.0, 2.0, 4.0], reach=1)
    assert beside[11] == 1.0 + 4.0  # keeper before it, ferry after it
    assert beside[10] == 2.0  # lighthouse after it
    assert 12 not in beside  # its neighbour holds nothing it lacks
    assert 30 not in beside and 40 not in beside  # nothing within reach


WORDS = (word("keeper", 10), word("lighthouse", 10), word("ferry", 10), word("Ana", 10, name=True))


@given(
    st.dictionaries(st.integers(min_value=1, max_value=60), st.integers(min_value=1, max_value=15)),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=0, max_value=25),
)
def test_the_window_and_the_stretch_agree_with_looking_at_every_turn_in_reach(masks, reach, wide):
    gathered = _Gathered(WORDS)
    for turn_id, mask in masks.items():
        gathered.add([turn_id], *(w for bit, w in enumerate(WORDS) if mask >> bit & 1))
    per_word = [1.0, 2.0, 4.0, 8.0]

    def weight(mask: int) -> float:
        return sum(w for bit, w in enumerate(per_word) if mask >> bit & 1)

    def union(turn_id: int, span: int) -> int:
        found = 0
        for other, mask in masks.items():
            if abs(other - turn_id) <= span:
                found |= mask
        return found

    beside = gathered.beside(per_word, reach)
    for turn_id, mask in masks.items():
        extra = union(turn_id, reach) & ~mask
        assert beside.get(turn_id, 0.0) == weight(extra)
    covered = gathered.covered(per_word, wide, masks)
    for turn_id in masks:
        assert covered[turn_id] == weight(union(turn_id, wide)) / sum(per_word)


def test_a_turn_whose_neighbours_hold_the_other_words_is_found_among_many_that_hold_one(store):
    add(store, "the keeper waved")
    target = add(store, "we stayed at the lighthouse", minute=1)
    add(store, "then the ferry left", minute=2)
    minute = 10
    for n in range(30):  # newer turns holding one of the words each, alone among filler
        for text in ("lighthouse", "keeper", "ferry"):
            add(store, f"a {text} {n}", minute=minute)
            add(store, f"nothing to say {n}", minute=minute + 1)
            add(store, f"still nothing {n}", minute=minute + 2)
            minute += 3
    tuning = replace(ALL_WORDS, candidates=3, window_candidates=1, window_reach=1)
    found = HistorySearch(store, tuning).search("lighthouse keeper ferry")
    assert target.id in ids(found)
    alone = HistorySearch(store, replace(tuning, window_share=0.0)).search("lighthouse keeper ferry")
    assert target.id not in ids(alone)  # by its own word it ties with ninety newer turns


def test_the_best_by_their_own_words_keep_their_places_beside_the_window(store):
    old = add(store, "status report for the bridge")
    for n in range(60):  # each holds one word and has the other beside it
        add(store, ("status" if n % 2 else "report") + f" line {n}", minute=n + 1)
    found = HistorySearch(store, replace(ALL_WORDS, candidates=4, window_candidates=2)).search(
        "status report")
    assert found.hits[0].turn.id == old.id


def test_the_stretch_around_a_turn_covers_the_words_found_within_reach_itself_included():
    keeper, light, ferry = word("keeper", 10), word("lighthouse", 10), word("ferry", 10)
    gathered = _Gathered((keeper, light, ferry))
    gathered.add([100, 200], keeper)
    gathered.add([110], light)
    gathered.add([125, 300], ferry)
    covered = gathered.covered([1.0, 1.0, 2.0], reach=20, wanted=[110, 200, 300])
    assert covered == {110: 1.0, 200: 0.25, 300: 0.5}


def test_a_turn_in_a_stretch_about_the_question_outranks_a_lone_match_of_the_same_words(store):
    for n in range(40):
        add(store, f"nothing much {n}", minute=n)
    kept = add(store, "the harbour trip was cancelled", minute=100)
    for n in range(4):  # past the reach of the neighbours' loans, inside the stretch
        add(store, f"filler {n}", minute=101 + n)
    add(store, "the weather turned stormy", minute=105)
    for n in range(40):
        add(store, f"still nothing {n}", minute=106 + n)
    lone = add(store, "the harbour trip was cancelled", minute=200)
    for n in range(40):
        add(store, f"quiet {n}", minute=201 + n)
    query = "harbour trip stormy weather"
    found = ids(HistorySearch(store, ALL_WORDS).search(query))
    assert found.index(kept.id) < found.index(lone.id)
    plain = ids(HistorySearch(store, replace(ALL_WORDS, stretch_boost=0.0)).search(query))
    assert plain.index(lone.id) < plain.index(kept.id)  # equal by their words, the newer first
