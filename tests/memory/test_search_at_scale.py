"""The query plan of search_full_history when words are too common for the budget.

A real store reaches these limits at hundreds of thousands of turns; here the
budgets are shrunk so a few hundred turns reach them the same way.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone

from noema.memory.recall_tools import memory_tools
from noema.memory.search import HistorySearch, SearchTuning, Term, plan_query
from noema.memory.turns import NewTurn, TurnKind
from noema.providers.base import ToolCall
from noema.tools.registry import ToolContext, ToolRegistry

START = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()
SMALL = SearchTuning(listed_postings=60, wide_postings=60, joined_postings=600, bucket_postings=60,
                     common_min_turns=10**9)


def fill(store, lines, *, sender=None, start=0):
    for n, text in enumerate(lines):
        store.append(NewTurn(TurnKind.USER, text, sender=sender(n) if sender else None),
                     at=START + (start + n) * 60)


def ids(found) -> list[int]:
    return [f.turn.id for f in found.hits]


def test_a_name_in_every_turn_does_not_hide_the_rarer_content_words(store):
    filler = ["lesson plans for the week", "moved the chairs again", "a violin case by the door"]
    fill(store, [filler[n % 3] + f" {n}" for n in range(300)], sender=lambda n: "Ana")
    target = store.append(NewTurn(TurnKind.USER, "the violin lesson moved to Thursday", sender="Ana"),
                          at=START + 400 * 60)
    fill(store, [filler[n % 3] for n in range(100)], sender=lambda n: "Ana", start=500)
    found = HistorySearch(store, SMALL).search("When did Ana say the violin lesson moved?")
    assert found.hits[0].turn.id == target.id
    assert "Ana" not in found.terms  # in every turn: a boost, not a word to search
    alone = HistorySearch(store, SMALL).search("what did Ana say")
    assert alone.hits and alone.searched_from is not None  # her newest turns, saying so


def test_a_rare_name_joins_the_common_words_instead_of_replacing_them(store):
    people = ("Luis", "Marta", "Pablo")
    fill(store, [f"the garden needs water {n}" for n in range(200)], sender=lambda n: people[n % 3])
    fill(store, [f"news about water and the garden {n}" for n in range(20)],
         sender=lambda n: "Ana", start=300)
    target = store.append(NewTurn(TurnKind.USER, "my garden got no water at all", sender="Ana"),
                          at=START + 400 * 60)
    found = HistorySearch(store, replace(SMALL, listed_postings=30)).search(
        "What did Ana say about the garden water?")
    assert found.hits[0].turn.id == target.id
    assert set(found.joined) == {"garden", "water"} and found.anchors == ("Ana",)


def test_a_scope_widened_by_time_buckets_still_finds_an_old_conversation(store):
    old = store.append(NewTurn(TurnKind.USER, "status report for the bridge"), at=START)
    fill(store, [("status" if n % 2 else "report") + f" line {n}" for n in range(400)], start=1)
    search = HistorySearch(store, replace(SMALL, buckets=8))
    found = search.search("status report")
    assert old.id in ids(found) and found.searched_from is None
    narrow = HistorySearch(store, replace(SMALL, buckets=1)).search("status report")
    assert old.id not in ids(narrow) and narrow.searched_from is not None


async def test_the_tool_says_which_words_were_joined_or_left_out_and_from_when(store):
    fill(store, [f"alpha beta gamma {n}" for n in range(200)])
    fill(store, ["delta gamma"] * 10, start=300)  # gamma a little commoner than beta
    registry = ToolRegistry(memory_tools(store, HistorySearch(store, replace(SMALL, joined_postings=15))))

    async def search(query: str) -> str:
        call = ToolCall("c", "search_full_history", json.dumps({"query": query}))
        result = await registry.call(call, ToolContext("c", 0, 1))
        assert not result.is_error
        return result.content

    said = await search("delta beta gamma")
    assert "Too common to search alone: beta; found only in turns that also hold delta" in said
    assert "Not searched, too common: gamma" in said
    common = await search("alpha gamma")
    assert "only turns from 2024-01-01 on were searched" in common
    assert "until=2024-01-01" in common


def test_with_every_word_over_the_budget_the_rarest_is_listed_over_the_whole_history(store):
    old = store.append(NewTurn(TurnKind.USER, "the bridge status report is late"), at=START)
    fill(store, [("status" if n % 2 else "report") + f" line {n}" for n in range(400)], start=1)
    fill(store, [f"the bridge over the river is closed again today {n}" for n in range(100)], start=500)
    wide = HistorySearch(store, replace(SMALL, wide_postings=150))
    found = wide.search("bridge status report")
    assert found.searched_from is None and found.recent_only is None
    assert old.id in ids(found)  # the oldest turn, the only one with all three words
    narrow = HistorySearch(store, replace(SMALL, buckets=1)).search("bridge status report")
    assert narrow.searched_from is not None and old.id not in ids(narrow)


def test_the_plan_lists_the_rarest_word_only_up_to_the_wide_budget():
    def term(text: str, postings: int) -> Term:
        return Term(text, f'"{text}"', postings, (text,))

    words = [term("bridge", 120), term("status", 200), term("report", 200)]
    listed = plan_query(words, replace(SMALL, wide_postings=150))
    assert [t.text for t in listed.listed] == ["bridge"] and not listed.together
    assert {t.text for t in listed.joined} == {"status", "report"}
    together = plan_query(words, replace(SMALL, wide_postings=100))
    assert not together.listed and [t.text for t in together.together] == ["bridge", "status", "report"]


async def test_the_tool_says_what_each_hit_matched_and_what_no_hit_holds(store):
    fill(store, ["Ana: we signed the lease for the dance studio on Elm Street",
                 "great news, congratulations",
                 "the weather is grey today"], sender=lambda n: ("Ana", "Luis", "Ana")[n])
    registry = ToolRegistry(memory_tools(store, HistorySearch(store)))
    call = ToolCall("c", "search_full_history", json.dumps({"query": "dance studio opening party"}))
    said = (await registry.call(call, ToolContext("c", 0, 1))).content
    assert "3 turns" in said  # what the search ranged over
    assert "matched: dance, studio" in said or "matched: studio, dance" in said
    assert "matched no word itself" in said  # the reply, lifted by the turn before it
    assert "In no turn at all: opening, party." in said
    lone = (await registry.call(ToolCall("d", "search_full_history", json.dumps(
        {"query": "weather studio"})), ToolContext("d", 0, 1))).content
    assert "No hit holds" not in lone  # each word is in a hit
    first = (await registry.call(ToolCall("e", "search_full_history", json.dumps(
        {"query": "studio weather", "limit": 1})), ToolContext("e", 0, 1))).content
    assert "No hit holds: " in first  # one hit cannot hold both: search again from what it says
