"""The chat's logic against a fake connection: typed lines become the right
requests, and what the agent says is shown as a person reads it."""

from __future__ import annotations

import asyncio
import io

import pytest

from noema.interfaces.host.protocol import (
    Answer,
    ApprovalAsked,
    ApprovalSettled,
    AskStatus,
    CycleEnded,
    CycleStarted,
    Decided,
    Done,
    Goodbye,
    Idle,
    Notice,
    RetryWaiting,
    Said,
    Say,
    Stop,
    TextDelta,
    ToolFinished,
    TurnStored,
    TurnView,
)
from noema.interfaces.terminal.client import HELP, ChatClient
from noema.interfaces.terminal.screen import PlainScreen
from noema.interfaces.terminal.status_line import StatusBar

from .fakes import FakeConnection, Typist, answer_requests


def turn(kind: str, content: str = "", **fields: object) -> TurnView:
    return TurnView(id=fields.pop("id", 1), ts=0.0, kind=kind, content=content,
                    **fields)  # type: ignore[arg-type]


class Chat:
    """A client on a plain screen, its pump running."""

    def __init__(self, connection: FakeConnection, bar: StatusBar | None = None) -> None:
        self.out = io.StringIO()
        self.connection = connection
        self.client = ChatClient(connection, PlainScreen(self.out), bar=bar)
        self.typist = Typist()
        self.client.use_input(self.typist)
        self.pump = asyncio.create_task(self.client.pump(connection.messages()))

    async def type(self, text: str) -> bool:
        """The person enters `text` now."""
        return await self.client.take_line(text, at=self.typist.enter())

    @property
    def shown(self) -> str:
        return self.out.getvalue()

    async def hear(self, *messages) -> None:
        """The agent says these; return once the chat has shown them."""
        shown = asyncio.Event()
        original = self.client.handle
        last = messages[-1]

        def handle(message):
            original(message)
            if message is last:
                shown.set()

        self.client.handle = handle  # type: ignore[method-assign]
        try:
            self.connection.put(*messages)
            await asyncio.wait_for(shown.wait(), 10)
        finally:
            self.client.handle = original  # type: ignore[method-assign]

    async def close(self) -> None:
        await self.connection.aclose()
        await asyncio.wait_for(self.pump, 10)


@pytest.fixture
async def chat():
    c = Chat(FakeConnection())
    yield c
    await c.close()


async def test_a_typed_line_is_said_and_commands_become_their_requests(chat):
    assert await chat.type("hello there") is True
    (say,) = chat.connection.of(Say)
    assert say.text == "hello there"
    assert chat.client.busy  # a message to an idle agent starts a cycle

    await chat.hear(CycleStarted(cycle_id=1, origin="person"))
    assert await chat.type("/stop") is True
    assert len(chat.connection.of(Stop)) == 1

    assert await chat.type("/status") is True
    assert len(chat.connection.of(AskStatus)) == 1
    assert "context: about 12,300 of 32,768 tokens (38%) in 7 turns" in chat.shown

    sent = len(chat.connection.sent)
    assert await chat.type("/help") is True
    assert await chat.type("/frobnicate") is True
    assert await chat.type("   ") is True
    assert len(chat.connection.sent) == sent  # none of these reach the agent
    assert HELP in chat.shown and "unknown command /frobnicate; /help lists them" in chat.shown

    assert await chat.type("/quit") is False
    assert await chat.type("/exit") is False


async def test_stop_with_nothing_running_sends_nothing(chat):
    await chat.type("/stop")
    assert chat.connection.of(Stop) == []
    assert "(nothing to stop)" in chat.shown


async def test_an_answer_streams_then_tools_and_results_are_one_line_each(chat):
    await chat.hear(
        CycleStarted(cycle_id=1, origin="person"),
        TextDelta(delta="Let me "), TextDelta(delta="look."),
        TurnStored(turn=turn("assistant", "Let me look.")),
        TurnStored(turn=turn("tool_call", tool_name="file_read", arguments='{"path": "a.txt"}')),
        ToolFinished(call=turn("tool_call", tool_name="file_read"),
                     result=turn("tool_result", "no such file\nat all", error=True)),
        TextDelta(delta="It is not there."),
        CycleEnded(cycle_id=1, outcome="done"),
        Idle(),
    )
    assert chat.shown == (
        "noema> Let me look.\n"
        '  · file_read({"path": "a.txt"})\n'
        "    ✗ no such file at all\n"
        "noema> It is not there.\n"
        "you> ")
    assert not chat.client.busy


