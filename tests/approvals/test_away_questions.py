"""The questions asked away, without servers: which channel asks, the first
answer from anywhere wins, expiry, a restart, and the outcome events."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from noema.memory.turns import Source, SourceKind
from noema.perception.clock import wall_clock
from noema.perception.events import Event
from noema.perception.hub import Emitter, MemoryBookmark
from noema.perception.sensors.approvals import ApprovalSensor
from noema.security.approvals import ApprovalRequest
from noema.security.away import Answer, AwayApprovals, AwayQuestion, Posted
from noema.security.away_store import AwayStore
from noema.tools.registry import ToolContext, ToolError, ToolResult

from .conftest import until

REQUEST = ApprovalRequest("shell_execute", "command: make deploy",
                          "the autonomy level of shell_execute is 'ask'", "call_4", 20)


class Channel:
    """A channel of the person's that records what it was asked to do."""

    def __init__(self, name: str, *, broken: bool = False) -> None:
        self.name = name
        self.broken = broken
        self.asked: list[AwayQuestion] = []
        self.answer: Answer | None = None
        self.closed: list[tuple[dict, str]] = []

    async def post_question(self, question: AwayQuestion, answer: Answer) -> Posted:
        if self.broken:
            raise RuntimeError("the inbox is not being read")
        self.asked.append(question)
        self.answer = answer
        return Posted(f"on {self.name}", {"n": question.number})

    async def close_question(self, handle: Mapping[str, Any], outcome: str) -> None:
        self.closed.append((dict(handle), outcome))


