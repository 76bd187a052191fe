"""The real prompt_toolkit prompt, driven through a pipe: line editing,
multi-line input, the history file, and the keys that reach the agent."""

from __future__ import annotations

import asyncio
import contextlib
import io
import stat

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from noema.interfaces.host.protocol import ApprovalSettled, CycleStarted, Say, Stop
from noema.interfaces.terminal.client import ChatClient
from noema.interfaces.terminal.input import history_file, make_session, run_prompt
from noema.interfaces.terminal.screen import RichScreen
from noema.interfaces.terminal.status_line import StatusBar

from .fakes import FakeConnection

LEFT, UP, ENTER, ALT_ENTER, CTRL_C, CTRL_D = "\x1b[D", "\x1b[A", "\r", "\x1b\r", "\x03", "\x04"


@pytest.fixture
def pipe():
    with create_pipe_input() as pipe_input:
        yield pipe_input


def chat_parts(connection: FakeConnection):
    out = io.StringIO()
    screen = RichScreen(Console(file=out, width=60, color_system=None))
    bar = StatusBar(agent="ana")
    client = ChatClient(connection, screen, bar=bar)
    return client, screen, bar, out


async def test_line_editing_multi_line_input_and_a_history_that_outlives_the_chat(tmp_path, pipe):
    client, screen, bar, _ = chat_parts(FakeConnection())
    path = tmp_path / "chat_history"
    session = make_session(client, screen, bar, history=history_file(path), input=pipe,
                           output=DummyOutput())
    pipe.send_text("helo" + LEFT + "l" + ENTER)
    assert await asyncio.wait_for(session.prompt_async(), 10) == "hello"
    pipe.send_text("first line" + ALT_ENTER + "second line" + ENTER)
    assert await asyncio.wait_for(session.prompt_async(), 10) == "first line\nsecond line"

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = path.read_text()
    assert "+hello" in saved and "+first line\n+second line" in saved

    # The next chat finds them: Up walks back through what was typed before.
    with create_pipe_input() as later:
        again = make_session(client, screen, bar, history=history_file(path), input=later,
                             output=DummyOutput())
        later.send_text(UP + ENTER)
        assert await asyncio.wait_for(again.prompt_async(), 10) == "first line\nsecond line"
        # In a recalled multi-line entry Up first climbs its lines, then the history.
        later.send_text(UP + UP + UP + UP + ENTER)
        assert await asyncio.wait_for(again.prompt_async(), 10) == "hello"


def test_a_history_file_made_by_hand_is_narrowed_to_its_owner(tmp_path):
    path = tmp_path / "chat_history"
    path.write_text("")
    path.chmod(0o644)
    history_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_typed_lines_reach_the_agent_and_quit_leaves(pipe):
    connection = FakeConnection()
    client, screen, bar, _ = chat_parts(connection)
    pump = asyncio.create_task(client.pump(connection.messages()))
    session = make_session(client, screen, bar, input=pipe, output=DummyOutput())
    pipe.send_text("hello" + ENTER + "/quit" + ENTER)
    await asyncio.wait_for(run_prompt(client, session, bar, patch=False, catch_interrupt=False),
                           10)
    assert [s.text for s in connection.of(Say)] == ["hello"]
    await connection.aclose()
    await pump


async def test_ctrl_c_stops_a_reply_and_ctrl_d_leaves(pipe):
    connection = FakeConnection()
    client, screen, bar, out = chat_parts(connection)
    pump = asyncio.create_task(client.pump(connection.messages()))
    client.handle(CycleStarted(cycle_id=1, origin="person"))
    session = make_session(client, screen, bar, input=pipe, output=DummyOutput())
    running = asyncio.create_task(
        run_prompt(client, session, bar, patch=False, catch_interrupt=False))
    pipe.send_text(CTRL_C)
    await connection.sent_one(Stop)
    assert not running.done()  # Ctrl-C while the agent works never leaves
    client.busy = False
    pipe.send_text(CTRL_C)  # idle: the first one only says how to leave
    pipe.send_text(CTRL_D)
    await asyncio.wait_for(running, 10)
    assert "press Ctrl-C again, Ctrl-D or type /quit to leave" in out.getvalue()
    await connection.aclose()
    await pump