async def test_an_answer_that_never_streamed_is_shown_whole(chat):
    await chat.hear(CycleStarted(cycle_id=1, origin="person"),
                    TurnStored(turn=turn("assistant", "All at once.")))
    assert "noema> All at once.\n" in chat.shown


async def test_stops_failures_and_notices_are_said(chat):
    await chat.hear(CycleStarted(cycle_id=1, origin="person"),
                    TextDelta(delta="Once upon"),
                    CycleEnded(cycle_id=1, outcome="stopped"),
                    CycleStarted(cycle_id=2, origin="person"),
                    CycleEnded(cycle_id=2, outcome="failed", error="the model is unreachable"),
                    Notice(text="senses are off"))
    assert "noema> Once upon\n(stopped)\n" in chat.shown
    assert "! the model is unreachable\n" in chat.shown
    assert "* senses are off\n" in chat.shown


async def test_a_notice_at_the_prompt_is_printed_on_its_own_line_and_the_prompt_comes_back(chat):
    await chat.hear(Idle())
    await chat.hear(Notice(text="a sensor failed"))
    assert chat.shown == "you> \n* a sensor failed\nyou> "


async def test_a_message_from_another_channel_is_shown_with_its_channel(chat):
    await chat.type("from here")
    await chat.hear(
        Said(turn=turn("user", "from here", channel="terminal")),  # ours: already on screen
        Said(turn=turn("user", "from my phone", id=2, channel="telegram", sender="Ana")),
        Said(turn=turn("user", "from the browser", id=3, channel="web")))
    assert "[telegram] Ana: from my phone\n" in chat.shown
    assert "[web] from the browser\n" in chat.shown
    assert "from here" not in chat.shown


async def test_an_approval_is_asked_and_the_next_line_answers_it(chat):
    await chat.hear(CycleStarted(cycle_id=1, origin="person"),
                    ApprovalAsked(approval=3, tool="shell_execute",
                                  arguments='{"command": "rm -r build"}',
                                  reason="runs a command"))
    assert ('* shell_execute needs your approval:\n    {"command": "rm -r build"}\n'
            "  (runs a command)\n  allow it? [y/N] ") in chat.shown
    assert chat.client.asking is not None

    await chat.type("y")
    assert chat.connection.of(Answer) == [Answer(approval=3, allow=True)]
    assert chat.connection.of(Say) == []  # the answer is not a message
    await chat.hear(ApprovalSettled(approval=3, allowed=True, by="chat"))
    assert chat.client.asking is None
    assert "settled" not in chat.shown  # we answered it ourselves

    await chat.hear(ApprovalAsked(approval=4, tool="shell_execute", arguments="{}", reason=""))
    await chat.type("whatever")
    assert chat.connection.of(Answer)[-1] == Answer(approval=4, allow=False)


async def test_an_approval_shows_a_long_command_whole_and_its_hidden_characters(chat):
    command = "command: echo " + "a" * 900 + " && r\u200bm -rf ~/\u202etxt.exe"
    await chat.hear(CycleStarted(cycle_id=1, origin="person"),
                    ApprovalAsked(approval=7, tool="shell_execute", arguments=command,
                                  reason="the autonomy level of shell_execute is 'ask'"))
    assert "a" * 900 + " && r⟨U+200B⟩m -rf ~/⟨U+202E⟩txt.exe" in chat.shown
    assert "\u200b" not in chat.shown and "\u202e" not in chat.shown
    assert "invisible or direction-changing characters" in chat.shown


async def test_an_approval_settled_elsewhere_closes_the_question(chat):
    await chat.hear(CycleStarted(cycle_id=1, origin="person"),
                    ApprovalAsked(approval=5, tool="file_write", arguments="{}", reason=""),
                    ApprovalAsked(approval=6, tool="shell_execute", arguments="{}", reason=""))
    assert chat.shown.count("needs your approval") == 1  # one question at a time
    await chat.hear(ApprovalSettled(approval=5, allowed=True, by="web"))
    assert "(the question was settled by web: allowed)" in chat.shown
    assert "shell_execute needs your approval" in chat.shown  # the next one is asked now
    await chat.hear(ApprovalSettled(approval=6, allowed=False, by="timeout"))
    assert chat.client.asking is None
    await chat.type("carry on")
    assert chat.connection.of(Answer) == []
    assert [s.text for s in chat.connection.of(Say)] == ["carry on"]


