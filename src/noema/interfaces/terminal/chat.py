"""`noema chat`: talk to the agent at a terminal.

The chat attaches to the agent `noema run` keeps running, over its socket;
when none runs, it runs the agent here (and serves the socket too, so
`noema status` and other interfaces can attach) until the person leaves.
Either way the display talks to the agent only through the attach protocol,
so what it shows does not depend on where the agent runs. Leaving an
attached chat leaves the agent running; leaving the chat that runs the
agent stops it cleanly.

At a terminal the chat is a prompt_toolkit prompt with rich output
(`input`, `screen`); through a pipe or on a dumb terminal
it reads and writes plain lines; lines from a pipe or a file are answered
one after the other, the chat leaving once the last is answered (a person's
new message cuts a reply short, a script's next line waits for it). `/stop`
(or Ctrl-C) stops a reply,
`/status` shows the agent's state, `/help` lists the commands, `/quit` (or
Ctrl-D) leaves. Errors are shown as messages, never as tracebacks.

An approval question is answered only by a line entered at its own prompt
after it was drawn (`answers.py`); a line typed before, even "yes", is a
message, sent and answered like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rich.console import Console

from ... import logs
from ...logs import SHOWN
from ...memory.turns import Flag, Turn, TurnKind
from ...orchestrator.agent import AgentListener
from ...providers.base import RetryWait
from ..host.attach import AgentNotRunning, Attached, attach, lock_holder, socket_path
from ..host.host import Host
from ..host.protocol import Connection, Hello, ServerMessage, StatusView, Welcome
from .client import HELP, HELP_KEYS, ChatClient, one_line, result_text
from .lines import StreamLines
from .input import (
    history_file,
    is_terminal,
    make_session,
    plain_terminal,
    run_lines,
    run_prompt,
)
from .screen import PROMPT, PlainScreen, RichScreen
from .status_line import StatusBar

if TYPE_CHECKING:
    from ...app import App
    from ...paths import AgentPaths

__all__ = ["HELP", "PROMPT", "TerminalListener", "call_line", "one_line",
           "run_chat", "Terminal", "converse", "open_chat"]

log = logging.getLogger(__name__)

CLIENT = "chat"
HISTORY_FILE = "chat_history"


def call_line(call: Turn, width: int) -> str:
    """A tool call as the terminal shows it: `  · name(arguments)`."""
    return f"  · {call.tool_name}({one_line(call.arguments or '', width)})"


class TerminalListener(AgentListener):
    """Prints what the agent does, as it happens."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.streaming = False
        self.prompting = False  # the prompt is the last thing on the screen

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self.prompting = False

    def prompt(self) -> None:
        """Show the prompt, unless it is already what the person looks at
        (several paths end at idle at once: a stop, its repair, the command)."""
        if not self.prompting:
            self.write(PROMPT)
            self.prompting = True

    def line_read(self) -> None:
        """The person pressed Enter: the prompt on the screen was used."""
        self.prompting = False

    def _end_stream(self) -> None:
        if self.streaming:
            self.write("\n")
            self.streaming = False

    def on_text(self, delta: str) -> None:
        if not self.streaming:
            self.write("noema> ")
            self.streaming = True
        self.write(delta)

    def on_turn(self, turn: Turn) -> None:
        if turn.kind is TurnKind.TOOL_CALL:
            self._end_stream()
            self.write(call_line(turn, 80) + "\n")
        elif turn.kind is TurnKind.ASSISTANT:
            self._end_stream()

    def on_tool_end(self, call: Turn, result: Turn) -> None:
        line, _ = result_text(result.content, error=result.has(Flag.ERROR),
                              waiting=result.has(Flag.WAITING))
        self.write(line + "\n")

    def on_cycle_end(self, cycle_id: int, outcome: str, error: str | None) -> None:
        self._end_stream()
        if error:
            self.write(f"! {error}\n")
        elif outcome == "stopped":
            self.write("(stopped)\n")
        elif outcome == "step_limit":
            self.write("(the agent reached its step limit for one cycle)\n")
        elif outcome == "repeating":
            self.write("(stopped: the model kept making the same call)\n")
        elif outcome == "no_progress":
            self.write("(stopped: the model kept making calls that changed nothing)\n")

    def on_notice(self, text: str) -> None:
        self._end_stream()
        # Said while the prompt waits: on its own line, then the prompt again.
        waiting = self.prompting
        self.write(("\n" if waiting else "") + f"* {text}\n")
        if waiting:
            self.prompt()

    def on_retry(self, wait: RetryWait) -> None:
        self.on_notice(wait.describe())

    def on_idle(self) -> None:
        self.prompt()


@dataclass(frozen=True, slots=True)
class Terminal:
    """Where the person is: the streams, whether they are a real terminal,
    the history file (at a terminal), and whether the lines come from a
    file or a program rather than from someone typing (`scripted`)."""

    stdin: TextIO
    stdout: TextIO
    plain: bool
    history: Path | None = None
    scripted: bool = False

    @classmethod
    def detect(cls, paths: AgentPaths, stdin: TextIO = sys.stdin,
               stdout: TextIO = sys.stdout) -> Terminal:
        """The process's own terminal; plain when it is a pipe or a dumb terminal."""
        return cls(stdin, stdout, plain_terminal(stdin, stdout), paths.root / HISTORY_FILE,
                   scripted=not is_terminal(stdin))


async def handshake(connection: Connection, client: str = CLIENT, since: int | None = None
                    ) -> tuple[Welcome, AsyncIterator[ServerMessage]]:
    """Say `Hello` on a fresh connection; the welcome and the messages after it
    (from after `since`, when given)."""
    messages = connection.messages()
    await connection.send(Hello(client=client, since=since))
    first = await anext(messages, None)
    if not isinstance(first, Welcome):
        raise ConnectionError(f"the agent did not welcome us ({getattr(first, 'type', 'closed')})")
    return first, messages


