"""What became of each archived event: committed, delivered, dropped, still owed."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.perception.archive import SensoryArchive
from noema.perception.deliveries import check_runs, complement
from noema.perception.events import Nature, SensorInfo, TreatmentParams, Urgency
from noema.perception.items import Aggregate, Discrete, Item, StateValue
from noema.perception.pipeline import Holdings, HoldingsMismatch, Parcel, Pipeline
from noema.perception.treatments import Treatments, bucket_of

from .conftest import CATALOGUE, T0, event


@pytest.fixture
def path(tmp_path):
    return tmp_path / "archive.db"


def reopen(path) -> SensoryArchive:
    return SensoryArchive(path)


def runs_of(events) -> tuple:
    return tuple((int(e.batch_id[1:]), e.batch_seq, e.batch_seq) for e in events)


# -- acknowledged means committed ------------------------------------------------------


def test_an_event_is_acknowledged_when_its_transaction_commits(path):
    archive = SensoryArchive(path, flush_every=3)
    archive.append(event("files", "a"), "from:files", T0)
    assert (archive.appended, archive.committed, archive.staged) == (1, 0, True)
    archive.append(event("files", "b"), "from:files", T0)
    archive.append(event("files", "c"), "from:files", T0)  # the third commits the group
    assert (archive.appended, archive.committed, archive.staged) == (3, 3, False)
    archive.append(event("files", "d"), "from:files", T0)
    archive.conn.close()  # killed: what was only staged is gone, the rest is on disk
    again = reopen(path)
    assert [e.text for e in again.undelivered()] == ["a", "b", "c"]
    again.close()


# -- deliveries --------------------------------------------------------------------------


def test_a_delivery_settled_delivered_is_no_longer_owed(path):
    archive = SensoryArchive(path)
    sent = [archive.append(event("files", f"f{i}"), "from:files", T0) for i in range(5)]
    delivery = archive.open_delivery("pool_1", runs_of(sent[:3]), T0)
    archive.flush()
    assert [p.token for p in archive.pending_deliveries()] == ["pool_1"]
    assert len(list(archive.undelivered())) == 5  # pending counts as not delivered
    archive.settle(delivery, True, T0 + 1)
    assert archive.pending_deliveries() == []
    assert [e.text for e in archive.undelivered()] == ["f3", "f4"]
    archive.close()


def test_a_void_delivery_leaves_its_events_owed(path):
    archive = SensoryArchive(path)
    sent = [archive.append(event("files", f"f{i}"), "from:files", T0) for i in range(2)]
    archive.settle(archive.open_delivery("pool_1", runs_of(sent), T0), False, T0)
    assert [e.id for e in archive.undelivered()] == [e.id for e in sent]
    # Delivered again later, under another call.
    archive.settle(archive.open_delivery("pool_2", runs_of(sent), T0), True, T0)
    assert list(archive.undelivered()) == []
    archive.close()


def test_a_settled_delivery_is_history(path):
    archive = SensoryArchive(path)
    sent = archive.append(event("files", "x"), "from:files", T0)
    delivery = archive.open_delivery("pool_1", runs_of([sent]), T0)
    archive.settle(delivery, True, T0)
    archive.settle(delivery, False, T0)  # a second settlement changes nothing
    archive.flush()
    assert list(archive.undelivered()) == []
    with pytest.raises(sqlite3.DatabaseError):
        archive.conn.execute("UPDATE deliveries SET state = 'void'")
    with pytest.raises(sqlite3.DatabaseError):
        archive.conn.execute("DELETE FROM delivery_runs")
    archive.close()


def test_dropped_and_refused_events_are_not_owed(path):
    archive = SensoryArchive(path)
    archive.append(event("logs", "silenced", key="k"), "key:k", T0, dropped=True)
    kept = archive.append(event("logs", "kept", key="k"), "key:k", T0)
    repeat = archive.append(event("logs", "again", key="k"), "key:k", T0)
    archive.refuse(repeat, T0)
    assert [e.text for e in archive.undelivered()] == ["kept"]
    assert kept.batch_id is not None
    archive.close()


def test_replayed_events_keep_their_ids_times_and_payload(path):
    archive = SensoryArchive(path)
    sent = archive.append(event("mail", "3 unread", key="box", at=T0 - 600), "key:box", T0)
    archive.close()
    [again] = list(reopen(path).undelivered())
    assert (again.id, again.received_at, again.occurred_at, again.batch_id, again.batch_seq) == (
        sent.id, T0 - 600, T0 - 600, sent.batch_id, 0)


def test_deliveries_refuse_malformed_or_overlapping_runs(path):
    archive = SensoryArchive(path)
    with pytest.raises(ValueError):
        archive.open_delivery("pool_1", [], T0)
    with pytest.raises(ValueError, match="overlap"):
        archive.open_delivery("pool_1", [(1, 0, 4), (1, 4, 6)], T0)
    with pytest.raises(ValueError):
        archive.open_delivery("pool_1", [(1, 3, 2)], T0)
    with pytest.raises(ValueError):
        archive.refuse(event(), T0)  # never archived
    archive.close()


def test_an_archive_from_before_fates_counts_its_past_as_seen(path):
    with sqlite3.connect(path) as db:
        db.executescript("""
            CREATE TABLE batches (id INTEGER PRIMARY KEY, channel TEXT NOT NULL,
                bucket TEXT NOT NULL, opened_at REAL NOT NULL, sealed_at REAL,
                size INTEGER NOT NULL, dropped INTEGER NOT NULL);
            INSERT INTO batches VALUES (1, 'files', 'from:files', 0, NULL, 1, 0);
        """)
    archive = reopen(path)
    assert list(archive.undelivered()) == []  # weeks of old events are not replayed
    fresh = archive.append(event("files", "new"), "from:files", T0)
    assert fresh.batch_id == "b2" and [e.text for e in archive.undelivered()] == ["new"]
    archive.close()


# -- what the archive remembers for the senses ----------------------------------------------


def test_channel_declarations_outlive_the_sensors(path):
    info = SensorInfo("logs", "log lines", Nature.AGGREGATABLE, parameters={"path": "/a"},
                      default_urgency=Urgency.PRIORITY, can_silence=False,
                      treatment=TreatmentParams(window=42.0, hold=7))
    pipeline = Pipeline(SensoryArchive(path), [info])
    pipeline.archive.close()
    assert reopen(path).channels() == {"logs": info}


def test_a_bookmark_commits_with_the_events_read_before_it(path):
    archive = SensoryArchive(path)
    mark = archive.bookmark("sensor:logs")
    assert mark.load() is None
    archive.append(event("logs", "line 1", key="k"), "key:k", T0)
    mark.save({"offset": 7})
    assert mark.load() == {"offset": 7}  # staged, already visible
    archive.flush()
    archive.append(event("logs", "line 2", key="k"), "key:k", T0)
    mark.save({"offset": 14})
    archive.conn.close()  # killed before the next commit
    again = reopen(path)
    assert again.bookmark("sensor:logs").load() == {"offset": 7}
    assert [e.text for e in again.undelivered()] == ["line 1"]
    again.close()


# -- pure parts --------------------------------------------------------------------------------

run_sets = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5)), max_size=8)


@given(run_sets, st.integers(0, 60))
def test_complement_is_exactly_what_the_runs_leave_out(spans, size):
    covered: set[int] = set()
    runs = []
    for start, length in spans:
        wanted = set(range(start, start + length + 1))
        if not wanted & covered:
            covered |= wanted
            runs.append((start, start + length))
    left = complement(sorted(runs), size)
    offsets = [o for first, last in left for o in range(first, last + 1)]
    assert offsets == sorted(set(range(size)) - covered)
    assert all(first <= last for first, last in left)


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 30), st.integers(0, 4)),
                max_size=10))
def test_check_runs_accepts_exactly_the_disjoint_ones(raw):
    runs = [(batch, first, first + length) for batch, first, length in raw]
    cells = [(b, o) for b, f, last in runs for o in range(f, last + 1)]
    if len(cells) == len(set(cells)):
        assert check_runs(runs) == tuple(sorted(runs))
    else:
        with pytest.raises(ValueError):
            check_runs(runs)


CHANNELS = ["logs", "chat", "files", "mail"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(CHANNELS), st.integers(0, 2), st.integers(0, 2),
                          st.booleans()), max_size=80))
def test_holdings_give_each_item_exactly_its_events(steps):
    """Events of one stream split between two treatments (urgency classes) make
    gaps that are not one run; the holdings still name exactly the right events."""
    archive = SensoryArchive(":memory:")
    classes = [(Treatments(CATALOGUE), Holdings()) for _ in range(2)]
    sent = {}
    for channel, sender, key, second in steps:
        nature = CATALOGUE[channel].nature
        e = event(channel, "x", sender=f"s{sender}", key=f"k{key}")
        archived = archive.append(e, bucket_of(e, nature), T0)
        sent[(int(archived.batch_id[1:]), archived.batch_seq)] = archived.id
        treatments, holdings = classes[int(second)]
        treatments.add(archived, T0)
        holdings.add(archived, nature)
    covered: list = []
    for treatments, holdings in classes:
        for item in treatments.drain(T0 + 1000, force=True):
            runs = holdings.take(item)
            cells = [(b, o) for b, f, last in runs for o in range(f, last + 1)]
            assert len(cells) == item.count
            assert {(int(e.batch_id[1:]), e.batch_seq) for e in shown(item)} <= set(cells)
            covered += cells
        assert len(holdings) == 0
    assert sorted(covered) == sorted(sent)
    archive.close()


def shown(item: Item) -> list:
    if isinstance(item, Aggregate):
        return [item.first, item.latest]
    if isinstance(item, StateValue):
        return [item.value]
    return list(item.events if isinstance(item, Discrete) else item.messages)


def test_holdings_catch_an_item_they_did_not_see_whole():
    holdings = Holdings()
    treatments = Treatments(CATALOGUE)
    first = event("files", "a", sender="s")
    treatments.add(first, T0)
    treatments.add(event("files", "b", sender="s"), T0)
    holdings.add(first, Nature.DISCRETE)  # the second never reached the holdings
    [item] = treatments.drain(T0)
    with pytest.raises(HoldingsMismatch):
        holdings.take(item)


# -- the pipeline's own path ------------------------------------------------------------------


def test_a_pipeline_drain_records_its_items_as_delivered(path):
    pipeline = Pipeline(SensoryArchive(path), CATALOGUE.values())
    for i in range(30):
        pipeline.ingest(event("files", f"f{i}", sender="s"), T0)
    pipeline.ingest(event("logs", "slow", key="k"), T0)  # its window is still open
    [item] = pipeline.drain(T0)
    assert item.count == 30
    assert [e.text for e in pipeline.archive.undelivered()] == ["slow"]
    pipeline.archive.close()


def test_open_deliveries_seal_the_batches_and_commit_before_the_turns(path):
    pipeline = Pipeline(SensoryArchive(path), CATALOGUE.values())
    pipeline.admit(event("files", "a", sender="s"), T0)
    treatments = Treatments(CATALOGUE)
    holdings = Holdings()
    archived = pipeline.admit(event("files", "b", sender="s"), T0)
    treatments.add(archived, T0)
    holdings.add(archived, Nature.DISCRETE)
    [item] = treatments.drain(T0)
    [delivery] = pipeline.open_deliveries([Parcel("pool_x", (item,), holdings.take(item))],
                                          T0, after_turn=12)
    assert not pipeline.archive.staged  # on disk before any turn is written
    assert pipeline.archive.open_batch("files", "from:s") is None  # sealed
    [pending] = pipeline.archive.pending_deliveries()
    assert (pending.delivery_id, pending.token, pending.after_turn) == (delivery, "pool_x", 12)
    pipeline.settle([delivery], True, T0)
    assert [e.text for e in pipeline.archive.undelivered()] == ["a"]
    pipeline.archive.close()
