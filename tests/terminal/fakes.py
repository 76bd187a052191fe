"""A fake attach connection: what a chat sends is recorded, what the agent
says is put in by the test, and requests can be answered by a rule."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from noema.interfaces.terminal.answers import Prompts
from noema.interfaces.host.protocol import (
    AskStatus,
    ClientMessage,
    Done,
    ServerMessage,
    Status,
    StatusView,
)


def status_view(**changes: object) -> StatusView:
    """A status snapshot with plausible values, changed as asked."""
    values: dict[str, object] = dict(
        agent="ana", pid=4242, started_at=0.0, phase="idle", busy=False,
        context_tokens=12_300, context_window=32_768, session_turns=7, waiting_messages=0)
    values.update(changes)
    return StatusView(**values)  # type: ignore[arg-type]


def answer_requests(message: ClientMessage) -> list[ServerMessage]:
    """The default agent: every request is done, every status is idle."""
    if isinstance(message, AskStatus):
        return [Status(request=message.request, status=status_view())]
    request = getattr(message, "request", None)
    return [Done(request=request)] if request is not None else []


class FakeConnection:
    """The `Connection` protocol with nothing behind it but the test."""

    def __init__(self, reply: Callable[[ClientMessage], list[ServerMessage]] = answer_requests
                 ) -> None:
        self.sent: list[ClientMessage] = []
        self.reply = reply
        self.closed = False
        self._inbox: asyncio.Queue[ServerMessage | None] = asyncio.Queue()
        self._sent_event = asyncio.Event()

    def put(self, *messages: ServerMessage) -> None:
        """The agent says these, in order."""
        for message in messages:
            self._inbox.put_nowait(message)

    def end(self) -> None:
        """The agent closes the connection."""
        self._inbox.put_nowait(None)

    async def send(self, message: ClientMessage) -> None:
        if self.closed:
            raise ConnectionError("closed")
        self.sent.append(message)
        self._sent_event.set()
        self.put(*self.reply(message))

    async def messages(self) -> AsyncIterator[ServerMessage]:
        while (message := await self._inbox.get()) is not None:
            yield message

    async def aclose(self) -> None:
        self.closed = True
        self.end()

    async def sent_one(self, kind: type, timeout: float = 10.0) -> ClientMessage:
        """Wait until a message of `kind` was sent; the first one."""
        async def first() -> ClientMessage:
            while True:
                for message in self.sent:
                    if isinstance(message, kind):
                        return message
                self._sent_event.clear()
                await self._sent_event.wait()
        return await asyncio.wait_for(first(), timeout)

    def of(self, kind: type) -> list[ClientMessage]:
        return [m for m in self.sent if isinstance(m, kind)]


class Typist:
    """An input side for the chat's logic in tests: lines are entered in
    order, each after every prompt drawn before it was entered
    (`enter()` gives its position); `early()` gives the position of a line
    whose Enter was pressed before the last prompt was drawn."""

    def __init__(self) -> None:
        self.position = 0

    def enter(self) -> int:
        self.position += 1
        return self.position

    def early(self, prompts: Prompts) -> int:
        return prompts.last.first - 1

    def prompt_changed(self, prompts: Prompts, question: int | None) -> None:
        self.position += 1
        prompts.drawn(question, self.position)
        self.position += 1
