"""Reading what the person types: a prompt_toolkit prompt at a terminal, or
plain lines from a pipe.

At a terminal: line editing, a history kept across runs (a file only the
owner reads), Enter sends and Alt-Enter (or Esc, Enter) starts a new line
(a pasted text keeps its lines), Ctrl-C stops a reply, Ctrl-D leaves. The
bottom bar shows the context use, the phase, the waiting events and a
retry's countdown; what the agent says while the person types is printed
above the prompt, and the answer's unfinished block is shown live just
above it.

From a pipe (or a dumb terminal): one line at a time, the same commands,
SIGINT for Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import patch_stdout

from .client import ChatClient
from .screen import ANSWER, PROMPT, RichScreen
from .status_line import StatusBar

LIVE_LINES = 8  # lines of the unfinished answer block shown above the prompt
QUIT_WINDOW = 2.0  # seconds within which a second Ctrl-C at an idle prompt leaves
LEAVE_HINT = "(press Ctrl-C again, Ctrl-D or type /quit to leave)"


def plain_terminal(stdin: TextIO, stdout: TextIO, environ: dict[str, str] | None = None) -> bool:
    """Whether the chat should use plain lines: not a terminal, or a dumb one."""
    environ = os.environ if environ is None else environ
    term = environ.get("TERM", "")
    if term.lower() in {"", "dumb", "unknown"}:
        return True
    return not (is_terminal(stdin) and is_terminal(stdout))


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is a terminal (a closed or unusual stream is not)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def history_file(path: Path) -> FileHistory:
    """The chat's history in `path`, readable by its owner only (what the
    person types may be private)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a file made before, by hand, is narrowed too
    finally:
        os.close(fd)
    return FileHistory(str(path))


# -- at a terminal -------------------------------------------------------------


def key_bindings(client: ChatClient, leave_hint: Callable[[], None],
                 clock: Callable[[], float]) -> KeyBindings:
    """Enter sends (prompt_toolkit's default); these add the rest."""
    bindings = KeyBindings()
    last_interrupt = [float("-inf")]

    @bindings.add("escape", "enter")  # Alt-Enter arrives as Esc then Enter
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        if client.busy:
            event.app.create_background_task(_quietly(client.stop()))
            return
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
            return
        now = clock()
        if now - last_interrupt[0] < QUIT_WINDOW:
            event.app.exit(exception=EOFError())
        else:
            leave_hint()
        last_interrupt[0] = now

    return bindings


async def _quietly(stopping) -> None:
    with contextlib.suppress(ConnectionError, TimeoutError):
        await stopping


def prompt_message(client: ChatClient, screen: RichScreen) -> Callable[[], FormattedText]:
    """What stands before the cursor: the answer's unfinished block, then
    `you> ` or the approval question."""

    def message() -> FormattedText:
        parts: list[tuple[str, str]] = []
        live = screen.pending
        if live:
            parts.append(("", live_tail(ANSWER + live, _columns()) + "\n"))
        if client.asking is not None:
            parts.append(("bold ansiyellow", "allow it? [y/N] "))
        else:
            parts.append(("bold", PROMPT))
        return FormattedText(parts)

    return message