async def test_the_prompt_leaves_when_the_agent_goes(pipe):
    connection = FakeConnection()
    client, screen, bar, _ = chat_parts(connection)
    pump = asyncio.create_task(client.pump(connection.messages()))
    session = make_session(client, screen, bar, input=pipe, output=DummyOutput())
    running = asyncio.create_task(
        run_prompt(client, session, bar, patch=False, catch_interrupt=False))
    pipe.send_text("half a thou")  # typing, not sent
    connection.end()
    await asyncio.wait_for(running, 10)
    assert connection.of(Say) == []
    await pump


async def test_the_prompt_asks_the_approval_question_and_shows_the_answer_being_written(pipe):
    from noema.interfaces.host.protocol import ApprovalAsked, TextDelta
    from noema.interfaces.terminal.input import PromptRounds, prompt_message

    client, screen, bar, _ = chat_parts(FakeConnection())
    rounds = PromptRounds(client)
    client.use_input(rounds)
    message = prompt_message(rounds, screen)
    assert "".join(text for _, text in message()) == "you> "
    client.handle(TextDelta(delta="Half a para"))
    assert "".join(text for _, text in message()) == "noema> Half a para\nyou> "
    client.handle(ApprovalAsked(approval=1, tool="shell_execute", arguments="{}", reason=""))
    assert "an approval waits for your answer" in bar.text()
    rounds.begin()  # the next prompt is the question's
    assert "".join(text for _, text in message()).endswith("allow shell_execute? [y/N] ")


def test_a_long_answer_being_written_keeps_to_a_few_rows_above_the_prompt():
    from noema.interfaces.terminal.input import live_tail

    assert live_tail("short\nlines", 40) == "short\nlines"
    tail = live_tail("blah " * 3000, 40, rows=8)
    assert len(tail) == 8 * 40 - 1 + 1 and tail.startswith("…") and tail.endswith("blah ")
    lines = "\n".join(f"line {i}" for i in range(20))
    assert live_tail(lines, 40, rows=3) == "line 17\nline 18\nline 19"
    assert live_tail("a\n" + "x" * 100, 40, rows=3) == "x" * 100  # three rows: just fits


async def _until(condition, what: str) -> None:
    async def wait() -> None:
        while not condition():
            await asyncio.sleep(0.01)
    try:
        await asyncio.wait_for(wait(), 10)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


async def test_a_line_typed_before_the_question_is_drawn_is_a_message_at_the_prompt(pipe):
    from noema.interfaces.host.protocol import Answer, ApprovalAsked

    connection = FakeConnection()
    client, screen, bar, out = chat_parts(connection)
    pump = asyncio.create_task(client.pump(connection.messages()))
    client.handle(CycleStarted(cycle_id=1, origin="person"))
    session = make_session(client, screen, bar, input=pipe, output=DummyOutput())
    running = asyncio.create_task(
        run_prompt(client, session, bar, patch=False, catch_interrupt=False))
    rounds = client.input

    # Being typed when the question comes: the prompt stays for messages.
    pipe.send_text("yes")
    await _until(lambda: session.app.current_buffer.text == "yes", "the text is being edited")
    client.handle(ApprovalAsked(approval=1, tool="shell_execute", arguments="{}", reason=""))
    pipe.send_text(ENTER)
    await _until(lambda: connection.of(Say), "the line is sent")
    assert [s.text for s in connection.of(Say)] == ["yes"] and connection.of(Answer) == []
    assert "was typed before the question was shown" in out.getvalue()

    # Keys already in the terminal's input when the question's prompt is
    # drawn were typed before it: a message too.
    await _until(lambda: rounds.asks == 1, "the next prompt asks")
    client.handle(ApprovalAsked(approval=2, tool="file_write", arguments="{}", reason=""))
    pipe.send_text("y" + ENTER)  # in the input before the prompt can read it
    client.handle(ApprovalSettled(approval=1, allowed=False, by="web"))  # 2 is drawn now
    await _until(lambda: len(connection.of(Say)) == 2, "the typed-ahead line is sent")
    assert connection.of(Say)[-1].text == "y" and connection.of(Answer) == []

    # Typed at the question's own prompt, once drawn: the answer, to that question.
    await _until(lambda: rounds.asks == 2, "the prompt asks question 2")
    pipe.send_text("y" + ENTER)
    await connection.sent_one(Answer)
    assert connection.of(Answer) == [Answer(approval=2, allow=True)]
    assert len(connection.of(Say)) == 2

    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    await connection.aclose()
    await pump
