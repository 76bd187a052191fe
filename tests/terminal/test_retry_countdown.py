"""The retry countdown in the bottom bar: it redraws once a second while a
retry waits, and never runs on its own once the wait is over."""

from __future__ import annotations

import asyncio
import io

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from noema.interfaces.host.protocol import CycleStarted, RetryWaiting
from noema.interfaces.terminal.client import ChatClient
from noema.interfaces.terminal.input import Countdown, make_session, run_prompt
from noema.interfaces.terminal.screen import RichScreen
from noema.interfaces.terminal.status_line import StatusBar

from .fakes import FakeConnection

CTRL_D = "\x04"
SPIN = 500  # redraws that only a loop without a wait could reach


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def retry_until(until: float) -> RetryWaiting:
    return RetryWaiting(retry=1, of=4, seconds=2, until=until, line="server error; retry 1 of 4")


async def test_a_retry_whose_next_attempt_is_slow_leaves_the_prompt_working() -> None:
    # The countdown reaches zero while the retry is still shown (its attempt
    # has not answered yet). That must not wake the countdown again: it once
    # woke itself for ever without yielding, freezing the chat at full CPU.
    clock = Clock()
    connection = FakeConnection()
    bar = StatusBar(agent="ana", clock=clock)
    screen = RichScreen(Console(file=io.StringIO(), width=60, color_system=None))
    client = ChatClient(connection, screen, bar=bar)
    pump = asyncio.create_task(client.pump(connection.messages()))
    with create_pipe_input() as pipe:
        session = make_session(client, screen, bar, input=pipe, output=DummyOutput())
        redraws_after_the_wait = 0
        wait_over = asyncio.Event()

        def invalidate() -> None:
            nonlocal redraws_after_the_wait
            if clock.now > 1002:
                redraws_after_the_wait += 1
                wait_over.set()
                if redraws_after_the_wait >= SPIN:
                    raise RuntimeError("the countdown is spinning")

        session.app.invalidate = invalidate  # type: ignore[method-assign]
        running = asyncio.create_task(
            run_prompt(client, session, bar, patch=False, catch_interrupt=False))
        while not session.app.is_running:
            await asyncio.sleep(0.01)
        client.handle(CycleStarted(cycle_id=1, origin="person"))
        client.handle(retry_until(clock.now + 2))
        assert bar.counting_down
        clock.now += 3  # the wait is over; the attempt is still under way
        await asyncio.wait_for(wait_over.wait(), 10)  # the countdown's last redraw
        for _ in range(200):  # let every ready task run, many times over
            await asyncio.sleep(0)

        assert bar.retry is not None and not bar.counting_down
        assert redraws_after_the_wait <= 2
        pipe.send_text(CTRL_D)  # and the prompt still reads what is typed
        await asyncio.wait_for(running, 10)
    await connection.aclose()
    await pump


class Sleeps:
    """Stands in for asyncio.sleep: moves the clock instead of waiting."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.now += seconds
        await asyncio.sleep(0)


async def test_the_countdown_redraws_on_each_whole_second_then_sleeps() -> None:
    clock = Clock()
    bar = StatusBar(clock=clock)
    shown: list[str] = []
    sleeps = Sleeps(clock)
    countdown = Countdown(bar, lambda: shown.append(bar.text()), sleep=sleeps)
    bar.on_change(countdown.changed)
    ticker = asyncio.create_task(countdown.run())
    try:
        bar.retry = retry_until(clock.now + 2.5)
        bar.changed()
        for _ in range(50):
            await asyncio.sleep(0)

        assert sleeps.waits == [0.5, 1.0, 1.0]
        assert [s.rsplit("retry 1 of 4 ", 1)[1] for s in shown] == [
            "in 3 s", "in 2 s", "in 1 s", "now", "now"]

        bar.changed()  # a change while the retry is still shown, at zero: no countdown
        for _ in range(50):
            await asyncio.sleep(0)
        assert sleeps.waits == [0.5, 1.0, 1.0] and len(shown) == 6
    finally:
        ticker.cancel()
