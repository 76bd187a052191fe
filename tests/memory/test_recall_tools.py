"""The memory tools as the model calls them, through the tool registry."""

from __future__ import annotations

import json

import pytest

from noema.memory.chronicle import chronicle_text
from noema.memory.recall import surfaced_ids
from noema.memory.recall_tools import TURN_CHARS, memory_tools
from noema.memory.search import HistorySearch
from noema.memory.turns import Flag, NewTurn, TurnKind
from noema.providers.base import ToolCall
from noema.tools.registry import ToolContext, ToolRegistry

from .conftest import chat


@pytest.fixture
def tools(store):
    return ToolRegistry(memory_tools(store, HistorySearch(store)))


async def use(tools, name, context_turn=0, **arguments):
    call = ToolCall("c", name, json.dumps(arguments))
    return await tools.call(call, ToolContext("c", context_turn, 1))


async def test_lookup_turn_shows_the_turn_and_its_neighbours(tools, session):
    chat(session, 3)
    result = await use(tools, "lookup_turn", id=3, context_window=1)
    assert not result.is_error
    assert "[turn 3 · user" in result.content and "◀ requested" in result.content
    assert "[turn 2 ·" in result.content and "[turn 4 ·" in result.content
    stored = session.append(NewTurn(TurnKind.TOOL_RESULT, result.content, tool_name="lookup_turn",
                                    call_id="c"))
    assert surfaced_ids(stored) == {2, 3, 4}


async def test_lookup_turn_pages_through_a_long_turn_and_refuses_unknown_ids(tools, session):
    long = session.append(NewTurn(TurnKind.TOOL_RESULT, "x" * (TURN_CHARS + 500),
                                  tool_name="read_file", call_id="r"))
    first = await use(tools, "lookup_turn", id=long.id)
    assert f"offset={TURN_CHARS}" in first.content
    rest = await use(tools, "lookup_turn", id=long.id, offset=TURN_CHARS)
    assert rest.content.count("x") == 500
    missing = await use(tools, "lookup_turn", id=999)
    assert missing.is_error and "no turn 999" in missing.content
    wide = await use(tools, "lookup_turn", id=long.id, context_window=9)
    assert wide.is_error


async def test_search_full_history_lists_turns_the_validator_can_trust(tools, session):
    chat(session, 4, topic="the greenhouse")
    result = await use(tools, "search_full_history", query="greenhouse compost", limit=3)
    assert not result.is_error and result.content.count("[turn ") == 3
    stored = session.append(NewTurn(TurnKind.TOOL_RESULT, result.content,
                                    tool_name="search_full_history", call_id="s"))
    assert len(surfaced_ids(stored)) == 3
    dated = await use(tools, "search_full_history", query="greenhouse", since="2000-01-01",
                      until="2999-12-31", roles=["user"])
    assert "[turn " in dated.content and "assistant ·" not in dated.content
    bad = await use(tools, "search_full_history", query="greenhouse", since="last week")
    assert bad.is_error and "ISO" in bad.content
    nothing = await use(tools, "search_full_history", query="submarine")
    assert "No turn matches" in nothing.content


async def test_annotate_observation_pins_a_note_into_the_chronicle(tools, session):
    call = session.append(NewTurn(TurnKind.TOOL_CALL, tool_name="annotate_observation",
                                  call_id="a", arguments="{}"))
    result = await use(tools, "annotate_observation", context_turn=call.id,
                       source="read_file report.csv", note="Revenue fell 4% in March.")
    assert not result.is_error
    text = chronicle_text(session)
    assert "Revenue fell 4% in March." in text and "report.csv" in text
    session.remove([call.id], Flag.DISCARDED)  # a safe cancellation took the call back
    assert chronicle_text(session) is None
    empty = await use(tools, "annotate_observation", context_turn=call.id, source="x", note=" ")
    assert empty.is_error
