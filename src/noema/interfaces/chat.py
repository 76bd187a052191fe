"""`noema chat`: talk to the agent at a terminal.

Answers stream as they are written. Ctrl-C or `/stop` stops the current
cycle; `/status` shows how full the context is; `/quit` (or Ctrl-D) leaves.
Errors are shown as messages, never as tracebacks: whatever fails while a
typed line is handled is logged and said in one line, and the chat goes on.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
from collections.abc import Callable
from typing import TextIO

from ..app import App
from ..logs import SHOWN
from ..memory.session import StorageFull
from ..memory.turns import Flag, Turn, TurnKind
from ..orchestrator.agent import Agent, AgentListener
from ..orchestrator.core import Phase
from ..providers.base import RetryWait
from ..security.approvals import ApprovalRequest

log = logging.getLogger(__name__)

HELP = """\
Commands:
  /stop    stop what the agent is doing now (Ctrl-C does the same)
  /status  how much of the model's context is in use
  /help    this list
  /quit    leave (Ctrl-D does the same)
Anything else is a message to the agent."""

PROMPT = "you> "


def one_line(text: str, width: int = 100) -> str:
    """A text on one line of at most `width` characters (an ellipsis ends a cut one)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


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
        mark = "✗" if result.has(Flag.ERROR) else "→"
        self.write(f"    {mark} {one_line(result.content)}\n")

    def on_cycle_end(self, cycle_id: int, outcome: str, error: str | None) -> None:
        self._end_stream()
        if error:
            self.write(f"! {error}\n")
        elif outcome == "stopped":
            self.write("(stopped)\n")
        elif outcome == "step_limit":
            self.write("(the agent reached its step limit for one cycle)\n")

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


def format_status(agent: Agent) -> str:
    status = agent.status()
    lines = [
        f"context: about {status.context_tokens:,} of {status.context_window:,} tokens "
        f"({status.context_share:.0%}) in {status.session_turns} turns",
        f"state: {'working' if status.busy else 'idle'}"
        + (f", {status.waiting_messages} message(s) waiting" if status.waiting_messages else ""),
    ]
    reflexes = status.reflexes
    if reflexes is not None:
        if status.waiting_events:
            lines.append(f"events waiting: {status.waiting_events}"
                         + (" (they wait for you to write)" if reflexes.held else ""))
        if reflexes.world_budget_exhausted:
            budget = f"budget for cycles the world starts is spent ({reflexes.world_tokens_spent:,}"
            budget += f" of {reflexes.world_tokens_per_hour:,} tokens this hour)"
            lines.append(budget + "; events wait for you")
        if reflexes.guard_engaged:
            lines.append("interruptions paused: the current cycle was cancelled too often")
    if status.last_input_tokens is not None:
        lines.append(f"last request, as counted by the model: {status.last_input_tokens:,} tokens")
    if status.save_point_id is not None:
        lines.append(f"current save point: #{status.save_point_id}")
    return "\n".join(lines)


def _start_reader(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[str | None],
                  source: TextIO) -> None:
    # A daemon thread: a blocked readline never keeps the process alive.
    def read() -> None:
        while True:
            line = source.readline()
            loop.call_soon_threadsafe(lines.put_nowait, line if line else None)
            if not line:
                return

    threading.Thread(target=read, name="stdin", daemon=True).start()


YES = {"y", "yes", "s", "si", "sí"}


class TerminalApprover:
    """Asks the person at the terminal; the next line they type is the answer."""

    def __init__(self, listener: TerminalListener) -> None:
        self.listener = listener
        self._waiting: asyncio.Future[str] | None = None

    async def __call__(self, request: ApprovalRequest) -> bool:
        self.listener.on_notice(f"{request.tool} needs your approval: {request.arguments}")
        self.listener.write("  allow it? [y/N] ")
        self._waiting = asyncio.get_running_loop().create_future()
        try:
            answer = await self._waiting
        finally:
            self._waiting = None
        return answer.strip().lower() in YES

    def answer(self, line: str) -> bool:
        """Take a typed line as the answer if a question is open."""
        if self._waiting is None or self._waiting.done():
            return False
        self._waiting.set_result(line)
        return True


