"""An answer counts only when the person gave it to a question they could see.

The chat's logic, driven as the person and the agent interleave: lines typed
(their Enter pressed) and taken later, questions asked, answered elsewhere,
cut short by `/stop` or an urgent event. A line entered before a question was
drawn is a message, never its answer; every message the person typed is sent
exactly once; an answer names the question it was given at.
"""

from __future__ import annotations

import asyncio
import io
from collections import Counter, deque
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.interfaces.host.protocol import (
    Answer,
    ApprovalAsked,
    ApprovalSettled,
    AskStatus,
    ClientMessage,
    CycleEnded,
    CycleStarted,
    Decided,
    Done,
    Say,
    ServerMessage,
    Status,
    Stop,
)
from noema.interfaces.terminal.answers import (
    NO,
    YES,
    Command,
    Message,
    Nothing,
    Prompt,
    Prompts,
    Reply,
    read_line,
)
from noema.interfaces.terminal.client import ChatClient
from noema.interfaces.terminal.screen import PlainScreen

from .fakes import FakeConnection, Typist, status_view

# -- the pure part ---------------------------------------------------------------


def test_a_line_belongs_to_the_last_prompt_drawn_before_it_was_entered():
    prompts = Prompts()
    prompts.drawn(5, 10)
    assert prompts.at(9) == Prompt(None, 0)  # Enter pressed before question 5 was drawn
    assert prompts.at(10) == Prompt(5, 10)
    prompts.drawn(None, 14)  # settled: a prompt for messages again
    prompts.drawn(6, 20)
    assert prompts.at(12) == Prompt(5, 10)  # entered at 5's prompt, taken after 6 came
    assert prompts.at(15) == Prompt(None, 14)
    assert prompts.at(21) == Prompt(6, 20)
    with pytest.raises(ValueError):
        prompts.drawn(7, 3)


def test_a_prompt_first_drawn_for_messages_may_then_ask():
    prompts = Prompts()
    prompts.drawn(None, 4)
    prompts.drawn(8, 4)  # the same prompt, found clean: it asks
    assert prompts.at(4) == Prompt(8, 4)


def test_what_a_line_is_at_each_kind_of_prompt():
    message, question = Prompt(None, 0), Prompt(3, 0)
    assert read_line("yes", message) == Message("yes")
    assert read_line("  hello ", message) == Message("hello")
    assert read_line("  ", message) == Nothing()
    assert read_line("/stop", message) == Command("/stop")
    assert read_line(" Sí ", question) == Reply(3, True)
    assert read_line("", question) == Reply(3, False)
    assert read_line("no", question) == Reply(3, False)
    assert read_line("/status", question) == Command("/status")
    assert read_line("wait, use rm -i", question) == Reply(3, False, words="wait, use rm -i")


# -- the chat, against a host that asks, settles and cancels -----------------------


class Host:
    """What the agent's host does with the chat's requests: a `Say` is
    stored, an `Answer` to an open question settles it, a `Stop` cancels the
    cycle (its open questions are settled as stopped)."""

    def __init__(self) -> None:
        self.open: deque[int] = deque()
        self.stored: list[str] = []
        self.answered: list[tuple[int, bool]] = []
        self.numbers = iter(range(1, 10_000))

    def reply(self, message: ClientMessage) -> list[ServerMessage]:
        if isinstance(message, Say):
            self.stored.append(message.text)
            return [Done(request=message.request, turn_id=len(self.stored))]
        if isinstance(message, Answer):
            if message.approval in self.open:
                self.answered.append((message.approval, message.allow))
                return self.settle(message.approval, message.allow, "chat")
            return []
        if isinstance(message, Stop):
            return [Done(request=message.request), *self.cancel("stopped")]
        if isinstance(message, AskStatus):
            return [Status(request=message.request, status=status_view())]
        return [Done(request=message.request)]  # type: ignore[union-attr]

    def settle(self, number: int, allowed: bool, by: str) -> list[ServerMessage]:
        self.open.remove(number)
        return [ApprovalSettled(approval=number, allowed=allowed, by=by)]

    def cancel(self, outcome: str) -> list[ServerMessage]:
        settled = [m for n in list(self.open) for m in self.settle(n, False, "stopped")]
        return [*settled, CycleEnded(cycle_id=1, outcome=outcome), CycleStarted(
            cycle_id=2, origin="event")]

    def ask(self) -> ApprovalAsked:
        number = next(self.numbers)
        self.open.append(number)
        return ApprovalAsked(approval=number, tool="shell_execute", arguments="{}", reason="")


@dataclass
class Entered:
    text: str
    at: int
    shown: int | None  # the question on the screen when Enter was pressed (None: messages)


@dataclass
class Person:
    """What the person saw and did, kept by the test, apart from the chat."""

    typist: Typist = field(default_factory=Typist)
    waiting: deque[Entered] = field(default_factory=deque)
    entered: list[Entered] = field(default_factory=list)
    taken_while_open: list[tuple[Entered, bool]] = field(default_factory=list)


LINES = ["yes", "y", "sí", "no", "n", "", "hello", "do it", "stop that", "/stop", "/status"]

Step = tuple[str, str]  # (what happens, the line typed when it is "type")
steps = st.lists(st.one_of(
    st.tuples(st.just("type"), st.sampled_from(LINES)),
    st.tuples(st.sampled_from(["take", "take", "ask", "elsewhere", "urgent"]), st.just(""))),
    max_size=40)


