"""The status bar's words, computed from messages and an injected clock."""

from __future__ import annotations

from noema.interfaces.host.protocol import RetryWaiting
from noema.interfaces.terminal.status_line import StatusBar, compact_tokens, countdown, waiting_events

from .fakes import status_view


def retry(until: float, number: int = 1, of: int = 4) -> RetryWaiting:
    return RetryWaiting(retry=number, of=of, seconds=10, until=until, line="")


def test_the_countdown_rounds_up_and_ends_at_now():
    wait = retry(until=110.0, number=2)
    assert countdown(wait, 100.0) == "retry 2 of 4 in 10 s"
    assert countdown(wait, 100.01) == "retry 2 of 4 in 10 s"
    assert countdown(wait, 109.5) == "retry 2 of 4 in 1 s"
    assert countdown(wait, 110.0) == "retry 2 of 4 now"
    assert countdown(wait, 130.0) == "retry 2 of 4 now"


def test_token_counts_are_short():
    assert [compact_tokens(n) for n in (812, 1000, 12_345, 128_000, 200_500, 1_048_576,
                                        2_000_000)] == \
        ["812", "1k", "12.3k", "128k", "200k", "1.05M", "2M"]


def test_waiting_events_name_the_most_urgent_first():
    assert waiting_events({"normal": 5, "urgent": 2, "priority": 0}) == "2 urgent, 5 normal"
    assert waiting_events({}) == ""


def test_the_bar_shows_context_phase_waiting_retry_and_approvals():
    now = [50.0]
    bar = StatusBar(agent="ana", clock=lambda: now[0])
    assert bar.text() == "ana · idle"  # before the first status
    bar.view = status_view(context_tokens=30_000, context_window=128_000,
                           waiting_events={"normal": 3, "priority": 1}, held=True,
                           waiting_messages=2)
    bar.phase, bar.activity = "running", "shell_execute"
    bar.retry = retry(until=57.2)
    bar.approvals = 1
    assert bar.text() == ("ana · context 30k/128k (23%) · running: shell_execute · "
                          "events waiting: 1 priority, 3 normal (held) · 2 message(s) waiting · "
                          "retry 1 of 4 in 8 s · an approval waits for your answer")
    assert bar.counting_down
    now[0] = 58.0
    assert not bar.counting_down and "retry 1 of 4 now" in bar.text()


def test_a_change_is_told_to_whoever_redraws():
    bar = StatusBar()
    seen: list[str] = []
    bar.on_change(lambda: seen.append(bar.phase))
    bar.phase = "running"
    bar.changed()
    assert seen == ["running"]


def test_the_bar_says_what_memory_is_writing_or_why_it_failed():
    bar = StatusBar(agent="ana")
    bar.view = status_view(memory="writing a save point of 24 turns, attempt 2 of 3")
    assert bar.text() == ("ana · context 12.3k/32.8k (38%) · idle · "
                          "memory: writing a save point of 24 turns, attempt 2 of 3")
    bar.view = status_view()
    assert "memory" not in bar.text()
