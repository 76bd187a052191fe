"""The share of supported citations is kept with each save point, read back from
stores written before it existed, and shown by `noema memory` and the memory page."""

from __future__ import annotations

import json
import sqlite3

import pytest
from jinja2 import Environment, FileSystemLoader, select_autoescape

from noema.interfaces.commands.memory import list_save_points, show_save_point
from noema.interfaces.web import memory as web_memory
from noema.memory import savepoints
from noema.memory.savepoints import Report, Status
from noema.memory.session import Session
from noema.memory.store import SCHEMA_VERSION, TurnStore
from noema.memory.turns import NewTurn, TurnKind

TEMPLATES = web_memory.__file__.rsplit("/", 1)[0] + "/templates"

# The save points' table as stores of schema 2 made it: no column for the share.
OLD_TABLE = """
CREATE TABLE save_points (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    created    REAL NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('accepted', 'rejected')),
    previous   INTEGER REFERENCES save_points(id),
    first_turn INTEGER NOT NULL,
    last_turn  INTEGER NOT NULL,
    turn_ids   TEXT NOT NULL,
    text       TEXT NOT NULL,
    report     TEXT NOT NULL
);
"""
OLD_REPORT = {"cited": [1], "covered": 1, "coverable": 2, "chars": 60, "words": 12, "tokens": 20,
              "retries": 0, "chronicler": "scripted/script", "language": "en", "attempts": [],
              "error": None, "session_last": 2, "notes": []}


def old_store(path) -> None:
    """A store of schema 2 holding two turns and one accepted save point."""
    store = TurnStore(path)
    store.append(NewTurn(TurnKind.USER, "Call the boat Marta, after my grandmother."))
    store.append(NewTurn(TurnKind.ASSISTANT, "Marta it is."))
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE save_points")  # dropping runs no row trigger
        db.executescript(OLD_TABLE)
        db.execute("INSERT INTO save_points (created, status, previous, first_turn, last_turn,"
                   " turn_ids, text, report) VALUES (1.7e9, 'accepted', NULL, 1, 2, '[1, 2]', ?, ?)",
                   ("## State\nx\n\n## The Journey\nThe boat is Marta {cite:1}.\n",
                    json.dumps(OLD_REPORT)))
        db.execute("PRAGMA user_version=2")


def checked_report() -> Report:
    return Report(cited=(1, 2), covered=2, coverable=2, chars=80, words=16, tokens=24, retries=0,
                  chronicler="scripted/script", language="en", judged=4, supported=3, weak=1,
                  unsupported=0, words_only=4)


def test_a_store_of_schema_2_gains_the_column_and_its_save_points_read_as_not_checked(tmp_path):
    path = tmp_path / "turns.db"
    old_store(path)
    store = TurnStore(path)
    try:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        old = savepoints.get(store, 1)
        assert old is not None and old.support is None and old.report.judged == 0
        new = savepoints.record(store, status=Status.ACCEPTED, previous=1, turn_ids=[1, 2],
                                text="## State\nx\n\n## The Journey\nMarta {cite:1}.\n",
                                report=checked_report())
        assert savepoints.get(store, new.id).support == 0.75
        # records stay records: the migration made no way to edit one
        with pytest.raises(sqlite3.DatabaseError, match="never be edited"):
            store.conn.execute("UPDATE save_points SET support = 1 WHERE id = 1")
    finally:
        store.close()


@pytest.fixture
def old_and_checked(tmp_path):
    """A store of schema 2 with its old save point, then a new one whose citations were checked."""
    path = tmp_path / "turns.db"
    old_store(path)
    store = TurnStore(path)
    savepoints.record(store, status=Status.ACCEPTED, previous=1, turn_ids=[1, 2],
                      text="## State\nx\n\n## The Journey\nMarta {cite:1}.\n",
                      report=checked_report())
    yield store
    store.close()


def test_noema_memory_shows_the_share_and_says_when_it_was_not_checked(old_and_checked):
    store = old_and_checked
    listing = list_save_points(store, Session.load(store)).splitlines()
    assert "support" in listing[0].split()
    rows = {line.split()[0].rstrip("*"): line.split() for line in listing[1:3]}
    assert "75%" in rows["2"] and "-" in rows["1"]
    assert "support = the share of its citations" in listing[-1]
    assert ("support 75%: 3 of 4 citations supported by their turn, 1 weak, 0 unsupported; "
            "4 judged on words alone (no vectors)") in show_save_point(store, 2)
    assert "support: not checked" in show_save_point(store, 1)


def test_the_memory_page_shows_the_share_of_each_save_point(old_and_checked):
    from noema.interfaces.web import dates, words

    environment = Environment(loader=FileSystemLoader(TEMPLATES),
                              autoescape=select_autoescape(default=True))
    environment.filters["when"] = lambda ts: dates.when_html(ts, None)  # as the page's app
    environment.filters["summary"] = words.summary_words
    html = environment.get_template("memory.html").render(
        agent="ana", csrf="x", page="memory", save_points=web_memory.save_points(old_and_checked),
        pinned=[], query="", roles=[], all_roles=words.role_words("ana"), found=None, problem=None)
    new_card = html.split('id="save-point-2"')[1]
    old_card = html.split('id="save-point-1"')[1].split('id="save-point-2"')[0]
    assert "citations supported: 75% (3 of 4)" in new_card
    assert "citations not checked" in old_card
    assert "support 75%: 3 of 4 citations supported" in new_card  # in the validator's report
