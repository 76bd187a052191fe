"""Which outside words lead a conversation (`security.provenance`)."""

from __future__ import annotations

from noema.memory.turns import Flag, Role, Turn, TurnKind
from noema.security.provenance import outside_words

ROLE = {TurnKind.USER: Role.USER, TurnKind.ASSISTANT: Role.ASSISTANT,
        TurnKind.EVENT: Role.TOOL, TurnKind.TOOL_RESULT: Role.TOOL, TurnKind.NOTE: Role.USER}


def turn(id: int, kind: TurnKind, flags: Flag = Flag.NONE, tool: str | None = None) -> Turn:
    return Turn(id, 0.0, kind, ROLE[kind], "text", tool_name=tool, flags=flags)


def test_no_outside_words_no_account():
    turns = [turn(1, TurnKind.USER), turn(2, TurnKind.ASSISTANT),
             turn(3, TurnKind.TOOL_RESULT, tool="file_read")]
    assert outside_words(turns) == ""


def test_a_strangers_event_after_the_person_leads_and_is_named():
    turns = [turn(1, TurnKind.USER), turn(2, TurnKind.EVENT, Flag.SYNTHETIC | Flag.OUTSIDE)]
    assert outside_words(turns) == "events from senders who are not the person (turn 2)"


def test_what_a_tool_read_from_outside_is_named_with_the_tool():
    turns = [turn(1, TurnKind.USER), turn(2, TurnKind.TOOL_RESULT, Flag.OUTSIDE, "web_get_content")]
    assert outside_words(turns) == "what web_get_content read (turn 2)"


def test_the_persons_newer_message_leads_over_older_outside_words():
    turns = [turn(1, TurnKind.EVENT, Flag.OUTSIDE), turn(2, TurnKind.USER)]
    assert outside_words(turns) == ""


def test_a_note_of_the_orchestrator_is_not_the_person_speaking():
    turns = [turn(1, TurnKind.EVENT, Flag.OUTSIDE), turn(2, TurnKind.NOTE, Flag.SYNTHETIC),
             turn(3, TurnKind.USER, Flag.SYNTHETIC)]
    assert "turn 1" in outside_words(turns)


def test_a_discarded_message_of_the_person_does_not_lead():
    turns = [turn(1, TurnKind.EVENT, Flag.OUTSIDE), turn(2, TurnKind.USER, Flag.DISCARDED)]
    assert "turn 1" in outside_words(turns)


def test_many_sources_name_the_newest_three_and_count_the_rest():
    turns = [turn(1, TurnKind.USER)] + [
        turn(i, TurnKind.TOOL_RESULT, Flag.OUTSIDE, "email_read") for i in range(2, 8)]
    account = outside_words(turns)
    assert "turn 5" in account and "turn 7" in account and "turn 4" not in account
    assert account.endswith("and 3 more")
