"""Treatments against a reference model, over random event streams.

Every event gets its own archive batch, so a gap span names exactly one
event and the test can rebuild, item by item, which events went where.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.perception.events import Nature, SensorInfo, TreatmentParams
from noema.perception.items import Aggregate, Discrete, GapSpan, StateValue, Utterance
from noema.perception.packing import pack
from noema.perception.treatments import StateBuffer, Treatments, UnknownChannel

from .conftest import CATALOGUE, T0, event

CHANNELS = ["logs", "chat", "files", "mail"]

# An arrival step is a small burst: n events of one channel, sender and key,
# dt/2 seconds apart, so runs often grow past the events held in memory.
adds = st.tuples(st.just("add"), st.integers(0, 12), st.sampled_from(CHANNELS),
                 st.integers(0, 2), st.integers(0, 2), st.integers(1, 6))
drains = st.tuples(st.just("drain"), st.integers(0, 24), st.booleans(), st.just(0), st.just(0),
                   st.just(0))
streams = st.lists(st.one_of(adds, adds, drains), max_size=40)


def _bucket(channel: str, sender: str, key: str) -> tuple[str, str]:
    nature = CATALOGUE[channel].nature
    if nature in (Nature.AGGREGATABLE, Nature.STATE):
        return channel, key
    return channel, sender


def _gap_ids(spans: tuple[GapSpan, ...], by_batch: dict) -> list[str]:
    for span in spans:
        assert span.count == 1 and span.first == span.last == 0
    return [by_batch[s.batch_id].id for s in spans]


def _check_item(item, pending: list, opened: dict, now: float, by_batch: dict) -> list[str]:
    """Compare a drained item with the reference; the IDs it accounts for, in order."""
    expected = [e.id for e in pending]
    if isinstance(item, (Discrete, Utterance)):
        held = list(item.events if isinstance(item, Discrete) else item.messages)
        hold = CATALOGUE[item.channel].treatment.hold
        omitted = _gap_ids(item.omitted, by_batch)
        got = [e.id for e in held[:hold]] + omitted + [e.id for e in held[hold:]]
        assert got == expected  # nothing lost, nothing repeated, order kept per source
        assert item.authorised == all(e.authorised for e in pending)
    elif isinstance(item, Aggregate):
        got = [item.first.id, *_gap_ids(item.between, by_batch)]
        if item.latest.id != item.first.id:
            got.append(item.latest.id)
        assert got == expected
        assert item.count == len(pending)
        assert item.opened_at == opened[(item.channel, item.key)]
        assert item.closed_at == now
        window = max(now - item.opened_at, 1)
        assert item.rate_per_minute == pytest.approx(len(pending) * 60 / window)
    else:
        assert isinstance(item, StateValue)
        assert item.value.id == expected[-1]  # the newest value wins
        got = [*_gap_ids(item.superseded, by_batch), item.value.id]
        assert sorted(got) == sorted(expected)
    return got


@settings(max_examples=100, deadline=None)
@given(streams)
def test_random_streams_match_the_reference(steps):
    treatments = Treatments(CATALOGUE)
    now = T0
    pending: dict[tuple[str, str], list] = defaultdict(list)
    opened: dict[tuple[str, str], float] = {}
    last_add: dict[tuple[str, str], float] = {}
    by_batch: dict = {}
    sent: list[str] = []
    delivered: list[str] = []

    def drain(force: bool) -> None:
        items = treatments.drain(now, force)
        for item in items:
            if isinstance(item, (Aggregate, StateValue)):
                bucket = (item.channel, item.key)
            else:
                bucket = (item.channel, item.sender)
            assert pending[bucket], f"{item} came from nothing"
            params = CATALOGUE[item.channel].treatment
            if not force and isinstance(item, Aggregate):  # nothing leaves before it is due
                assert opened[bucket] + params.window <= now
            if not force and isinstance(item, Utterance):
                due = min(last_add[bucket] + params.quiet_gap, opened[bucket] + params.max_hold)
                assert due <= now
            delivered.extend(_check_item(item, pending[bucket], opened, now, by_batch))
            packed = pack(item, k=2)
            assert packed.shown + packed.gap_count == item.count
            del pending[bucket]
            opened.pop(bucket, None)
        for bucket, waiting in pending.items():  # what stayed behind was not due
            assert waiting and not force
            nature = CATALOGUE[bucket[0]].nature
            assert nature in (Nature.AGGREGATABLE, Nature.MERGEABLE)
            params = CATALOGUE[bucket[0]].treatment
            if nature is Nature.AGGREGATABLE:
                assert opened[bucket] + params.window > now
            else:
                first = opened[bucket]
                assert min(last_add[bucket] + params.quiet_gap, first + params.max_hold) > now
        assert treatments.pending() == len(pending)

    def add(channel: str, sender: str, key: str) -> None:
        bucket = _bucket(channel, sender, key)
        e = event(channel, f"text {len(sent)}", at=now, sender=sender, key=key,
                  authorised=sender != "s2", batch=f"b{len(sent)}", seq=0)
        by_batch[e.batch_id] = e
        sent.append(e.id)
        treatments.add(e, now)
        pending[bucket].append(e)
        opened.setdefault(bucket, now)
        last_add[bucket] = now

    for op, dt, a, b, c, n in steps:
        if op == "drain":
            now += dt / 2
            drain(force=a)
            continue
        for _ in range(n):
            now += dt / 2
            add(a, f"s{b}", f"k{c}")
    drain(force=True)
    assert sorted(delivered) == sorted(sent) and len(set(delivered)) == len(sent)
    assert treatments.pending() == 0 and treatments.next_deadline() is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=1, max_size=40))
def test_utterances_end_on_quiet_gap_or_max_hold(gaps):
    """Draining before every message: a block never spans a quiet gap nor exceeds the hold."""
    params = TreatmentParams(quiet_gap=5.0, max_hold=30.0, hold=1000)  # every message held
    treatments = Treatments({"chat": SensorInfo("chat", "chat", Nature.MERGEABLE,
                                                treatment=params)})
    now = T0
    blocks: list[list[float]] = []
    for gap in gaps:
        now += gap / 2
        for item in treatments.drain(now):
            blocks.append([m.received_at for m in item.messages])
        treatments.add(event("chat", "m", at=now, sender="ana"), now)
    for item in treatments.drain(now, force=True):
        blocks.append([m.received_at for m in item.messages])
    assert sum(len(b) for b in blocks) == len(gaps)
    for block in blocks:
        assert all(b - a < params.quiet_gap for a, b in itertools.pairwise(block))
        assert block[-1] - block[0] < params.max_hold


def test_deadlines_follow_the_rules():
    t = Treatments(CATALOGUE)
    assert t.next_deadline() is None and not t.ready(T0)
    t.add(event("chat", "hi", sender="ana"), T0)
    t.add(event("chat", "again", sender="ana"), T0 + 3)
    assert t.next_deadline() == T0 + 3 + 5  # quiet gap after the last message
    assert not t.ready(T0 + 7.9) and t.ready(T0 + 8)
    t.add(event("logs", "boom", key="boom"), T0 + 4)
    assert t.drain(T0 + 7) == []
    [utterance] = t.drain(T0 + 8)
    assert [m.text for m in utterance.messages] == ["hi", "again"]
    assert t.next_deadline() == T0 + 4 + 60  # the log window
    t.add(event("files", "added: a"), T0 + 10)
    assert t.next_deadline() == T0 + 10 and t.ready(T0 + 10)  # discrete is due at once


def test_a_steady_stream_is_still_delivered_after_max_hold():
    t = Treatments(CATALOGUE)
    delivered = []
    for second in range(0, 70, 2):  # a message every 2 s never leaves a 5 s gap
        delivered += t.drain(T0 + second)
        t.add(event("chat", f"m{second}", sender="ana", at=T0 + second), T0 + second)
    assert delivered, "the maximum hold must flush a stream that never pauses"
    assert delivered[0].messages[-1].received_at - delivered[0].messages[0].received_at < 30


def test_long_runs_keep_their_ends_and_reference_the_middle():
    t = Treatments(CATALOGUE)
    for i in range(11):
        t.add(event("files", f"f{i}", batch="b7", seq=i), T0)
    [run] = t.drain(T0)
    assert [e.text for e in run.events] == ["f0", "f1", "f9", "f10"]
    assert run.omitted == (GapSpan("b7", 2, 8, 7),) and run.count == 11


def test_items_come_out_in_order_of_first_arrival():
    t = Treatments(CATALOGUE)
    t.add(event("mail", "3 unread", key="unread"), T0)
    t.add(event("files", "added: a"), T0 + 1)
    t.add(event("logs", "x", key="x"), T0 + 2)
    t.add(event("mail", "4 unread", key="unread"), T0 + 3)
    kinds = [type(i).__name__ for i in t.drain(T0 + 100)]
    assert kinds == ["StateValue", "Discrete", "Aggregate"]


def test_unknown_channels_are_refused():
    with pytest.raises(UnknownChannel):
        Treatments(CATALOGUE).add(event("nowhere"), T0)


def test_a_buffer_can_be_used_on_its_own():
    buffer = StateBuffer()
    for n in (3, 4, 5):
        buffer.add(event("mail", f"{n} unread", key="unread"), T0 + n)
    assert buffer.ready(T0) and buffer.next_deadline() == T0 + 3
    [state] = buffer.drain(T0 + 6)
    assert state.value.text == "5 unread" and state.count == 3 and len(buffer) == 0
