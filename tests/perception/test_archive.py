"""The sensory archive: batches, batched writes, paging, immutability."""

from __future__ import annotations

import sqlite3

import pytest

from noema.perception.archive import SILENCED_BUCKET, SensoryArchive, UnknownBatch

from .conftest import T0, event


@pytest.fixture
def archive(tmp_path):
    with SensoryArchive(tmp_path / "archive.db", flush_every=4) as opened:
        yield opened


def _on_disk(path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM events").fetchone()[0]


def test_streams_get_their_own_batches_and_offsets(archive):
    a0 = archive.append(event("logs", "a", key="k1"), "key:k1", T0)
    b0 = archive.append(event("logs", "b", key="k2"), "key:k2", T0)
    a1 = archive.append(event("logs", "a", key="k1"), "key:k1", T0)
    assert (a0.batch_id, a0.batch_seq, a1.batch_id, a1.batch_seq) == ("b1", 0, "b1", 1)
    assert (b0.batch_id, b0.batch_seq) == ("b2", 0)
    assert a1.text == "a" and a1.id != a0.id


def test_writes_are_batched_and_lookups_see_everything(archive, tmp_path):
    for i in range(5):
        archive.append(event("files", f"f{i}"), "from:files", T0 + i)
    assert _on_disk(tmp_path / "archive.db") == 4  # written at the fourth event
    page = archive.lookup("b1")
    assert [e.text for e in page.events] == ["f0", "f1", "f2", "f3", "f4"]
    assert _on_disk(tmp_path / "archive.db") == 5


def test_sealing_starts_a_new_batch(archive):
    first = archive.append(event("files", "x"), "from:files", T0)
    archive.seal([first.batch_id], T0 + 1)
    second = archive.append(event("files", "y"), "from:files", T0 + 2)
    assert second.batch_id != first.batch_id and second.batch_seq == 0
    info = archive.batch(first.batch_id)
    assert (info.sealed_at, info.size, info.channel, info.bucket) == (T0 + 1, 1, "files",
                                                                      "from:files")
    assert archive.batch(second.batch_id).sealed_at is None


def test_paging_and_filters(archive):
    for i in range(30):
        archive.append(event("chat", f"message {i}" + (" urgent" if i % 10 == 0 else ""),
                             sender="ana", payload={"n": i}), "from:ana", T0 + i)
    page = archive.lookup("b1", offset=5, limit=10)
    assert [e.batch_seq for e in page.events] == list(range(5, 15))
    assert page.next_offset == 15 and page.matching == 25
    assert page.events[0].payload["n"] == 5 and page.events[0].channel == "chat"
    last = archive.lookup("b1", offset=25, limit=10)
    assert last.next_offset is None and len(last.events) == 5
    urgent = archive.lookup("b1", filter="URGENT", limit=2)
    assert [e.batch_seq for e in urgent.events] == [0, 10] and urgent.next_offset == 20
    assert archive.lookup("b1", filter="ana").matching == 30  # the sender matches too
    assert archive.lookup("b1", offset=99).events == ()


def test_bad_lookups(archive):
    for bad in ("b99", "x1", "", "b-1"):
        with pytest.raises(UnknownBatch):
            archive.lookup(bad)
    archive.append(event(), "from:files", T0)
    with pytest.raises(ValueError):
        archive.lookup("b1", offset=-1)


def test_dropped_events_have_their_own_batch(archive):
    kept = archive.append(event("logs", "a", key="k"), "key:k", T0)
    dropped = archive.append(event("logs", "a", key="k"), "key:k", T0, dropped=True)
    assert dropped.batch_id != kept.batch_id
    assert archive.batch(dropped.batch_id).dropped
    assert archive.open_batch("logs", SILENCED_BUCKET) == dropped.batch_id
    counts = archive.counts()["logs"]
    assert (counts.stored, counts.dropped) == (2, 1)


def test_events_can_never_be_edited_or_deleted(archive):
    archive.append(event(), "from:files", T0)
    archive.flush()
    with pytest.raises(sqlite3.DatabaseError):
        archive.conn.execute("UPDATE events SET text = 'forged'")
    with pytest.raises(sqlite3.DatabaseError):
        archive.conn.execute("DELETE FROM events")


def test_reopening_continues_the_batch_numbers(tmp_path):
    with SensoryArchive(tmp_path / "a.db") as archive:
        archive.append(event(), "from:files", T0)
        archive.append(event("logs", key="k"), "key:k", T0)
    with SensoryArchive(tmp_path / "a.db") as archive:
        again = archive.append(event(), "from:files", T0)
        assert again.batch_id == "b3"
        assert [e.text for e in archive.lookup("b1").events] == ["something happened"]


def test_an_archive_in_memory_works_the_same():
    archive = SensoryArchive(":memory:")
    archive.append(event(), "from:files", T0)
    assert archive.lookup("b1").matching == 1
    archive.close()
