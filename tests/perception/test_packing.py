"""Sandwich packing and the text of a pool_event result."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.perception.items import Aggregate, Discrete, GapSpan, StateValue, Utterance
from noema.perception.packing import Packed, pack, render_pool_event, sandwich, tally
from noema.perception.untrusted import SessionDelimiter

from .conftest import T0, event

D = SessionDelimiter("feedfacecafe")


def _run(n: int, batch: str = "b3") -> tuple:
    return tuple(event("files", f"f{i}", at=T0 + i, batch=batch, seq=i) for i in range(n))


def test_a_short_run_is_shown_whole():
    events = _run(6)
    head, tail, gap = sandwich(events, (), 3)
    assert head + tail == events and gap == ()


def test_a_long_run_keeps_k_at_each_end_and_names_the_gap():
    events = _run(10)
    head, tail, gap = sandwich(events, (), 3)
    assert [e.text for e in head] == ["f0", "f1", "f2"]
    assert [e.text for e in tail] == ["f7", "f8", "f9"]
    assert gap == (GapSpan("b3", 3, 6, 4),)


def test_the_omitted_middle_joins_the_gap():
    held = _run(3) + tuple(event("files", f"g{i}", batch="b4", seq=i) for i in (1, 2, 3))
    head, tail, gap = sandwich(held, (GapSpan("b3", 3, 40, 38), GapSpan("b4", 0, 0, 1)), 2)
    assert len(head) == len(tail) == 2
    assert sum(g.count for g in gap) == 2 + 39
    assert gap == (GapSpan("b3", 2, 40, 39), GapSpan("b4", 0, 1, 2))


def test_k_larger_than_what_is_held_still_accounts_for_everything():
    held = _run(3)
    head, tail, gap = sandwich(held, (GapSpan("b3", 3, 9, 7),), 5)
    assert len(head) + len(tail) == 3 and gap == (GapSpan("b3", 3, 9, 7),)
    with pytest.raises(ValueError):
        sandwich(held, (), 0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 60), st.integers(0, 30), st.integers(1, 8))
def test_packing_accounts_for_every_event(n, omitted, k):
    held = _run(n)
    spans = (GapSpan("b9", 0, omitted - 1, omitted),) if omitted else ()
    packed = pack(Discrete("files", "files", False, held, spans), k)
    assert packed.shown + packed.gap_count == n + omitted
    assert len(packed.head) <= max(k, (n + 1) // 2) and len(packed.tail) <= k
    assert list(packed.head) + list(packed.tail) == [
        e for e in held if e in packed.head or e in packed.tail]  # order kept


def test_a_packed_item_must_balance():
    item = Discrete("files", "files", False, _run(2))
    with pytest.raises(ValueError):
        Packed(item, item.events[:1], (), ())


def test_aggregate_reads_count_window_rate_and_examples():
    first = event("logs", "connection error to 10.0.0.3 after 512 ms", at=T0, batch="b1", seq=0,
                  sender="/var/log/app.log")
    latest = event("logs", "connection error to 10.0.0.9 after 77 ms", at=T0 + 299, batch="b1",
                   seq=149, sender="/var/log/app.log")
    item = Aggregate("logs", "connection error to <ip> after <n> ms", 150, T0, T0 + 300, first,
                     latest, (GapSpan("b1", 1, 148, 148),), ("/var/log/app.log",), False)
    text = render_pool_event([item], D, now=T0 + 300)
    assert "150 events like «connectionˆerrorˆtoˆ<ip>ˆafterˆ<n>ˆms» in 5 min (30/min)" in text
    assert "first [23:00:00] connectionˆerrorˆtoˆ10.0.0.3ˆafterˆ512ˆms" in text
    assert "latest [23:04:59] connectionˆerrorˆtoˆ10.0.0.9ˆafterˆ77ˆms" in text
    assert "… 148 more: batch b1 offsets 1–148 (lookup_sensory_archive)" in text
    assert 'sender="/var/log/app.log" authorised=no' in text
    assert tally([item]) == (2, 148)


def test_a_single_aggregated_event_has_no_rate_and_no_gap():
    only = event("logs", "disk full", key="disk full")
    text = render_pool_event([Aggregate("logs", "disk full", 1, T0, T0 + 60, only, only, (),
                                        ("logs",), False)], D)
    assert "1 event like «diskˆfull»." in text and "more" not in text and "latest" not in text


def test_an_utterance_carries_each_message_time():
    messages = tuple(event("chat", text, at=T0 + dt, sender="ana", authorised=True)
                     for dt, text in ((1, "Hola"), (3, "¿Estás?"), (7, "Necesito hablar contigo")))
    text = render_pool_event([Utterance("chat", "ana", True, messages)], D)
    assert "3 messages, 23:00:01–23:00:07:\n[23:00:01] Hola\n[23:00:03] ¿Estás?\n" \
           "[23:00:07] NecesitoˆhablarˆContigo".lower() in text.lower()
    assert 'sender="ana" authorised=yes' in text


def test_a_state_value_names_what_it_replaced():
    value = event("mail", "6 unread", key="unread", payload={"unread": 6}, batch="b5", seq=3)
    text = render_pool_event([StateValue("mail", "unread", value, (GapSpan("b5", 0, 2, 3),))], D)
    assert '[23:00:00] 6ˆunread\ndata: {"unread":6}' in text
    assert "… 3 older values replaced by this one: batch b5 offsets 0–2" in text
    one = StateValue("mail", "unread", value, (GapSpan("b5", 2, 2, 1),))
    assert "1 older value replaced" in render_pool_event([one], D)


def test_long_text_is_cut_with_a_pointer_to_the_archive():
    long = event("files", "x" * 5000, batch="b2", seq=7)
    text = render_pool_event([Discrete("files", "files", False, (long,))], D, max_chars=100)
    assert "x" * 100 + " (… 4900 more characters; whole in batch b2 offset 7)" in text
    assert "x" * 101 not in text


def test_late_arrivals_say_when_they_arrived():
    late = event("files", "added: a")
    late = type(late)(late.id, "files", "files", False, T0, T0 + 600, text="added: a")
    assert "[23:00:00] (received 23:10:00) added:ˆa" in render_pool_event(
        [Discrete("files", "files", False, (late,))], D)


def test_an_event_from_another_day_carries_its_date():
    old = event("files", "added: a")
    old = type(old)(old.id, "files", "files", False, T0 - 86400 * 3, T0, text="added: a")
    assert "[2026-03-26 23:00:00] (received 23:00:00) added:ˆa" in render_pool_event(
        [Discrete("files", "files", False, (old,))], D)


def test_nothing_pending_reads_plainly():
    assert render_pool_event([], D) == "No new events."


def test_unarchived_gaps_say_so():
    events = tuple(event("files", f"f{i}") for i in range(9))
    text = render_pool_event([Discrete("files", "files", False, events)], D, k=2)
    assert "… 5 more: not archived" in text and "lookup_sensory_archive)" not in text