def live_tail(text: str, columns: int, rows: int = LIVE_LINES) -> str:
    """The end of `text` that fits in `rows` rows of `columns` characters: a
    long paragraph still being written must not push the prompt off the screen."""
    lines = text.splitlines()[-rows:]
    kept: list[str] = []
    left = rows
    for line in reversed(lines):
        height = max(1, -(-len(line) // max(columns, 1)))
        if height > left:
            room = left * columns - 1
            if room > 0:
                kept.append("…" + line[len(line) - room:])
            break
        kept.append(line)
        left -= height
    return "\n".join(reversed(kept))


def _columns() -> int:
    try:
        return get_app().output.get_size().columns
    except Exception:  # no running application: a sensible width
        return 80


def make_session(client: ChatClient, screen: RichScreen, bar: StatusBar, *,
                 history: History | None = None, input: Input | None = None,
                 output: Output | None = None,
                 clock: Callable[[], float] | None = None) -> PromptSession[str]:
    """The prompt for this chat (`input`/`output` are for tests)."""
    clock = clock or time.monotonic

    def leave_hint() -> None:
        screen.line(LEAVE_HINT, "note")

    session: PromptSession[str] = PromptSession(
        message=prompt_message(client, screen),
        history=history if history is not None else InMemoryHistory(),
        key_bindings=key_bindings(client, leave_hint, clock),
        bottom_toolbar=bar.text,
        multiline=False,
        enable_open_in_editor=False,
        input=input, output=output,
    )
    return session


async def run_prompt(client: ChatClient, session: PromptSession[str], bar: StatusBar, *,
                     patch: bool = True, catch_interrupt: bool = True) -> None:
    """Read lines at the prompt until the person leaves or the agent goes."""
    app = session.app

    def redraw() -> None:
        if app.is_running:
            app.invalidate()

    countdown = Countdown(bar, redraw)
    bar.on_change(countdown.changed)
    ticker = asyncio.create_task(countdown.run())
    closed = asyncio.create_task(client.closed.wait())
    loop = asyncio.get_running_loop()
    # At the prompt Ctrl-C is a key (the terminal is raw); a SIGINT from
    # elsewhere, or between two prompts, stops a reply the same way.
    if catch_interrupt:
        loop.add_signal_handler(signal.SIGINT, lambda: client.busy and loop.create_task(
            _quietly(client.stop())))
    try:
        with patch_stdout(raw=True) if patch else contextlib.nullcontext():
            while not client.closed.is_set():
                reading = asyncio.create_task(session.prompt_async(handle_sigint=False))
                await asyncio.wait({reading, closed}, return_when=asyncio.FIRST_COMPLETED)
                if not reading.done():  # the agent went away while the person typed
                    if app.is_running:
                        app.exit(exception=EOFError())
                    with contextlib.suppress(EOFError, KeyboardInterrupt,
                                             asyncio.CancelledError):
                        await reading
                    return
                try:
                    text = reading.result()
                except EOFError:
                    return
                except KeyboardInterrupt:
                    continue
                if not await client.take_line(text):
                    return
    finally:
        if catch_interrupt:
            loop.remove_signal_handler(signal.SIGINT)
        for task in (ticker, closed):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class Countdown:
    """Redraws the bar once a second while a retry's countdown runs, and
    sleeps otherwise.

    Woken only by a change that starts a countdown: the countdown reaching
    zero while the retry itself is still under way (a slow next attempt)
    leaves the retry shown, and must not wake it again, or the loop would
    run without ever yielding to the event loop.
    """

    def __init__(self, bar: StatusBar, redraw: Callable[[], None], *,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._bar = bar
        self._redraw = redraw
        self._sleep = sleep
        self._wake = asyncio.Event()

    def changed(self) -> None:
        """What the bar shows may have changed: redraw it, and count down if a retry waits."""
        if self._bar.counting_down:
            self._wake.set()
        self._redraw()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._bar.counting_down:
                await self._sleep(self._to_next_second())
                self._redraw()
            self._redraw()  # the end of the wait shows, however late the loop woke

    def _to_next_second(self) -> float:
        # The bar rounds the seconds left up: it changes when they cross a whole number.
        retry = self._bar.retry
        left = retry.until - self._bar.clock() if retry is not None else 1.0
        return (left - math.floor(left)) or 1.0


# -- from a pipe -------------------------------------------------------------------


def _start_reader(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[str | None],
                  source: TextIO) -> None:
    # A daemon thread: a blocked readline never keeps the process alive.
    def read() -> None:
        while True:
            try:
                line = source.readline()
            except (OSError, ValueError):
                line = ""
            try:
                loop.call_soon_threadsafe(lines.put_nowait, line if line else None)
            except RuntimeError:  # the chat is over and its loop closed
                return
            if not line:
                return

    threading.Thread(target=read, name="stdin", daemon=True).start()


async def run_lines(client: ChatClient, source: TextIO = sys.stdin, *,
                    hint: Callable[[str], None], catch_interrupt: bool = True,
                    one_at_a_time: bool = False) -> None:
    """Read plain lines until end of input, `/quit`, or the agent goes.

    Ctrl-C (SIGINT) stops the reply while the agent works; at an idle
    prompt, twice within two seconds leaves. With `one_at_a_time` (lines
    from a file or a script, not a person typing), each line waits until
    the agent has answered the one before, and the end of input until the
    last answer is given: a person's new message interrupts a reply, a
    script's next line should not.
    """
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    _start_reader(loop, lines, source)
    last_interrupt = [float("-inf")]

    def on_interrupt() -> None:
        if client.busy:
            loop.create_task(_quietly(client.stop()))
            return
        now = loop.time()
        if now - last_interrupt[0] < QUIT_WINDOW:
            lines.put_nowait(None)
        else:
            hint("\n" + LEAVE_HINT)
        last_interrupt[0] = now

    if catch_interrupt:
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    closed = asyncio.create_task(client.closed.wait())
    try:
        while True:
            if one_at_a_time:
                await client.settled()
                if client.closed.is_set():
                    return
            getting = asyncio.create_task(lines.get())
            await asyncio.wait({getting, closed}, return_when=asyncio.FIRST_COMPLETED)
            if not getting.done():
                getting.cancel()
                return
            line = getting.result()
            if line is None or not await client.take_line(line.rstrip("\n")):
                return
    finally:
        closed.cancel()
        if catch_interrupt:
            loop.remove_signal_handler(signal.SIGINT)
