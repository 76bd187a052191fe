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
import select
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application, get_app
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output, create_output
from prompt_toolkit.patch_stdout import patch_stdout

from .answers import Prompts
from .client import ChatClient, one_line
from .lines import StreamLines
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


class PromptRounds:
    """The prompts read under prompt_toolkit, numbered: a line's input
    position is the number of the prompt it was entered at (see
    `answers.py`).

    A prompt asks the question shown when it is drawn only if, at that
    drawing, nothing typed before was waiting: no text being edited, no keys
    read but not handled, nothing in the terminal's input. Otherwise it stays
    a prompt for messages (the person was typing one) and the question is
    asked at the next one. A prompt waiting empty when a question comes (or
    goes) becomes a new prompt in place, numbered anew and judged at its next
    drawing the same way; one being typed into stays what it is.
    """

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.number = 0
        self.asks: int | None = None  # the question the prompt on the screen asks
        self.app: Application[str] | None = None
        self._intended: int | None = None
        self._checked = True

    def begin(self) -> None:
        """A new prompt is about to be read."""
        asked = self.client.asking
        self._renumber(asked.approval if asked is not None else None)

    def _renumber(self, question: int | None) -> None:
        self.number += 1
        self._intended = self.asks = question
        self._checked = False
        # For messages until a drawing shows nobody had typed ahead.
        self.client.prompts.drawn(None, self.number)

    def rendered(self, app: Application[str]) -> None:
        """The prompt was drawn (prompt_toolkit's after_render): the first
        time since it was numbered, decide what it asks."""
        if self._checked:
            return
        self._checked = True
        asked = self.client.asking
        wanted = asked.approval if asked is not None else None
        if typed_ahead(app):
            if self.asks is not None:
                self.asks = None
                app.invalidate()
            return
        if wanted != self._intended:  # it changed as this prompt was drawn
            self._renumber(wanted)
            app.invalidate()
            return
        if wanted is not None:
            self.client.prompts.drawn(wanted, self.number)

    def prompt_changed(self, prompts: Prompts, question: int | None) -> None:
        """The chat shows `question` (or takes messages again)."""
        app = self.app
        if question == self.asks or app is None or not self._checked:
            return  # not drawn yet: its drawing sees the change
        if app.is_running and not app.is_done and not app.current_buffer.text:
            self._renumber(question)
            app.invalidate()


def typed_ahead(app: Application[str]) -> bool:
    """Whether anything the person typed waits at this moment: text being
    edited, keys read but not handled, bytes in the terminal's input (the
    terminal itself sends nothing there: the prompt asks it no questions)."""
    if app.current_buffer.text or app.is_done or app.key_processor.input_queue:
        return True
    try:
        ready, _, _ = select.select([app.input.fileno()], [], [], 0)
    except (NotImplementedError, OSError, ValueError):  # cannot tell: assume it does
        return True
    return bool(ready)


def prompt_message(rounds: PromptRounds, screen: RichScreen) -> Callable[[], FormattedText]:
    """What stands before the cursor: the answer's unfinished block, then
    `you> ` or the approval question."""

    def message() -> FormattedText:
        parts: list[tuple[str, str]] = []
        live = screen.pending
        if live:
            parts.append(("", live_tail(ANSWER + live, _columns()) + "\n"))
        if rounds.asks is not None:
            # The prompt names what it asks: it is drawn at once, while the
            # question's lines above it may reach the screen a moment later.
            tool = next((a.tool for a in rounds.client.approvals
                         if a.approval == rounds.asks), "it")
            parts.append(("bold ansiyellow", f"allow {one_line(tool, 40)}? [y/N] "))
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

    rounds = PromptRounds(client)
    if output is None:
        output = create_output()
        # No cursor-position requests: the terminal's reply would arrive on
        # the input like typing, and a prompt must see in its input only what
        # the person typed (`typed_ahead`).
        if hasattr(output, "enable_cpr"):
            output.enable_cpr = False
    session: PromptSession[str] = PromptSession(
        message=prompt_message(rounds, screen),
        history=history if history is not None else InMemoryHistory(),
        key_bindings=key_bindings(client, leave_hint, clock),
        bottom_toolbar=bar.text,
        multiline=False,
        enable_open_in_editor=False,
        input=input, output=output,
    )
    rounds.app = session.app
    session.app.after_render += rounds.rendered
    client.use_input(rounds)
    return session


async def run_prompt(client: ChatClient, session: PromptSession[str], bar: StatusBar, *,
                     patch: bool = True, catch_interrupt: bool = True) -> None:
    """Read lines at the prompt until the person leaves or the agent goes.
    `session` is the client's (`make_session`)."""
    app = session.app
    rounds = client.input
    assert isinstance(rounds, PromptRounds), "run_prompt reads the session make_session made"

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
                rounds.begin()
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
                if not await client.take_line(text, at=rounds.number):
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


async def run_lines(client: ChatClient, source: StreamLines, *,
                    hint: Callable[[str], None], catch_interrupt: bool = True,
                    one_at_a_time: bool = False) -> None:
    """Read plain lines until end of input, `/quit`, or the agent goes.

    Ctrl-C (SIGINT) stops the reply while the agent works; at an idle
    prompt, twice within two seconds leaves. With `one_at_a_time` (lines
    from a file or a script, not a person typing), each line waits until
    the agent has answered the one before, and the end of input until the
    last answer is given: a person's new message interrupts a reply, a
    script's next line should not. `source` is the client's input side
    (`client.use_input`), started.
    """
    loop = asyncio.get_running_loop()
    lines = source.lines
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
            if line is None or not await client.take_line(line.text, at=line.at):
                return
    finally:
        closed.cancel()
        if catch_interrupt:
            loop.remove_signal_handler(signal.SIGINT)