async def converse(connection: Connection, messages: AsyncIterator[ServerMessage], *,
                   banner: str | Callable[[StatusView | None], str], terminal: Terminal,
                   starting: Callable[[], Awaitable[None]] | None = None) -> None:
    """The chat over an attached connection, until the person leaves or the
    agent goes. `banner` is the first thing shown (worded from the agent's
    status, when a function); `starting` runs once the chat listens (it
    starts an agent run here, whose first notices must be shown)."""
    bar = StatusBar(agent="")
    loop = asyncio.get_running_loop()
    # The input side exists before the first message is shown: a question
    # asked at once is judged by it like any other (`answers.py`).
    lines: StreamLines | None = None
    session = None
    if terminal.plain:
        screen: PlainScreen | RichScreen = PlainScreen(terminal.stdout, echo=terminal.scripted)
        client = ChatClient(connection, screen, client=CLIENT)
        lines = StreamLines(terminal.stdin, loop)
        client.use_input(lines)
        lines.start()
    else:
        console = _console(terminal.stdout)
        screen = RichScreen(console)
        client = ChatClient(connection, screen, client=CLIENT, bar=bar, extra_help=HELP_KEYS)
        history = history_file(terminal.history) if terminal.history else None
        session = make_session(client, screen, bar, history=history)
    pump = asyncio.create_task(client.pump(messages), name="chat:messages")
    # Log lines reach the terminal as the chat's own notices, from any thread.
    with logs.terminal_lines(lambda text: loop.call_soon_threadsafe(screen.aside, text)):
        try:
            view: StatusView | None = None
            if isinstance(banner, str):
                screen.line(banner)
            else:
                with contextlib.suppress(ConnectionError, TimeoutError):
                    view = await client.ask_status()
                screen.line(banner(view))
            if starting is not None:
                await starting()
            with contextlib.suppress(ConnectionError, TimeoutError):
                view = await client.ask_status()
            if view is not None:
                bar.agent = view.agent
            if lines is not None:
                if not client.busy and client.asking is None:
                    screen.ready()
                await run_lines(client, lines, hint=screen.line,
                                one_at_a_time=terminal.scripted)
                if isinstance(screen, PlainScreen):
                    screen.close()
            else:
                assert isinstance(screen, RichScreen) and session is not None
                app = session.app
                screen.on_change(lambda: app.invalidate() if app.is_running else None)
                await run_prompt(client, session, bar)
        finally:
            await connection.aclose()
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump


def _console(stdout: TextIO) -> Console:
    if stdout is not sys.stdout:
        return Console(file=stdout, force_terminal=True, highlight=False,
                       width=shutil.get_terminal_size().columns)
    # No file: rich writes to whatever sys.stdout is when it prints, which is
    # prompt_toolkit's "above the prompt" proxy while the prompt runs; its
    # width comes from the terminal itself, so it follows a resize.
    return Console(force_terminal=True, highlight=False)


async def run_chat(app: App, host: Host, *, banner: str, terminal: Terminal,
                   serve: Path | None = None) -> None:
    """Run the agent here and chat with it; stop it cleanly when the person leaves.

    `host` must be the app's listener and bound to it; with `serve`, other
    interfaces may attach on that socket while the chat runs.
    """
    say = terminal.stdout.write

    async def starting() -> None:
        await app.start()
        if serve is not None:
            try:
                await host.serve(serve)
            except (OSError, RuntimeError) as exc:  # the chat works without it
                log.warning("other interfaces cannot attach: %s", exc)

    try:
        connection = host.connect(CLIENT)
        # From the first message: what the agent said while it was built
        # (senses off, a sensor that cannot start) is for this person too.
        _welcome, messages = await handshake(connection, since=0)
        await converse(connection, messages, banner=banner, terminal=terminal,
                       starting=starting)
    finally:
        try:
            await host.aclose()
        finally:
            try:
                await app.aclose()
            except Exception as exc:  # what was acknowledged is already on disk
                log.exception("closing the agent failed", extra=SHOWN)
                say(f"! closing the agent failed ({type(exc).__name__}: "
                    f"{one_line(str(exc))}); it is in the log\n")
                terminal.stdout.flush()


async def run_attached(attached: Attached, *, banner: str | Callable[[StatusView | None], str],
                       terminal: Terminal) -> None:
    """Chat with an agent another process runs; leaving leaves it running."""
    await converse(attached.connection, attached.messages, banner=banner, terminal=terminal)


async def open_chat(paths: AgentPaths, *, build: Callable[[Host], App],
                    banner: Callable[[App | None, int | None], str],
                    terminal: Terminal | None = None) -> None:
    """`noema chat`: attach to the running agent, or run it here.

    `build(host)` makes the app with `host` as its listener (its errors, such
    as no model configured, reach the caller before anything starts);
    `banner(app, pid)` words the first lines: `app` when the agent runs here,
    else the pid of the process that runs it.
    """
    terminal = terminal or Terminal.detect(paths)
    try:
        attached = await attach(paths, client=CLIENT)
    except AgentNotRunning:
        attached = None
    if attached is not None:
        def attached_banner(view: StatusView | None) -> str:
            return banner(None, view.pid if view is not None else lock_holder(paths))

        await run_attached(attached, banner=attached_banner, terminal=terminal)
        return
    host = Host(paths.name)
    app = build(host)
    host.bind(app)
    await run_chat(app, host, banner=banner(app, None), terminal=terminal,
                   serve=socket_path(paths))