async def test_a_refused_message_is_said_and_nothing_starts():
    def full_disk(message):
        if isinstance(message, Say):
            return [Done(request=message.request, ok=False,
                         error="the disk holding /x is full (12 bytes free); nothing was lost")]
        return answer_requests(message)

    chat = Chat(FakeConnection(full_disk))
    try:
        await chat.type("hello")
        assert "! your message was not taken: the disk holding /x is full" in chat.shown
        assert not chat.client.busy
        assert chat.shown.endswith("you> ")
    finally:
        await chat.close()


@pytest.mark.parametrize("interrupted", [False, True])
async def test_a_message_while_busy_is_noted_unless_it_interrupted(interrupted):
    def agent(message):
        replies = answer_requests(message)
        if isinstance(message, Say) and interrupted:
            replies.insert(0, Decided(kind="SafeCancel", detail="a message from the person"))
        return replies

    chat = Chat(FakeConnection(agent))
    try:
        await chat.hear(CycleStarted(cycle_id=1, origin="person"))
        await chat.type("and another thing")
        noted = "(noted: the agent reads it when the current cycle ends)" in chat.shown
        assert noted is not interrupted
    finally:
        await chat.close()


async def test_a_retry_is_announced_and_counted_down_on_the_bar():
    now = [1000.0]
    bar = StatusBar(agent="ana", clock=lambda: now[0])
    chat = Chat(FakeConnection(), bar=bar)
    try:
        await chat.hear(CycleStarted(cycle_id=1, origin="person"),
                        RetryWaiting(retry=2, of=4, seconds=7.5, until=1007.5,
                                     line="the provider asked to wait 7.5 s; retry 2 of 4"))
        assert "* the provider asked to wait 7.5 s; retry 2 of 4\n" in chat.shown
        assert "retry 2 of 4 in 8 s" in bar.text()
        now[0] = 1005.2
        assert "retry 2 of 4 in 3 s" in bar.text()
        await chat.hear(TextDelta(delta="Here it is."))
        assert "retry" not in bar.text()  # the answer came: the wait is over
    finally:
        await chat.close()


async def test_the_bar_follows_the_agent_without_polling():
    bar = StatusBar(agent="ana")
    chat = Chat(FakeConnection(), bar=bar)
    try:
        await chat.hear(CycleStarted(cycle_id=1, origin="person"))
        assert "running" in bar.text()
        assert chat.connection.of(AskStatus) == []  # nothing asked while it works
        await chat.hear(CycleEnded(cycle_id=1, outcome="done"), Idle())
        await chat.connection.sent_one(AskStatus)  # idle again: one fresh snapshot
        await chat.hear(Notice(text="flush"))  # the status reply was shown before this
        assert bar.text() == "ana · context 12.3k/32.8k (38%) · idle"
        assert len(chat.connection.of(AskStatus)) == 1
    finally:
        await chat.close()


async def test_news_of_memory_refreshes_the_bar_and_other_notices_do_not():
    bar = StatusBar(agent="ana")
    chat = Chat(FakeConnection(), bar=bar)
    try:
        await chat.hear(Notice(text="the clock sensor failed"))
        assert chat.connection.of(AskStatus) == []
        await chat.hear(Notice(text="memory: writing a save point of turns 1–24 in the "
                                    "background; the conversation goes on", about="memory"))
        await chat.connection.sent_one(AskStatus)
        assert "* memory: writing a save point of turns 1–24" in chat.shown
    finally:
        await chat.close()


async def test_when_the_agent_leaves_the_chat_ends(chat):
    await chat.hear(Goodbye(reason="the agent is stopping"))
    chat.connection.end()
    await asyncio.wait_for(chat.client.closed.wait(), 10)
    assert "* the agent is leaving: the agent is stopping" in chat.shown
    assert await chat.type("anyone?") is False
