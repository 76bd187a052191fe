"""Gate → archive → treatments, with every raw event accounted for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.perception.archive import SensoryArchive
from noema.perception.items import Aggregate, Discrete, StateValue, Utterance
from noema.perception.packing import pack
from noema.perception.pipeline import Pipeline
from noema.perception.treatments import UnknownChannel

from .conftest import CATALOGUE, T0, event


@pytest.fixture
def pipeline():
    archive = SensoryArchive(":memory:", flush_every=50)
    yield Pipeline(archive, CATALOGUE.values())
    archive.close()


def _shown(item) -> list:
    p = pack(item, k=2)
    return [*p.head, *p.tail]


def test_dropped_events_are_archived_and_never_delivered_later(pipeline):
    pipeline.stop(["logs"], 120, T0)
    for i in range(5):
        assert not pipeline.ingest(event("logs", f"e{i}", key="e"), T0 + i)
    status = pipeline.status("logs", T0 + 10)
    assert status.gate.dropped == 5 and status.silenced_batch is not None
    assert pipeline.archive.lookup(status.silenced_batch).matching == 5
    assert pipeline.drain(T0 + 500, force=True) == []
    assert pipeline.start(["logs"], T0 + 20) == ["logs"]
    assert pipeline.ingest(event("logs", "after", key="e"), T0 + 21)
    [item] = pipeline.drain(T0 + 200, force=True)
    assert isinstance(item, Aggregate) and item.count == 1 and item.first.text == "after"
    assert pipeline.archive.batch(status.silenced_batch).sealed_at == T0 + 20


def test_a_silence_that_ends_by_itself_closes_its_batch(pipeline):
    pipeline.stop(["files"], 60, T0)
    pipeline.ingest(event("files", "lost"), T0 + 1)
    silenced = pipeline.status("files", T0 + 2).silenced_batch
    assert pipeline.ingest(event("files", "seen"), T0 + 61)
    assert pipeline.archive.batch(silenced).sealed_at == T0 + 61
    assert pipeline.status("files", T0 + 62).silenced_batch is None


def test_bypass_lets_a_rule_through_a_closed_gate(pipeline):
    pipeline.stop(["files"], 60, T0)
    assert pipeline.ingest(event("files", "fire!"), T0 + 1, bypass_gate=True)
    assert [e.text for e in pipeline.drain(T0 + 1)[0].events] == ["fire!"]


def test_delivered_batches_are_sealed_so_gaps_are_contiguous(pipeline):
    for i in range(10):
        pipeline.ingest(event("files", f"a{i}"), T0)
    [first] = pipeline.drain(T0)
    for i in range(10):
        pipeline.ingest(event("files", f"b{i}"), T0 + 1)
    [second] = pipeline.drain(T0 + 1)
    assert first.omitted[0].batch_id != second.omitted[0].batch_id
    gap = pack(second, k=2).gap[0]
    page = pipeline.archive.lookup(gap.batch_id, gap.first, gap.count)
    assert [e.text for e in page.events] == [f"b{i}" for i in range(2, 8)]


def test_admit_alone_leaves_treatment_to_the_caller(pipeline):
    archived = pipeline.admit(event("chat", "hi", sender="ana"), T0)
    assert archived is not None and archived.batch_id is not None
    assert pipeline.treatments.pending() == 0
    with pytest.raises(UnknownChannel):
        pipeline.admit(event("nowhere"), T0)
    with pytest.raises(UnknownChannel):
        pipeline.status("nowhere", T0)


steps = st.lists(st.one_of(
    st.tuples(st.just("event"), st.sampled_from(["logs", "chat", "files", "mail"]),
              st.integers(0, 1), st.integers(0, 6)),
    st.tuples(st.just("stop"), st.sampled_from(["logs", "chat", "files", "mail"]),
              st.integers(1, 30), st.just(0)),
    st.tuples(st.just("start"), st.sampled_from(["logs", "chat", "files", "mail"]),
              st.just(0), st.just(0)),
    st.tuples(st.just("drain"), st.booleans(), st.just(0), st.integers(0, 60)),
), max_size=60)


@settings(max_examples=40, deadline=None)
@given(steps)
def test_every_raw_event_is_delivered_in_a_gap_or_dropped(ops):
    archive = SensoryArchive(":memory:", flush_every=7)
    pipeline = Pipeline(archive, CATALOGUE.values())
    now, sent, dropped, shown, gapped = T0, {}, set(), [], []

    def drain(force: bool) -> None:
        for item in pipeline.drain(now, force):
            packed = pack(item, k=2)
            shown.extend(e.id for e in [*packed.head, *packed.tail])
            for gap in packed.gap:
                page = archive.lookup(gap.batch_id, gap.first, gap.last - gap.first + 1)
                assert len(page.events) == gap.count  # the gap's offsets hold it exactly
                gapped.extend(e.id for e in page.events)

    for op, a, b, c in ops:
        if op == "event":
            now += c
            e = event(a, f"{a} {len(sent)}", at=now, sender=f"s{b}", key=f"k{b}")
            sent[e.id] = e
            if not pipeline.ingest(e, now):
                dropped.add(e.id)
        elif op == "stop":
            pipeline.stop([a], b, now)
        elif op == "start":
            pipeline.start([a], now)
        else:
            now += c
            drain(a)
    drain(True)
    delivered = shown + gapped
    assert len(delivered) == len(set(delivered))  # nothing twice
    assert set(delivered) | dropped == set(sent)  # nothing lost
    assert not set(delivered) & dropped  # nothing dropped came back
    counts = archive.counts()
    assert sum(c.stored for c in counts.values()) == len(sent)
    assert sum(c.dropped for c in counts.values()) == len(dropped)
    archive.close()


def test_items_shown_keep_their_batch_coordinates(pipeline):
    pipeline.ingest(event("mail", "3", key="unread"), T0)
    pipeline.ingest(event("mail", "4", key="unread"), T0 + 1)
    [state] = pipeline.drain(T0 + 2)
    assert isinstance(state, StateValue) and state.value.text == "4"
    assert state.superseded[0].batch_id == state.value.batch_id
    pipeline.ingest(event("chat", "hola", sender="ana"), T0 + 3)
    [said] = pipeline.drain(T0 + 9)
    assert isinstance(said, Utterance) and said.messages[0].batch_seq == 0
    assert not isinstance(said, Discrete)
