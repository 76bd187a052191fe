"""The first-run demo's sentence about the time follows the times its tool
returned: "morning" is never said beside an evening clock."""

from __future__ import annotations

import io
import re

from hypothesis import given, strategies as st

from noema.demo.tour import DemoPrinter, chapter_tools, part_of_day
from noema.paths import AgentPaths


async def test_the_demo_says_the_part_of_day_its_clocks_show(tmp_path):
    out = io.StringIO()
    await chapter_tools(AgentPaths.for_agent("demo", tmp_path), DemoPrinter(out), 0.0)
    text = out.getvalue()
    shown = {city: hour for hour, city in re.findall(r"→ \w+ \d\d \w+ \d{4}, (\d\d):\d\d:\d\d "
                                                   r"\(\w+/(\w+), UTC", text)}
    said = re.search(r"In Madrid it is (\d\d):\d\d, (\w+); in Tokyo it is (\d\d):\d\d, (\w+)\.",
                     text)
    assert said, text
    assert (said[1], said[3]) == (shown["Madrid"], shown["Tokyo"])  # the tool's own times
    assert said[2] == part_of_day(int(said[1])) and said[4] == part_of_day(int(said[3]))
    assert "morning in Madrid and evening in Tokyo" not in text  # the sentence fixed in advance

@given(st.integers(0, 23))
def test_every_hour_has_one_part_of_the_day(hour):
    assert part_of_day(hour) in ("morning", "afternoon", "evening", "night")
    assert (part_of_day(hour) == "morning") == (5 <= hour < 12)