class Shown:
    """An interface's view of the questions (what the host does with them)."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def away_asked(self, number: int, request: ApprovalRequest, place: str,
                   expires_at: float) -> None:
        self.events.append(("asked", number, request.tool))

    def away_settled(self, number: int, allowed: bool, by: str) -> None:
        self.events.append(("settled", number, allowed, by))


def context() -> ToolContext:
    return ToolContext("call_4", 20, 2)


def away_over(store: AwayStore, *channels: Channel, timeout: float = 60.0) -> AwayApprovals:
    return AwayApprovals(store, list(channels), timeout=lambda: timeout, zone=ZoneInfo("UTC"))


class Runs:
    def __init__(self) -> None:
        self.count = 0

    async def __call__(self) -> ToolResult:
        self.count += 1
        return ToolResult("deployed")


async def drained(away: AwayApprovals) -> None:
    for _ in range(100):
        await asyncio.sleep(0)
    await asyncio.gather(*away._tasks)


async def test_the_first_channel_that_can_ask_asks_and_the_first_answer_wins(tmp_path):
    store = AwayStore(tmp_path / "approvals.db")
    mail, telegram = Channel("email", broken=True), Channel("telegram")
    away = away_over(store, mail, telegram)
    shown = Shown()
    away.listeners.append(shown)
    run = Runs()
    try:
        ticket = await away.post(REQUEST, context(), run)
        assert ticket.number == 1 and ticket.where == "on telegram" and "UTC" in ticket.expires
        assert [q.number for q in telegram.asked] == [1] \
            and [p[:3] for p in away.pending()] == [(1, REQUEST, "on telegram")]
        # Answered at an interface first: the Telegram message is told, a press after is not taken.
        assert away.answer(1, True, "web") is None
        refusal = telegram.answer(1, False, "telegram")
        assert refusal is not None and "closed" in refusal and "on the web page" in refusal
        await drained(away)
        assert run.count == 1
        assert telegram.closed == [({"n": 1}, "Answered on the web page: allowed.")]
        assert shown.events == [("asked", 1, "shell_execute"), ("settled", 1, True, "web")]
        [outcome] = store.outcomes_after(0)
        assert outcome.state == "ran" and outcome.outcome_seq == 1
        assert "allowed it on the web page" in outcome.outcome
        assert "deployed" in outcome.outcome and "make deploy" in outcome.outcome
        assert away.answer(99, True, "web").startswith("approval 99 is not one")
    finally:
        await away.aclose()
        store.close()


async def test_with_no_channel_able_to_ask_the_call_is_refused_with_the_reasons(tmp_path):
    store = AwayStore(tmp_path / "approvals.db")
    away = away_over(store, Channel("email", broken=True))
    try:
        with pytest.raises(ToolError, match="the inbox is not being read"):
            await away.post(REQUEST, context(), Runs())
        assert store.unfinished() == []
    finally:
        store.close()


async def test_an_unanswered_question_expires_and_its_channel_says_so(tmp_path):
    store = AwayStore(tmp_path / "approvals.db")
    telegram = Channel("telegram")
    away = away_over(store, telegram, timeout=0.05)
    run = Runs()
    try:
        await away.post(REQUEST, context(), run)
        await until(lambda: not away.is_waiting(1), "the question to expire")
        await drained(away)
        assert run.count == 0
        assert "No answer came in time" in telegram.closed[0][1]
        [outcome] = store.outcomes_after(0)
        assert outcome.state == "expired" and "expired as a refusal" in outcome.outcome
        late = telegram.answer(1, True, "telegram")
        assert late is not None and "expired" in late
    finally:
        await away.aclose()
        store.close()


async def test_a_restart_expires_what_waited_and_never_runs_a_cut_call_again(tmp_path):
    path = tmp_path / "approvals.db"
    store = AwayStore(path)
    telegram = Channel("telegram")
    away = away_over(store, telegram)
    await away.post(REQUEST, context(), Runs())
    await away.post(REQUEST, context(), Runs())
    store.move(2, "running")  # the process died while the second one ran
    await away.aclose()
    store.close()

    store = AwayStore(path)
    telegram_again = Channel("telegram")
    again = away_over(store, telegram_again)
    shown = Shown()
    again.listeners.append(shown)  # an interface bound before the start
    run = Runs()
    try:
        await again.start()
        # The chats' line of the call that waited says it expired; the cut call had its answer.
        assert shown.events == [("settled", 1, False, "restart")]
        await drained(again)
        first, second = store.outcomes_after(0)
        assert (first.number, first.state, first.by) == (1, "expired", "restart")
        assert "restarted before the person answered" in first.outcome
        assert (second.number, second.state) == (2, "failed")
        assert "was not run again" in second.outcome
        assert telegram_again.closed == [({"n": 1}, "The agent restarted before an answer "
                                                   "came: it expired, and nothing was run.")]
        assert "expired when the agent restarted" in again.answer(1, True, "telegram")
        # Numbers go on from where they were: one number names one question.
        ticket = await again.post(REQUEST, context(), run)
        assert ticket.number == 3
    finally:
        await again.aclose()
        store.close()


class Sink:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)


async def test_the_sensor_reports_each_outcome_once_in_order_from_its_bookmark(tmp_path):
    store = AwayStore(tmp_path / "approvals.db")
    telegram = Channel("telegram")
    away = away_over(store, telegram)
    bookmark = MemoryBookmark()
    sink = Sink()
    sensor = ApprovalSensor(away, bookmark=bookmark)
    running = asyncio.create_task(sensor.run(Emitter("approvals", wall_clock, sink)))
    try:
        for _ in range(3):
            await away.post(REQUEST, context(), Runs())
        away.answer(2, False, "chat")
        away.answer(1, True, "telegram")
        await drained(away)
        await until(lambda: len(sink.events) >= 2, "the outcomes of approvals 2 and 1")
        assert [e.payload["approval"] for e in sink.events] == [2, 1]
        assert sink.events[0].text.startswith("Approval 2") and "in the terminal" in \
            sink.events[0].text
        assert sink.events[1].payload["outcome"] == "ran" and sink.events[1].authorised
        assert bookmark.load() == {"through": 2}
        running.cancel()
        # Started again from its bookmark, the sensor reports only what is new.
        away.answer(3, False, "telegram")
        again = Sink()
        running = asyncio.create_task(sensor.run(Emitter("approvals", wall_clock, again)))
        await until(lambda: bool(again.events), "the outcome of approval 3, after the restart")
        assert [e.payload["approval"] for e in again.events] == [3]
    finally:
        running.cancel()
        await away.aclose()
        store.close()


async def test_an_outcome_holding_outside_words_is_reported_as_outside(tmp_path):
    store = AwayStore(tmp_path / "approvals.db")
    away = away_over(store, Channel("telegram"))
    sink = Sink()

    async def fetch() -> ToolResult:
        return ToolResult("<page text>", sources=(Source(SourceKind.WEB, "https://a.example/"),))

    try:
        await away.post(REQUEST, context(), fetch)
        away.answer(1, True, "telegram")
        await drained(away)
        running = asyncio.create_task(ApprovalSensor(away).run(
            Emitter("approvals", wall_clock, sink)))
        await until(lambda: bool(sink.events), "the outcome of approval 1")
        running.cancel()
        assert not sink.events[0].authorised
        assert store.reported() == 1  # without a bookmark the store keeps the place
    finally:
        await away.aclose()
        store.close()


@pytest.mark.parametrize("settle", ["expired", "refused"])
async def test_the_outcome_of_a_call_outside_words_led_to_is_theirs_whatever_became_of_it(
        tmp_path, settle):
    """An outcome repeats the call's arguments (a stranger's order, say): an
    expiry or a refusal reported as the person's own words would hand the
    order back to the model with the person's authority."""
    mallory = Source(SourceKind.MAIL, "mallory@example.net")
    request = ApprovalRequest("file_write", "path: planted.txt\ncontent: pwned",
                              "because it follows a stranger's mail", "call_4", 20,
                              sources=(mallory,))
    store = AwayStore(tmp_path / "approvals.db")
    away = away_over(store, Channel("telegram"), timeout=0.2 if settle == "expired" else 60)
    sink = Sink()
    try:
        await away.post(request, context(), Runs())
        if settle == "refused":
            away.answer(1, False, "telegram")
        await until(lambda: not away.is_waiting(1), "the question to be settled")
        await drained(away)
        running = asyncio.create_task(ApprovalSensor(away).run(
            Emitter("approvals", wall_clock, sink)))
        await until(lambda: bool(sink.events), "the outcome of approval 1")
        running.cancel()
        (event,) = sink.events
        assert "planted.txt" in event.text and not event.authorised
        assert [list(p) for p in event.payload["sources"]] == [["mail", "mallory@example.net"]]
    finally:
        await away.aclose()
        store.close()