async def play(script: list[Step]) -> tuple[Host, Person, list[ClientMessage]]:
    host = Host()
    connection = FakeConnection(host.reply)
    client = ChatClient(connection, PlainScreen(io.StringIO()))
    person = Person()
    client.use_input(person.typist)
    pump = asyncio.create_task(client.pump(connection.messages()))
    client.handle(CycleStarted(cycle_id=1, origin="person"))

    async def settle_down() -> None:  # the chat has read everything the host said
        for _ in range(20):
            await asyncio.sleep(0)

    def shown() -> int | None:
        return client.asking.approval if client.asking is not None else None

    async def take() -> None:
        line = person.waiting.popleft()
        still_open = line.shown is not None and line.shown in host.open
        person.taken_while_open.append((line, still_open))
        assert await client.take_line(line.text, at=line.at)
        await settle_down()

    for what, text in script:
        if what == "type":
            line = Entered(text, person.typist.enter(), shown())
            person.waiting.append(line)
            person.entered.append(line)
        elif what == "take" and person.waiting:
            await take()
        elif what == "ask":
            client.handle(host.ask())
        elif what == "elsewhere" and host.open:
            for message in host.settle(host.open[0], True, "web"):
                client.handle(message)
        elif what == "urgent":
            client.handle(Decided(kind="UnsafeCancel"))
            for message in host.cancel("cancelled_unsafe"):
                client.handle(message)
        await settle_down()
    while person.waiting:
        await take()
    await connection.aclose()
    await pump
    return host, person, connection.sent


def run(script: list[Step]) -> tuple[Host, Person, list[ClientMessage]]:
    return asyncio.run(play(script))


def is_command(text: str) -> bool:
    return text.strip().startswith("/")


@given(steps)
def test_no_line_entered_before_a_question_was_drawn_answers_it(script):
    host, person, sent = run(script)
    answers = [m for m in sent if isinstance(m, Answer)]
    # Each answer comes from a line entered while that very question was on
    # the screen; none from a line entered before it was drawn.
    expected = [(line.shown, line.text.strip().lower() in YES)
                for line, still_open in person.taken_while_open
                if line.shown is not None and still_open and not is_command(line.text)]
    assert [(a.approval, a.allow) for a in answers] == expected
    for answer in answers:
        drawn = [line for line in person.entered if line.shown == answer.approval]
        assert drawn, f"approval {answer.approval} answered by no line typed at its prompt"


@given(steps)
def test_every_message_the_person_typed_is_stored_exactly_once(script):
    host, person, sent = run(script)
    # Typed at a prompt for messages: a message, whatever its words ("yes"
    # included). Typed at a question's prompt: an answer, and words that
    # are neither yes nor no are a message as well.
    expected = Counter(
        line.text.strip() for line in person.entered
        if line.text.strip() and not is_command(line.text)
        and (line.shown is None or line.text.strip().lower() not in YES | NO))
    assert Counter(host.stored) == expected
    # A command is a command at any prompt: never a message, never an answer.
    for word, kind in (("/stop", Stop), ("/status", AskStatus)):
        typed = [line for line in person.entered if line.text == word]
        assert len([m for m in sent if isinstance(m, kind)]) == len(typed)


async def test_yes_typed_as_a_message_just_before_a_question_is_stored_and_answers_nothing():
    host, person, sent = await play([
        ("type", "yes"), ("ask", ""), ("take", ""),  # Enter pressed, then the question drawn
        ("type", "n"), ("take", "")])  # typed at the question's own prompt
    assert host.stored == ["yes"]
    assert [(a.approval, a.allow) for a in sent if isinstance(a, Answer)] == [(1, False)]


async def test_an_answer_given_to_a_question_settled_meanwhile_is_not_used_for_the_next():
    host, person, sent = await play([
        ("ask", ""), ("ask", ""), ("type", "y"),  # typed at question 1's prompt
        ("elsewhere", ""),  # 1 settled on the page; 2 is drawn
        ("take", "")])
    assert [a for a in sent if isinstance(a, Answer)] == []
    assert host.open == deque([2]) and host.stored == []


# -- lines from a real pipe: where the input stood when a prompt was drawn -------------


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.just("draw"), st.text(alphabet="ayes /\u00e9", max_size=6)),
                max_size=12))
def test_a_line_written_to_the_pipe_before_a_prompt_is_drawn_ends_before_it(steps):
    import os

    from noema.interfaces.terminal.lines import StreamLines

    async def scenario() -> None:
        read_end, write_end = os.pipe()
        source = os.fdopen(read_end, "r", encoding="utf-8")
        lines = StreamLines(source, asyncio.get_running_loop())
        prompts = Prompts()
        lines.start()
        written: list[tuple[str, int]] = []  # each line and the prompts drawn before it
        draws = 0
        try:
            for step in steps:
                if step == "draw":
                    draws += 1
                    lines.prompt_changed(prompts, draws)
                    await asyncio.sleep(0)  # the reader may or may not have read yet
                else:
                    os.write(write_end, (step + "\n").encode())
                    written.append((step, draws))
            os.close(write_end)
            write_end = -1
            for text, drawn_before in written:
                line = await asyncio.wait_for(lines.lines.get(), 10)
                assert line is not None and line.text == text
                # Entered at the last prompt drawn before it was written, never a later one.
                assert prompts.at(line.at).question == (drawn_before or None)
            assert await asyncio.wait_for(lines.lines.get(), 10) is None
        finally:
            if write_end >= 0:
                os.close(write_end)
            source.close()

    asyncio.run(scenario())
