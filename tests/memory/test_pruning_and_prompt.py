"""Pruning, the rendering the chronicler reads, and the chronicler's messages."""

from __future__ import annotations

from noema.memory.chronicler import ChronicleRequest, Rejection, build_messages
from noema.memory.pruning import PRUNED_MARKER_TOKENS, context_cost, prune
from noema.memory.render import compact_ranges, render_block
from noema.memory.tokens import estimate_tokens
from noema.memory.turns import Flag
from noema.memory.validator import Citable, Failure
from noema.orchestrator.context import pruned_marker

from .conftest import chat, tool_round


def test_bulky_old_results_are_pruned_and_the_store_keeps_them(session):
    _, bulky = tool_round(session, "read_file", "row of data " * 400, "c1")
    _, small = tool_round(session, "get_current_time", "10:00", "c2")
    _, recall = tool_round(session, "lookup_turn", "[turn 1 · user · x]\n" + "y " * 900, "c3")
    chat(session, 6)
    _, recent = tool_round(session, "read_file", "fresh data " * 400, "c4")
    pruned = prune(session, older_than=8, min_tokens=300)
    assert pruned == [bulky.id]
    in_session = {t.id: t for t in session.turns}
    assert in_session[bulky.id].has(Flag.PRUNED) and not in_session[recent.id].has(Flag.PRUNED)
    assert not in_session[small.id].has(Flag.PRUNED) and not in_session[recall.id].has(Flag.PRUNED)
    whole = session.store.get(bulky.id)
    assert whole.content == bulky.content and whole.has(Flag.PRUNED)
    assert context_cost(in_session[bulky.id]) == PRUNED_MARKER_TOKENS
    assert prune(session, older_than=8, min_tokens=300) == []


def test_the_marker_cost_covers_what_the_context_builder_writes(session):
    for n, name in enumerate(("read_file", "search_the_web_for_documents", "pool_event")):
        _, result = tool_round(session, name, "z " * 5000, f"c{n}")
        marker = pruned_marker(result)
        assert estimate_tokens(marker) <= PRUNED_MARKER_TOKENS, marker


def test_the_block_is_rendered_with_ids_and_flashbacks_marked(session):
    chat(session, 1)
    tool_round(session, "lookup_turn", "[turn 1 · user · x]\nold words", "c1")
    tool_round(session, "read_file", "q" * 5000, "c2")
    text = render_block(session.turns, result_chars=300)
    assert "[1] person" in text and "[2] agent" in text
    assert "FLASHBACK: lookup_turn brought back turns 1" in text
    assert "more characters in turn 6" in text
    assert compact_ranges([5, 1, 2, 3, 9, 10]) == "1-3, 5, 9-10"


def test_the_chronicler_is_told_the_protocol_in_its_language(session):
    chat(session, 2)
    allowed = Citable(frozenset({7}), frozenset({1, 2, 3, 4}), frozenset())
    request = ChronicleRequest(None, tuple(session.turns), allowed, language="es")
    messages = build_messages(request)
    assert "## Estado" in messages[0].content and "## El Viaje" in messages[0].content
    assert "{cite:ID}" in messages[0].content and "{cite:6}" in messages[0].content
    assert "1-4, 7" in messages[1].content and "[1] person" in messages[1].content
    rejected = Rejection("bad", (Failure("x", "it cites ID 99"),))
    english = build_messages(ChronicleRequest("## State\nold", tuple(session.turns), allowed), [rejected])
    assert "## The Journey" in english[0].content and "## State\nold" in english[1].content
    assert english[2].content == "bad" and "1. it cites ID 99" in english[3].content