async def run_chat(app: App, *, banner: str, source: TextIO = sys.stdin,
                   out: TextIO = sys.stdout,
                   listener: TerminalListener | None = None) -> None:
    """The chat loop; returns when the person quits."""
    agent = app.agent
    listener = listener or TerminalListener(out)
    approver = TerminalApprover(listener)
    app.attach_approver(approver)
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    _start_reader(loop, lines, source)
    last_interrupt = [0.0]

    def on_interrupt() -> None:
        if agent.busy:
            loop.create_task(agent.stop())
            return
        now = loop.time()
        if now - last_interrupt[0] < 2:
            lines.put_nowait(None)
        else:
            listener.write("\n(press Ctrl-C again or type /quit to leave)\n")
        last_interrupt[0] = now

    try:
        await _converse(app, approver, listener, lines, banner, on_interrupt)
    finally:
        try:
            await app.aclose()
        except Exception as exc:  # what was acknowledged is already on disk
            log.exception("closing the agent failed", extra=SHOWN)
            listener.write(f"! closing the agent failed ({type(exc).__name__}: "
                           f"{one_line(str(exc))}); it is in the log\n")


async def _converse(app: App, approver: TerminalApprover, listener: TerminalListener,
                    lines: asyncio.Queue[str | None], banner: str,
                    on_interrupt: Callable[[], None]) -> None:
    agent = app.agent
    loop = asyncio.get_running_loop()
    with _signal_handler(loop, signal.SIGINT, on_interrupt):
        listener.write(banner + "\n")
        await app.start()
        if not agent.busy:
            listener.prompt()
        while True:
            line = await lines.get()
            if line is None:
                break
            listener.line_read()
            if approver.answer(line):
                continue
            try:
                if await _take_line(line.strip(), agent, listener) == "quit":
                    break
            except StorageFull as exc:  # refused whole: the person still has the text
                log.info("a message was refused: %s", exc)
                listener.write(f"! your message was not taken: {exc}\n")
            except Exception as exc:  # a bug of ours: logged in full, said in one line
                log.exception("the chat could not handle a line", extra=SHOWN)
                listener.write(f"! that failed ({type(exc).__name__}: {one_line(str(exc))}); "
                               "it is in the log\n")
            if not agent.busy:
                listener.prompt()


async def _take_line(text: str, agent: Agent, listener: TerminalListener) -> str | None:
    """One typed line: a command, a message, or nothing."""
    if not text:
        return None
    if text.startswith("/"):
        return await _command(text, agent, listener)
    was_busy = agent.busy
    agent.submit(text)
    # A message that interrupted the thought needs no note; one that waits does.
    if was_busy and agent.core.phase is Phase.RUNNING:
        listener.write("(noted: the agent reads it when the current cycle ends)\n")
    return None


async def _command(text: str, agent: Agent, listener: TerminalListener) -> str | None:
    word = text.split()[0].lower()
    if word in {"/quit", "/exit"}:
        return "quit"
    if word == "/stop":
        stopped = await agent.stop()
        if not stopped:
            listener.write("(nothing to stop)\n")
    elif word == "/status":
        listener.write(format_status(agent) + "\n")
    elif word == "/help":
        listener.write(HELP + "\n")
    else:
        listener.write(f"unknown command {word}; /help lists them\n")
    return None


class _signal_handler:
    """Install an asyncio signal handler for the duration of a block."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sig: int,
                 handler: Callable[[], None]) -> None:
        self.loop, self.sig, self.handler = loop, sig, handler

    def __enter__(self) -> None:
        self.loop.add_signal_handler(self.sig, self.handler)

    def __exit__(self, *exc: object) -> None:
        self.loop.remove_signal_handler(self.sig)
