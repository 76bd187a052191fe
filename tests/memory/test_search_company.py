"""The company a candidate keeps: turns among many that hold a name of the query."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from noema.memory.search import HistorySearch, SearchTuning, Term, _Gathered
from noema.memory.turns import NewTurn, TurnKind

START = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()
ALL_WORDS = SearchTuning(common_min_turns=10**9)


def word(text: str, postings: int, *, name: bool = False) -> Term:
    return Term(text, f'"{text}"', postings, (text.lower(),), name=name)


def add(store, text, *, sender=None, minute=0):
    return store.append(NewTurn(TurnKind.USER, text, sender=sender), at=START + minute * 60)


WORDS = (word("violin", 10), word("lesson", 10), word("Ana", 10, name=True), word("Ben", 10, name=True))


@given(
    st.dictionaries(st.integers(min_value=1, max_value=80), st.integers(min_value=1, max_value=15)),
    st.integers(min_value=0, max_value=15),
    st.integers(min_value=1, max_value=15),
)
def test_company_counts_the_other_holders_of_the_words_within_reach(masks, reach, bits):
    gathered = _Gathered(WORDS)
    for turn_id, mask in masks.items():
        gathered.add([turn_id], *(w for bit, w in enumerate(WORDS) if mask >> bit & 1))
    expected = {}
    for turn_id in masks:
        near = sum(
            1 for other, mask in masks.items()
            if other != turn_id and abs(other - turn_id) <= reach and mask & bits
        )
        if near > 1:  # one other alone is no company
            expected[turn_id] = near
    assert gathered.company(bits, reach) == expected


def test_a_reply_among_the_persons_turns_outranks_a_lone_turn_naming_her(store):
    for n in range(40):
        add(store, f"nothing much {n}", minute=n)
    minute = 100
    for n in range(6):  # Ana talks with Ben about her week
        add(store, f"busy week {n}", sender="Ana", minute=minute)
        minute += 1
    reply = add(store, "your violin lesson moved to friday", sender="Ben", minute=minute)
    for n in range(6):
        add(store, f"thanks, see you {n}", sender="Ana", minute=minute + 1 + n)
    for n in range(40):
        add(store, f"still nothing {n}", minute=minute + 10 + n)
    lone = add(store, "ana violin lesson moved", minute=minute + 60)  # a note naming her
    for n in range(40):
        add(store, f"quiet {n}", minute=minute + 61 + n)
    query = "When was Ana's violin lesson moved?"
    kept = [f.turn.id for f in HistorySearch(store, ALL_WORDS).search(query).hits]
    assert kept.index(reply.id) < kept.index(lone.id)
    alone = HistorySearch(store, replace(ALL_WORDS, company_boost=0.0)).search(query)
    plain = [f.turn.id for f in alone.hits]
    assert plain.index(lone.id) < plain.index(reply.id)  # by its words, the lone turn wins
