"""`noema status` wording, from a status with something in every part."""

from noema.interfaces.host.protocol import ChannelView, SensorView, StatusView
from noema.interfaces.terminal.status_text import format_status


def test_every_part_of_a_busy_status_is_said():
    view = StatusView(
        agent="ana", pid=42, started_at=1000.0, phase="running", busy=True,
        context_tokens=12_345, context_window=128_000, session_turns=40, waiting_messages=1,
        waiting_events={"normal": 5, "urgent": 2}, held=True, world_tokens_spent=210_000,
        world_tokens_per_hour=200_000, world_budget_exhausted=True,
        sensors=[SensorView(channel="log.app", nature="aggregatable", urgency="normal",
                            state="silenced", silenced_until=1000.0 + 3 * 3600, events=120),
                 SensorView(channel="email", nature="discrete", urgency="priority",
                            state="crashed", events=3)],
        channels=[ChannelView(name="email", state="retrying in 8 s", detail="ana@example.org")],
        clients=2, last_error="the email sensor failed (timeout); retrying in 8 s",
        save_point_id=3)
    text = format_status(view, now=1000.0 + 2 * 3600 + 5 * 60, asker=True)
    lines = text.splitlines()
    assert lines[0] == "agent ana · pid 42 · up 2 h 5 min · 1 other interface attached"
    assert lines[1] == "state: working on a reply"
    assert lines[2] == "context: about 12,345 of 128,000 tokens (10%) in 40 turns · save point #3"
    assert lines[3] == ("waiting: 1 message(s); events: 2 urgent, 5 normal "
                        "(events wait for you to write)")
    assert lines[4] == "world budget: 210,000 of 200,000 tokens this hour, spent: events wait for you"
    assert lines[5] == "sensors:"
    assert lines[6].split()[:4] == ["log.app", "aggregatable", "normal", "silenced"]
    assert "until" in lines[6] and lines[6].endswith("120 events")
    assert lines[7].split() == ["email", "discrete", "priority", "crashed", "3", "events"]
    assert lines[8:10] == ["channels:", "  email  retrying in 8 s  ana@example.org"]
    assert lines[10] == "last error: the email sensor failed (timeout); retrying in 8 s"


def test_an_idle_agent_with_nothing_configured():
    view = StatusView(agent="default", pid=7, started_at=0.0, phase="idle", busy=False,
                      context_tokens=300, context_window=32_768, session_turns=0,
                      waiting_messages=0, world_tokens_per_hour=None)
    text = format_status(view, now=30.0)
    assert "up 30 s · 0 interfaces attached" in text
    assert "waiting: nothing" in text and "sensors: none" in text and "channels: none" in text
    assert "(no limit)" in text and "last error: none" in text
    assert "memory:" not in text  # nothing written, nothing failed: nothing said


def test_what_memory_writes_is_said_under_the_context():
    view = StatusView(agent="ana", pid=7, started_at=0.0, phase="idle", busy=False,
                      context_tokens=3_000, context_window=4_096, session_turns=30,
                      waiting_messages=0, memory="writing a save point of 18 turns, attempt 1 of 3")
    lines = format_status(view, now=30.0).splitlines()
    assert lines[2].startswith("context: ")
    assert lines[3] == "memory: writing a save point of 18 turns, attempt 1 of 3"
