"""`noema doctor`: one line per database and repository, and a repair that keeps
what can be kept, moving each damaged file aside. Real files, damaged for real."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pygit2
import pytest

from noema.channels.mail.state import MailState
from noema.channels.telegram.incoming import Incoming
from noema.channels.telegram.state import TelegramState
from noema.docs.formats import Outline, Section
from noema.docs.store import DocsStore, FileStamp, index_file
from noema.health.agent_files import repositories
from noema.paths import AgentLock, AgentPaths
from noema.scheduling.store import ScheduleStore, schedules_path

from .damage import (
    copy_agent,
    private_umask,
    empty,
    garble_page,
    main_table_page,
    make_agent,
    no_traceback,
    noema,
    overwrite_header,
    truncate_half,
)

TURNS = 600
ALARMS = 400
NOW = 1_790_000_000.0


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("template")
    paths = make_agent(base / "home", base / "workspace", turns=TURNS)
    with ScheduleStore(schedules_path(paths)) as schedules:
        for n in range(ALARMS):
            schedules.add_alarm(f"alarm {n}: water the herons by the river " * 3,
                                NOW + 3600 + n, rule="in an hour", zone="Europe/Madrid", now=NOW)
        schedules.cancel(1, NOW)
    return base / "home"


@pytest.fixture
def agent(template, tmp_path):
    return copy_agent(template, tmp_path / "home")


def doctor(paths, *args):
    result = noema(paths.root.parent.parent, "doctor", *args)
    no_traceback(result)
    return result


def turn_count(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM turns").fetchone()[0]


def test_a_healthy_agent_is_said_healthy(agent):
    result = doctor(agent)
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].startswith("ok") and "turns.db" in lines[0]
    assert lines[1].startswith("ok") and "archive.db" in lines[1]
    assert lines[2].startswith("ok") and "schedules.db (alarms and schedules)" in lines[2]
    assert lines[3].startswith("ok") and lines[3].split()[1].startswith("versions/")
    assert lines[4] == "ok       permissions: only you can read the agent's folder"
    assert lines[-1] == "all healthy" and len(lines) == 6
    # Stores made by use are listed once they exist, not before.
    assert "mail.db" not in result.output and "docs.db" not in result.output


def test_a_new_agent_has_nothing_to_check_and_is_healthy(tmp_path):
    result = noema(tmp_path, "doctor")
    assert result.exit_code == 0 and "not created yet" in result.output
    assert result.output.splitlines()[-1] == "all healthy"


@pytest.mark.parametrize("damage, kept_at_least", [
    (overwrite_header, TURNS),  # the header is rebuilt: every page is still there
    (truncate_half, TURNS // 3),
    ("middle", TURNS - 60),  # one leaf page of turns holds a few dozen turns
])
def test_a_damaged_turn_store_is_found_and_repaired(agent, damage, kept_at_least):
    if damage == "middle":
        garble_page(agent.turns_db, main_table_page(agent.turns_db, "turns"))
    else:
        damage(agent.turns_db)
    damaged_bytes = agent.turns_db.read_bytes()

    found = doctor(agent)
    assert found.exit_code == 1
    assert found.output.splitlines()[0].startswith("DAMAGED  turns.db")
    assert "doctor --repair" in found.output

    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "repaired turns.db" in repaired.output and "kept" in repaired.output
    assert repaired.output.splitlines()[-1] == "all healthy"
    aside = [p for p in agent.root.glob("turns.db.damaged-*") if p.name.endswith("Z")]
    assert len(aside) == 1 and aside[0].read_bytes() == damaged_bytes  # moved, never changed
    assert kept_at_least <= turn_count(agent.turns_db) <= TURNS
    searched = noema(agent.root.parent.parent, "memory", "search", "heron")
    assert searched.exit_code == 0 and "heron" in searched.output  # the index was rebuilt


@pytest.mark.parametrize("state", ["empty (0 bytes)", "missing"])
def test_a_lost_turn_store_of_an_agent_that_ran_is_not_a_new_agent(agent, state):
    if state == "missing":
        agent.turns_db.unlink()
    else:
        empty(agent.turns_db)
    found = doctor(agent)
    assert found.exit_code == 1
    assert f"{state}, but this agent has run before (archive.db and versions/" in found.output
    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0 and "nothing could be kept" in repaired.output
    kept_aside = list(agent.root.glob("turns.db.damaged-*"))
    assert len(kept_aside) == (0 if state == "missing" else 1)
    assert noema(agent.root.parent.parent, "memory").exit_code == 0  # a new conversation


def test_a_garbled_archive_page_is_found_and_the_rest_kept(agent):
    garble_page(agent.archive_db, main_table_page(agent.archive_db, "events"))
    found = doctor(agent)
    assert found.exit_code == 1 and "DAMAGED  archive.db" in found.output
    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0 and "repaired archive.db" in repaired.output
    with sqlite3.connect(agent.archive_db) as db:
        events = db.execute("SELECT count(*) FROM events").fetchone()[0]
    assert 500 <= events < 600
    assert list(agent.root.glob("archive.db.damaged-*"))


def _head_blob(gitdir: Path) -> Path:
    repo = pygit2.Repository(str(gitdir))
    oid = str(repo.head.peel(pygit2.Commit).tree["notes.txt"].id)
    return gitdir / "objects" / oid[:2] / oid[2:]


@pytest.mark.parametrize("damage", ["delete an object", "garble an object",
                                    "ref pointing nowhere"])
def test_a_damaged_versions_repository_is_found_and_repaired(agent, damage):
    (gitdir,) = repositories(agent)
    if damage == "delete an object":
        _head_blob(gitdir).unlink()
    elif damage == "garble an object":
        blob = _head_blob(gitdir)
        blob.chmod(0o644)
        blob.write_bytes(b"not zlib at all")
    else:
        (gitdir / "refs" / "heads" / "main").write_text("0123456789" * 4 + "\n")
    home = agent.root.parent.parent

    found = doctor(agent)
    assert found.exit_code == 1 and "DAMAGED  versions/" in found.output
    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "kept 1 versions" in repaired.output or "kept 2 versions" in repaired.output
    assert list(gitdir.parent.glob(gitdir.name + ".damaged-*"))
    history = noema(home, "history")
    assert history.exit_code == 0 and "(no versions yet)" not in history.output
    no_traceback(history)


def test_a_repair_waits_for_the_agent_to_stop(agent):
    overwrite_header(agent.turns_db)
    lock = AgentLock(agent)
    try:
        refused = doctor(agent, "--repair")
    finally:
        lock.release()
    assert refused.exit_code == 1 and "already running" in refused.output
    assert not list(agent.root.glob("turns.db.damaged-*"))


def test_a_folder_where_the_archive_belongs_is_moved_aside(agent):
    agent.archive_db.unlink()
    agent.archive_db.mkdir()
    (agent.archive_db / "kept.txt").write_text("whatever the person left here")
    found = doctor(agent)
    assert found.exit_code == 1 and "not a regular file" in found.output
    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0 and "nothing could be kept" in repaired.output
    (aside,) = [p for p in agent.root.glob("archive.db.damaged-*")
                if not p.name.endswith(("-wal", "-shm"))]
    assert (aside / "kept.txt").read_text() == "whatever the person left here"


def leaf_pages(path: Path, table: str) -> list[int]:
    """The table's leaf pages (0-based, as offsets in pages), in file order."""
    with sqlite3.connect(path) as db:
        return [r[0] - 1 for r in db.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
            (table,))]


