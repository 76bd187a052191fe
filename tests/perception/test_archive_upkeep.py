"""The archive's index merging and WAL checkpoints happen in its upkeep thread,
not in its group commits; without upkeep, commits do both as before."""

from __future__ import annotations

import threading
import time

import pytest

from noema.perception import archive_upkeep
from noema.perception.archive import SensoryArchive
from noema.perception.events import Event

T0 = 1_774_825_200.0
DEADLINE_S = 20  # only stops a hang: the upkeep needs a fraction of a second


def segments(archive: SensoryArchive) -> int:
    return int(archive.conn.execute(
        "SELECT COUNT(DISTINCT segid) FROM events_fts_idx").fetchone()[0])


def fts_config(archive: SensoryArchive) -> dict[str, int]:
    return {k: int(v) for k, v in archive.conn.execute("SELECT k, v FROM events_fts_config")
            if k in ("automerge", "crisismerge")}


def commit_one(archive: SensoryArchive, n: int) -> None:
    """One event in a commit of its own: one new index segment."""
    archive.append(Event.create("logs", f"line {n}: the lighthouse lamp flickered",
                                received_at=T0 + n), "lines", T0 + n)
    archive.flush()


def upkeep_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "archive-upkeep" and t.is_alive()]


def test_the_first_commit_starts_the_upkeep_and_takes_merging_off_commits(tmp_path):
    archive = SensoryArchive(tmp_path / "archive.db")
    assert archive.upkeep is None  # opening alone starts nothing
    assert fts_config(archive) == {"automerge": 0, "crisismerge": archive_upkeep.CRISIS_MERGE}
    commit_one(archive, 0)
    upkeep = archive.upkeep
    assert upkeep is not None and upkeep.is_alive()
    assert archive.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    archive.close()
    assert not upkeep.is_alive()


def test_commits_leave_segments_that_the_upkeep_merges_when_quiet(tmp_path):
    archive = SensoryArchive(tmp_path / "archive.db")
    commits = archive_upkeep.CRISIS_MERGE - 1  # under the crisis merge
    for n in range(commits):
        commit_one(archive, n)
    assert archive.upkeep is not None
    piled = segments(archive)
    assert piled >= 8  # no commit merged anything (quiet or not, the upkeep may have begun)
    assert archive.upkeep.settled.wait(DEADLINE_S)
    assert segments(archive) <= 3 < piled
    archive.conn.execute("INSERT INTO events_fts(events_fts) VALUES('integrity-check')")
    assert archive.search("lighthouse", limit=200).ranked == commits
    wal = (tmp_path / "archive.db-wal").stat().st_size
    archive.close()
    assert wal < 4 * 1024 * 1024  # checkpointed by the upkeep meanwhile


def test_a_stream_that_never_pauses_is_merged_as_it_goes(tmp_path, monkeypatch):
    """Commits never pause long enough to count as quiet, yet the segments they
    leave are merged meanwhile, a step at a time."""
    monkeypatch.setattr(archive_upkeep, "QUIET_S", 3600.0)  # never quiet in this test
    monkeypatch.setattr(archive_upkeep, "MERGE_EVERY_S", 0.01)
    archive = SensoryArchive(tmp_path / "archive.db")
    commits = archive_upkeep.CRISIS_MERGE - 1  # under the crisis merge: commits merge nothing
    for n in range(commits):
        commit_one(archive, n)
    deadline = time.monotonic() + DEADLINE_S
    while segments(archive) > 8:
        assert time.monotonic() < deadline, f"{segments(archive)} segments left unmerged"
        time.sleep(0.01)
    assert archive.upkeep is not None and not archive.upkeep.settled.is_set()  # never quiet
    assert archive.search("lighthouse", limit=1).ranked == commits
    archive.close()


def test_without_upkeep_commits_merge_and_checkpoint_as_sqlite_does(tmp_path):
    path = tmp_path / "archive.db"
    SensoryArchive(path).close()  # once opened with upkeep: its settings are in the index
    before = set(upkeep_threads())  # other tests' archives may still be open
    archive = SensoryArchive(path, upkeep=False)
    assert fts_config(archive) == {"automerge": 4, "crisismerge": 16}
    for n in range(40):
        commit_one(archive, n)
    assert archive.upkeep is None and set(upkeep_threads()) <= before
    assert archive.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    assert segments(archive) < 16  # automerge kept them few, commit by commit
    archive.close()


def test_an_archive_in_memory_has_no_upkeep():
    archive = SensoryArchive(":memory:")
    commit_one(archive, 0)
    assert archive.upkeep is None
    archive.close()


def test_when_the_upkeep_has_stopped_commits_take_its_work_back(tmp_path, caplog):
    archive = SensoryArchive(tmp_path / "archive.db")
    commit_one(archive, 0)
    assert archive.upkeep is not None
    archive.upkeep.stop()  # as if it had died on an error
    commit_one(archive, 1)
    assert archive.upkeep is None and "upkeep is not running" in caplog.text
    assert fts_config(archive) == {"automerge": 4, "crisismerge": 16}
    assert archive.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    commit_one(archive, 2)
    assert archive.search("lighthouse").ranked == 3
    archive.close()


@pytest.mark.parametrize("rebuild", [False, True])
def test_a_commit_during_a_merge_goes_first_and_loses_nothing(tmp_path, rebuild):
    """Commits arrive while the upkeep merges (interrupting it): every event is
    kept and found, and the index passes its own check."""
    archive = SensoryArchive(tmp_path / "archive.db")
    for n in range(archive_upkeep.CRISIS_MERGE - 1):
        commit_one(archive, n)
    assert archive.upkeep is not None
    time.sleep(archive_upkeep.QUIET_S / 2)  # a pause shorter than quiet: no merge yet
    total = archive_upkeep.CRISIS_MERGE - 1
    for n in range(total, total + 200):  # merges start and are interrupted along the way
        commit_one(archive, n)
        if n % 50 == 0:
            time.sleep(archive_upkeep.QUIET_S * 1.2)
    total += 200
    if rebuild:
        archive.rebuild_index()
    assert archive.upkeep.settled.wait(DEADLINE_S)
    archive.conn.execute("INSERT INTO events_fts(events_fts) VALUES('integrity-check')")
    assert archive.search("lighthouse", limit=1).ranked == min(total, 2000)
    archive.close()
