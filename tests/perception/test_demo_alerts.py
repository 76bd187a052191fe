"""The alarms chapter of the demo runs through the real agent, offline: the
alert's two notices reach the model as one replaced value, the log burst as a
count, and both searches find what the count and the replacement hid."""

from __future__ import annotations

import io
import re

from noema.demo.tour import CHAPTERS, DemoPrinter, chapter_alerts, demo_config
from noema.demo.alerts import ALERT, ASKED_ORDER, BURST, alerts_chapter
from noema.memory.store import TurnStore
from noema.memory.turns import TurnKind
from noema.paths import AgentPaths
from noema.perception.archive import SensoryArchive


async def test_the_alerts_chapter_shows_one_replaced_value_and_finds_the_hidden_line(tmp_path):
    out = io.StringIO()
    printer = DemoPrinter(out)
    home = tmp_path / "alerts"
    await alerts_chapter(home, demo_config(AgentPaths.for_agent("demo", tmp_path)), printer,
                         printer.say, printer.person, 0.0)
    text = out.getvalue()

    # The intake took both notices; the model read one value, the resolved one.
    assert text.count("POST /alertmanager") == 2 and text.count("202 {'accepted': 1}") == 2
    assert "the model was woken once; its pool_event showed 1 alert value" in text
    assert "the resolved one, 1 older value replaced (firing, kept in the archive)" in text
    # The burst reached the model as a count with a gap; the asked line was in it.
    assert f"{BURST} events like «paymentˆdeclinedˆforˆorderˆ<n>" in text
    assert f"order {ASKED_ORDER} shown to the model: no, it is inside the gap" in text
    found = re.search(
        rf"the archive search found: (b\d+)#(\d+) log\.payments .*orderˆ{ASKED_ORDER}", text)
    assert found is not None
    inside = rf"{found[1]}#{found[2]} is inside the gap .*\(offsets 1–{BURST - 2}\)"
    assert re.search(inside, text)
    # The replaced notice is in the archive; the delivered one in the turn history.
    assert "the archive keeps 2 values of the alert" in text
    assert "FIRING:ˆPaymentsErrorRate" in text
    assert re.search(r"1 turn\(s\) for \"PaymentsErrorRate\".*\n.*#\d+ events", text)

    agent = AgentPaths.for_agent("alerts", home)
    store = TurnStore(agent.turns_db)
    try:
        events = [t.content for t in store.range(1, store.last_id()) if t.kind is TurnKind.EVENT]
    finally:
        store.close()
    alerts = [e for e in events if "channel=alertmanager" in e]
    assert len(alerts) == 1 and "RESOLVED:" in alerts[0] and "FIRING:" not in alerts[0]
    assert not any(str(ASKED_ORDER) in e for e in events)
    with SensoryArchive(agent.archive_db) as archive:
        statuses = [hit.event.payload["status"]
                    for hit in archive.search(ALERT, channel="alertmanager").hits]
        burst = archive.search(str(ASKED_ORDER), channel="log.payments").hits
    assert sorted(statuses) == ["firing", "resolved"]
    assert len(burst) == 1 and f"order {ASKED_ORDER}:" in burst[0].event.text
    assert chapter_alerts in CHAPTERS