def schedule_ids(path: Path) -> list[int]:
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute("SELECT id FROM schedules ORDER BY id")]


def test_a_missing_schedules_file_is_not_created_yet(agent):
    schedules_path(agent).unlink()
    result = doctor(agent)
    assert result.exit_code == 0
    assert "ok       schedules.db (alarms and schedules): not created yet" in result.output


def test_damaged_schedules_are_salvaged_and_no_id_is_given_twice(agent):
    """The page of the newest schedules is garbled: they are lost, the rest kept,
    and a schedule set after the repair does not take a lost one's ID."""
    path = schedules_path(agent)
    newest_page = max(leaf_pages(path, "schedules"))
    garble_page(path, newest_page)
    damaged_bytes = path.read_bytes()

    found = doctor(agent)
    assert found.exit_code == 1
    assert "DAMAGED  schedules.db (alarms and schedules)" in found.output

    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "repaired schedules.db: schedules: kept" in repaired.output
    assert "could not read the rows after id" in repaired.output
    assert repaired.output.splitlines()[-1] == "all healthy"
    # Its WAL files, when there were any, are moved aside beside it.
    (aside,) = [p for p in agent.root.glob("schedules.db.damaged-*")
                if not p.name.endswith(("-wal", "-shm"))]
    assert aside.read_bytes() == damaged_bytes
    kept = schedule_ids(path)
    assert ALARMS - 40 <= len(kept) < ALARMS and kept == list(range(1, len(kept) + 1))

    with ScheduleStore(path) as schedules:
        assert schedules.get(1).cancelled_at == NOW  # what was kept is kept whole
        added = schedules.add_alarm("after the repair", NOW + 7200, rule="in two hours",
                                    zone="Europe/Madrid", now=NOW)
    assert added.id == ALARMS + 1  # not max(kept) + 1: the lost IDs stay unused
    listed = noema(agent.root.parent.parent, "schedule", "list")
    assert listed.exit_code == 0 and "after the repair" in listed.output


