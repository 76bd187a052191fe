"""A delivered pool_event read back into channels, sandwich and archive places."""

from __future__ import annotations

from noema.interfaces.host.deliveries import delivery_json, read_delivery
from noema.interfaces.terminal.client import delivery_text
from noema.perception.items import Aggregate, Discrete, GapSpan
from noema.perception.packing import render_pool_event
from noema.perception.untrusted import SessionDelimiter

from tests.perception.conftest import T0, event

D = SessionDelimiter("0123abcd4567ef89")


def test_a_run_reads_as_head_gap_and_tail_with_its_batch():
    events = tuple(event("files", f"file {i} changed", at=T0 + i, batch="b7", seq=i,
                         sender="watcher")
                   for i in range(10))
    text = render_pool_event([Discrete("files", "watcher", False, events)], D, now=T0 + 10, k=3)
    delivery = read_delivery(text)
    assert delivery is not None and delivery.channels == ["files"]
    package = delivery.packages[0]
    assert package.nature == "discrete" and package.sender == "watcher"
    assert package.head[0].startswith("10 events")
    assert [line.split("] ")[1] for line in package.head[1:]] == [
        "file 0 changed", "file 1 changed", "file 2 changed"]  # spaces, not the datamark
    assert package.gap is not None and package.gap.count == 4
    assert [(p.batch, p.first, p.last) for p in package.gap.places] == [("b7", 3, 6)]
    assert [line.split("] ")[1] for line in package.tail] == [
        "file 7 changed", "file 8 changed", "file 9 changed"]
    assert delivery.batches == ["b7"]


def test_several_channels_are_named_in_order_and_as_json():
    first = event("logs", "disk full", at=T0, batch="b1", seq=0, sender="app.log")
    latest = event("logs", "disk full", at=T0 + 60, batch="b1", seq=40, sender="app.log")
    aggregate = Aggregate("logs", "disk full", 41, T0, T0 + 60, first, latest,
                          (GapSpan("b1", 1, 39, 39),), ("app.log",), False)
    note = Discrete("mail", "ana@example.org", True, (event("mail", "hello <b>there</b>",
                                                                 sender="ana@example.org"),))
    data = delivery_json(render_pool_event([aggregate, note], D, now=T0 + 60))
    assert data is not None and data["channels"] == ["logs", "mail"]
    assert data["batches"] == ["b1"]
    logs, mail = data["packages"]
    assert logs["gap"] == {"count": 39, "what": "more",
                           "places": [{"batch": "b1", "first": 1, "last": 39}]}
    assert mail["authorised"] and mail["gap"] is None and mail["sender"] == "ana@example.org"
    assert "hello <b>there</b>" in mail["head"][0]  # text, for the page to set as text


def test_text_that_is_not_a_delivery_is_left_alone():
    assert read_delivery("No new events.") is None
    assert read_delivery("") is None
    assert delivery_json("⟦pool_event nothex⟧ 1 package") is None


def test_the_terminal_names_the_channels_and_what_stayed_in_the_archive():
    first = event("logs", "disk full", at=T0, batch="b1", seq=0, sender="app.log")
    latest = event("logs", "disk full", at=T0 + 60, batch="b1", seq=40, sender="app.log")
    aggregate = Aggregate("logs", "disk full", 41, T0, T0 + 60, first, latest,
                          (GapSpan("b1", 1, 39, 39),), ("app.log",), False)
    note = Discrete("mail", "ana@example.org", True,
                    (event("mail", "hi", sender="ana@example.org"),))
    text = render_pool_event([aggregate, note], D, now=T0 + 60)
    assert delivery_text(text) == "  · events from logs, mail (2 packages, 39 more in the archive)"
    alone = render_pool_event([note], D, now=T0)
    assert delivery_text(alone) == "  · events from mail (1 package)"


def test_a_text_that_is_not_a_delivery_is_left_to_the_other_lines():
    assert delivery_text("No new events.") is None
    assert delivery_text("an answer that mentions pool_event") is None
