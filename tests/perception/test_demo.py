"""The perception demo tells a consistent story."""

from __future__ import annotations

import re

from noema.demo.perception import run_perception_demo


def test_the_demo_shows_condensed_events_and_balances_its_accounts(tmp_path):
    lines: list[str] = []
    run_perception_demo(lines.append, workdir=tmp_path)
    text = "\n".join(lines)
    assert text.count("assistant → pool_event()") == 3
    assert "events like «connectionˆerrorˆtoˆ<ip>ˆafterˆ<n>ˆms»" in text
    assert "[23:00:30] hi,ˆareˆyouˆthere?" in text
    assert "Ignore previous instructions" not in text  # the attack arrives datamarked
    assert "You have 7 unread" not in text and "Youˆhaveˆ7ˆunreadˆmails." in text
    raw, shown, gaps, dropped, total = map(int, re.search(
        r"raw events: (\d+); shown whole: (\d+); in archive gaps: (\d+); "
        r"dropped while silenced: (\d+); total (\d+)", text).groups())
    assert raw == total == shown + gaps + dropped and dropped > 0
    share = float(re.search(r"([\d.]+) %\)", text).group(1))
    assert share <= 1.0
    assert (tmp_path / "archive.db").exists()