def test_schedules_whose_numbering_is_lost_are_numbered_after_what_was_kept(agent):
    path = schedules_path(agent)
    with sqlite3.connect(path) as db:
        sequence_page = db.execute(
            "SELECT pageno FROM dbstat WHERE name = 'sqlite_sequence'").fetchone()[0] - 1
    garble_page(path, sequence_page)
    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0 and "repaired schedules.db" in repaired.output
    assert len(schedule_ids(path)) == ALARMS
    with ScheduleStore(path) as schedules:
        added = schedules.add_alarm("after the repair", NOW + 7200, rule="in two hours",
                                    zone="Europe/Madrid", now=NOW)
    assert added.id == ALARMS + 1


# -- who may read the agent's data ----------------------------------------------------


def mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


def test_loose_modes_are_found_and_made_private_without_touching_links(agent, tmp_path):
    (gitdir,) = repositories(agent)
    blob = _head_blob(gitdir)
    outside = tmp_path / "the person's own file"
    outside.write_text("not the agent's")
    outside.chmod(0o644)
    (agent.root / "a link").symlink_to(outside)
    agent.root.chmod(0o755)
    agent.turns_db.chmod(0o644)
    blob.chmod(0o444)  # git's own read-only object, readable by all
    (gitdir / "objects").chmod(0o755)

    found = doctor(agent)
    assert found.exit_code == 1
    (line,) = [l for l in found.output.splitlines() if l.startswith("LOOSE")]
    assert line.startswith("LOOSE    permissions: 2 files and 2 folders (")
    assert "turns.db" in line and "their modes let other users of this machine in" in line
    assert "makes them readable by you alone" in found.output

    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "made private: 2 files and 2 folders" in repaired.output
    assert repaired.output.splitlines()[-1] == "all healthy"
    assert (mode(agent.root), mode(agent.turns_db), mode(gitdir / "objects")) == (0o700, 0o600, 0o700)
    assert mode(blob) == 0o400  # still read-only, now for its owner alone
    assert mode(outside) == 0o644  # a link is not followed: what it points at is not the agent's
    assert noema(agent.root.parent.parent, "history").exit_code == 0  # the repository still reads


def test_the_folder_of_all_agents_is_checked_too(agent):
    agent.agents_dir.chmod(0o755)
    found = doctor(agent)
    assert found.exit_code == 1 and "LOOSE    permissions: 1 folder" in found.output
    assert doctor(agent, "--repair").exit_code == 0
    assert mode(agent.agents_dir) == 0o700


# -- the stores made by use: mail, Telegram, the document index -----------------------


MAILS = 300


