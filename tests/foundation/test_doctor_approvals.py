"""`noema doctor` checks the record of questions asked away (`approvals.db`):
listed once it exists, found when damaged, and a repair keeps what reads and
never gives an approval number twice."""

from __future__ import annotations

import sqlite3

import pytest

from noema.paths import AgentPaths
from noema.security.away_store import AwayStore

from .damage import (
    garble_page,
    main_table_page,
    make_agent,
    no_traceback,
    noema,
    overwrite_header,
    private_umask,
)

QUESTIONS = 300
NOW = 1_790_000_000.0


@pytest.fixture
def agent(tmp_path) -> AgentPaths:
    return make_agent(tmp_path / "home", tmp_path / "workspace", turns=20, events=20)


def doctor(paths: AgentPaths, *args: str):
    result = noema(paths.root.parent.parent, "doctor", *args)
    no_traceback(result)
    return result


def ask_many(paths: AgentPaths) -> int:
    """Questions as the agent leaves them: most settled, the newest waiting;
    returns the highest number the store gave."""
    with private_umask():
        store = AwayStore(paths.approvals_db)
        try:
            for _ in range(QUESTIONS):
                number = store.next_number()
                request = {"tool": "shell_execute", "reason": "asked",
                           "arguments": f"command: make herons {number} " * 12}
                store.record(number, "shell_execute", request, f"call_{number}", number,
                             NOW + 900)
                store.placed(number, "telegram", "on Telegram", {"key": f"k{number}"})
                if number < QUESTIONS:
                    store.move(number, "refused", by="telegram", outcome="refused")
            highest = store.next_number()  # given, and never recorded
        finally:
            store.close()
    return highest


def test_the_approvals_record_is_listed_once_it_exists(agent):
    assert "approvals.db" not in doctor(agent).output
    ask_many(agent)
    result = doctor(agent)
    assert result.exit_code == 0, result.output
    assert "ok       approvals.db (questions asked while you were away)" \
        in result.output.splitlines()
    assert result.output.splitlines()[-1] == "all healthy"


def test_a_damaged_approvals_record_is_repaired_and_no_number_is_given_twice(agent):
    given = ask_many(agent)
    garble_page(agent.approvals_db, main_table_page(agent.approvals_db, "questions"))

    found = doctor(agent)
    assert found.exit_code == 1
    assert "DAMAGED  approvals.db (questions asked while you were away)" in found.output

    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "repaired approvals.db: questions: kept" in repaired.output
    assert repaired.output.splitlines()[-1] == "all healthy"
    assert list(agent.root.glob("approvals.db.damaged-*"))  # kept aside, never deleted
    with sqlite3.connect(agent.approvals_db) as db:
        kept = db.execute("SELECT count(*) FROM questions").fetchone()[0]
    assert QUESTIONS - 60 <= kept < QUESTIONS
    store = AwayStore(agent.approvals_db)
    try:
        assert store.next_number() > given  # numbers on old buttons and mails stay unique
        assert store.get(QUESTIONS) is not None and store.get(QUESTIONS).state == "waiting"
    finally:
        store.close()


def test_numbering_survives_a_repair_that_loses_the_newest_questions(agent):
    """The meta row still reads when the newest questions' page does not: the
    salvaged file numbers after what the damaged one had given."""
    given = ask_many(agent)
    with sqlite3.connect(agent.approvals_db) as db:  # the newest rows gone, as if lost
        db.execute("DELETE FROM questions WHERE number > ?", (QUESTIONS - 50,))
    overwrite_header(agent.approvals_db)
    assert "DAMAGED  approvals.db" in doctor(agent).output
    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0, repaired.output
    store = AwayStore(agent.approvals_db)
    try:
        assert store.next_number() == given + 1  # not 251, after the highest row kept
    finally:
        store.close()