def fill_channel_stores(paths: AgentPaths) -> None:
    with private_umask():
        mail = MailState(paths.mail_db)
        for uid in range(1, MAILS + 1):
            mail.begin("INBOX", 7, uid, header=f"mail {uid} about the herons " * 4,
                       sender="me@example.org", subject=f"herons {uid}",
                       message_id=f"<{uid}@example.org>", references=())
        mail.close()
        telegram = TelegramState(paths.telegram_db)
        telegram.take(41, [Incoming(40 + n, 99, 1e9, f"message {n}") for n in range(2)], [5])
        telegram.close()
        docs = DocsStore(index_file(paths))
        docs.put(FileStamp("/ws/lease.md", "h", 10, 1), "markdown",
                 Outline("Lease", (Section(1, "Rent", "The rent is due monthly."),)),
                 untrusted=False)
        docs.close()


def test_the_channel_stores_and_the_document_index_are_named_as_their_owners_name_them():
    from noema.channels.mail.channel import STATE_FILE as MAIL_FILE
    from noema.channels.telegram.channel import STATE_FILE as TELEGRAM_FILE
    from noema.scheduling.store import SCHEDULES_FILE

    paths = AgentPaths.for_agent("x", Path("/nowhere"))
    assert paths.mail_db.name == MAIL_FILE and paths.telegram_db.name == TELEGRAM_FILE
    assert index_file(paths) == paths.docs_db and paths.schedules_db.name == SCHEDULES_FILE
    assert schedules_path(paths) == paths.schedules_db


def test_healthy_channel_stores_are_listed_once_they_exist(agent):
    fill_channel_stores(agent)
    result = doctor(agent)
    assert result.exit_code == 0, result.output
    for line in ("ok       mail.db (the mail channel's record)",
                 "ok       telegram.db (the Telegram channel's record)",
                 "ok       docs.db (the document index)"):
        assert line in result.output.splitlines()


def test_damaged_channel_stores_and_document_index_are_found_and_repaired(agent):
    fill_channel_stores(agent)
    garble_page(agent.mail_db, main_table_page(agent.mail_db, "taken"))
    overwrite_header(agent.telegram_db)
    truncate_half(agent.docs_db)

    found = doctor(agent)
    assert found.exit_code == 1
    for name in ("mail.db", "telegram.db", "docs.db"):
        assert f"DAMAGED  {name}" in found.output
    assert "3 of 7 damaged" in found.output

    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "repaired mail.db: taken: kept" in repaired.output
    assert "repaired telegram.db (its header was rebuilt): kept all" in repaired.output
    assert "repaired docs.db: begun anew" in repaired.output and "docs index" in repaired.output
    assert repaired.output.splitlines()[-1] == "all healthy"
    for name in ("mail.db", "telegram.db", "docs.db"):
        assert [p for p in agent.root.glob(f"{name}.damaged-*") if p.name.endswith("Z")
                or p.name[-6:].isdigit()], name  # kept aside, never deleted
    with sqlite3.connect(agent.mail_db) as db:
        kept = db.execute("SELECT count(*) FROM taken").fetchone()[0]
    assert MAILS - 60 <= kept < MAILS
    telegram = TelegramState(agent.telegram_db)
    try:
        assert telegram.offset == 42 and len(telegram.pending()[99]) == 2  # nothing taken twice
    finally:
        telegram.close()
    docs = DocsStore(agent.docs_db)
    try:
        assert docs.counts() == (0, 0)  # read again from the documents by the next index
    finally:
        docs.close()
    assert mode(agent.mail_db) == 0o600 and mode(agent.docs_db) == 0o600


def test_a_damaged_record_of_outside_files_is_found_and_made_anew(agent):
    """The marks are security data: a damaged file is said and salvaged, never
    silently read as "no file holds outside words"."""
    from noema.security.file_marks import FileMarks

    from noema.memory.turns import Source, SourceKind

    marks = FileMarks(agent.file_marks_db)
    marks.mark(b"a stranger's words", (Source(SourceKind.MAIL, "m@x.example"),), "/w/a")
    marks.close()
    overwrite_header(agent.file_marks_db)
    found = doctor(agent)
    assert found.exit_code == 1 and "DAMAGED  file_marks.db" in found.output
    repaired = doctor(agent, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert doctor(agent).exit_code == 0
