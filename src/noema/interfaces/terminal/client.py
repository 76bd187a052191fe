"""The terminal chat's logic: protocol messages in, lines on a screen out;
typed lines in, protocol requests out.

`ChatClient` knows no terminal library: it talks to the agent through a
`Connection` (in memory or over the agent's socket) and writes through a
`Screen`, so the plain line mode and the prompt_toolkit mode share it, and
tests drive it with a fake connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from datetime import datetime

from ...orchestrator.delivery import POOL_EVENT
from ...security.approvals import shown_plainly
from ..host.deliveries import read_delivery
from ..host.protocol import (
    Answer,
    ApprovalAsked,
    ApprovalSettled,
    AskStatus,
    ClientMessage,
    Connection,
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
    ServerMessage,
    Status,
    StatusView,
    Stop,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnStored,
    TurnView,
)
from .answers import Command, InputSide, Message, Prompts, Reply, Unclocked, read_line
from .screen import Kind, Screen
from .status_line import StatusBar
from .status_text import format_status

log = logging.getLogger(__name__)

HELP = """\
Commands:
  /stop    stop what the agent is doing now (Ctrl-C does the same)
  /status  how much of the model's context is in use, what waits
  /help    this list
  /quit    leave (Ctrl-D does the same)
Anything else is a message to the agent. A question is answered at its own
prompt once shown (y allows; n or Enter refuses; other words refuse and are
sent as a message); a line typed before it appeared is a message."""

HELP_KEYS = """\
Keys: Enter sends; Alt-Enter (or Esc then Enter) starts a new line, and a pasted
text keeps its lines; Up and Down walk the history."""

QUIT = {"/quit", "/exit"}
CANCELS = {"SafeCancel", "UnsafeCancel"}  # decisions that mean a message interrupted a cycle
REQUEST_TIMEOUT = 60.0  # seconds for the agent to answer a request before we say so


def one_line(text: str, width: int = 100) -> str:
    """A text on one line of at most `width` characters (an ellipsis ends a cut one)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# A call that has not run: its question went to the person's channels.
WAITING_LINE = ("not run yet: waiting for your answer to the question asked away; its "
                "outcome follows as an event from approvals")


def result_text(content: str, *, error: bool, waiting: bool) -> tuple[str, Kind]:
    """A tool's result as the terminal's one line under its call, and its style:
    `→` it ran, `✗` it failed, `◷` it waits for the person's answer away."""
    if waiting:
        return f"    ◷ {WAITING_LINE}", "notice"
    if error:
        return f"    ✗ {one_line(content)}", "failed"
    return f"    → {one_line(content)}", "result"


def deadline_text(where: str, expires_at: float | None, now: float) -> str:
    """Where a question was asked and when, unanswered, it is refused (the
    machine's clock): "" for a question at the machine without a deadline."""
    parts = []
    if where:
        parts.append(f"asked {where} while you were away: answer here or there, the first "
                     "answer counts")
    if expires_at is not None:
        minutes = max(0, math.ceil((expires_at - now) / 60))
        clock = datetime.fromtimestamp(expires_at).strftime("%H:%M")
        parts.append(f"unanswered, it is refused at {clock}, "
                     f"in {minutes} minute{'' if minutes == 1 else 's'}")
    return "; ".join(parts)


def call_text(tool: str | None, arguments: str | None, width: int) -> str:
    """A tool call as the terminal shows it: `  · name(arguments)`."""
    return f"  · {tool}({one_line(arguments or '', width)})"


def delivery_text(content: str) -> str | None:
    """A delivery of events as the terminal shows it, or None when `content` is
    not one: `  · events from applog, mail (2 packages, 10 in the archive)`."""
    delivery = read_delivery(content)
    if delivery is None:
        return None
    count = len(delivery.packages)
    parts = [f"{count} package{'s' if count != 1 else ''}"]
    archived = sum(p.gap.count for p in delivery.packages if p.gap is not None)
    if archived:
        parts.append(f"{archived} more in the archive")
    return f"  · events from {', '.join(delivery.channels)} ({', '.join(parts)})"


class AgentGone(ConnectionError):
    """The connection to the agent closed while a request waited."""


class ChatClient:
    """One person at one terminal, attached to the agent through `connection`."""

    def __init__(self, connection: Connection, screen: Screen, *, client: str = "chat",
                 bar: StatusBar | None = None, extra_help: str = "") -> None:
        self.connection = connection
        self.screen = screen
        self.client = client
        self.bar = bar  # None: no status bar to keep fresh (plain mode)
        self.extra_help = extra_help
        self.busy = False
        self.closed = asyncio.Event()  # the connection ended (the agent left or we did)
        self._stirred = asyncio.Event()  # a message came, or the connection ended
        self.goodbye: str | None = None
        self.approvals: deque[ApprovalAsked] = deque()
        # Which question a typed line answers, if any, is decided by when it
        # was entered against when each prompt was drawn (`answers.py`).
        self.prompts = Prompts()
        self.input: InputSide = Unclocked()
        self._requests = 0
        self._waiting: dict[int, asyncio.Future[ServerMessage]] = {}
        self._idles = 0  # Idle messages seen, to order them against our requests
        self._cancels = 0  # cancellations seen, to tell whether a message interrupted
        self._mine: deque[str] = deque(maxlen=50)  # texts we said, not yet seen as Said
        self._streamed = False  # the current answer was shown as it streamed
        self._asked: int | None = None  # a status asked for the bar, not yet answered
        self._background: set[asyncio.Task[None]] = set()  # held so they are not collected
        self._handlers: dict[type, Callable[[ServerMessage], None]] = {
            TextDelta: self._text, TurnStored: self._turn, ToolStarted: self._tool_started,
            ToolFinished: self._tool_finished, CycleStarted: self._cycle_started,
            CycleEnded: self._cycle_ended, RetryWaiting: self._retry, Notice: self._notice,
            Decided: self._decided, Idle: self._idle, ApprovalAsked: self._approval_asked,
            ApprovalSettled: self._approval_settled, Said: self._said, Status: self._reply,
            Done: self._reply, Goodbye: self._goodbye,
        }

    # -- what the agent says ---------------------------------------------------

    async def pump(self, messages: AsyncIterator[ServerMessage]) -> None:
        """Show every message until the connection ends."""
        try:
            async for message in messages:
                try:
                    self.handle(message)
                except Exception:  # a bug of ours must not stop the chat hearing the agent
                    log.exception("the chat could not show a %s", type(message).__name__)
        finally:
            self.closed.set()
            self._stirred.set()
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(AgentGone("the agent is gone"))
            self._waiting.clear()

    def handle(self, message: ServerMessage) -> None:
        """Show one message; a type this chat has no use for is ignored."""
        handler = self._handlers.get(type(message))
        if handler is not None:
            handler(message)
        if self.bar is not None:
            self.bar.changed()
        self._stirred.set()

    async def settled(self) -> None:
        """Until the agent has nothing in hand: idle, asking a question, or
        gone. Lines from a script wait for it, so that each is answered
        instead of cutting short the answer before it (a line already in the
        pipe when a question is drawn is a message, never its answer)."""
        while self.busy and not self.approvals and not self.closed.is_set():
            self._stirred.clear()
            await self._stirred.wait()

    def _text(self, message: TextDelta) -> None:
        self._streamed = True
        self._clear_retry()
        self.screen.answer(message.delta)

    def _turn(self, message: TurnStored) -> None:
        turn = message.turn
        if turn.kind == "tool_call" and turn.tool_name == POOL_EVENT:
            return  # the delivery that follows says what it carried
        if turn.kind == "event" and (shown := delivery_text(turn.content)) is not None:
            self.screen.end_answer()
            self.screen.line(shown, "tool")
        elif turn.kind == "tool_call":
            self.screen.end_answer()
            self.screen.line(call_text(turn.tool_name, turn.arguments, 80), "tool")
        elif turn.kind == "assistant":
            if not self._streamed and turn.content.strip():
                self.screen.answer(turn.content)  # it never streamed: show it whole
            self.screen.end_answer()
            self._streamed = False

    def _tool_started(self, message: ToolStarted) -> None:
        if self.bar is not None:
            self.bar.activity = message.call.tool_name or ""

    def _tool_finished(self, message: ToolFinished) -> None:
        if self.bar is not None:
            self.bar.activity = ""
        result = message.result
        self.screen.line(*result_text(result.content, error=result.error,
                                      waiting=result.waiting))

    def _cycle_started(self, message: CycleStarted) -> None:
        self.busy = True
        self._streamed = False
        if self.bar is not None:
            self.bar.phase = "running"

    def _cycle_ended(self, message: CycleEnded) -> None:
        self._clear_retry()
        self.screen.end_answer()
        self._streamed = False
        if message.error:
            self.screen.line(f"! {message.error}", "error")
        elif message.outcome == "stopped":
            self.screen.line("(stopped)", "note")
        elif message.outcome == "step_limit":
            self.screen.line("(the agent reached its step limit for one cycle)", "note")
        elif message.outcome == "repeating":
            self.screen.line("(stopped: the model kept making the same call)", "note")
        elif message.outcome == "no_progress":
            self.screen.line("(stopped: the model kept making calls that changed nothing)", "note")
        if self.bar is not None:
            self.bar.activity = ""
            self._refresh_status()  # the context grew; the next cycle may start at once

    def _retry(self, message: RetryWaiting) -> None:
        if self.bar is not None:
            self.bar.retry = message
        self.screen.line(f"* {message.line}", "notice")

    def _clear_retry(self) -> None:
        if self.bar is not None:
            self.bar.retry = None

    def _notice(self, message: Notice) -> None:
        self.screen.line(f"* {message.text}", "notice")
        if self.bar is not None and message.about == "memory":
            self._refresh_status()  # memory began or ended a save point: the bar says so

    def _decided(self, message: Decided) -> None:
        if message.kind in CANCELS:
            self._cancels += 1

    def _idle(self, message: Idle) -> None:
        self._idles += 1
        self.busy = False
        self._clear_retry()
        if self.bar is not None:
            self.bar.phase, self.bar.activity = "idle", ""
            self._refresh_status()
        if not self.approvals:
            self.screen.ready()

    def _said(self, message: Said) -> None:
        turn = message.turn
        if turn.content in self._mine:
            self._mine.remove(turn.content)  # our own words, already on the screen
            return
        self.screen.line(said_line(turn), "other")
        if self.bar is not None:
            self._refresh_status()

    def _approval_asked(self, message: ApprovalAsked) -> None:
        self.approvals.append(message)
        if len(self.approvals) == 1:
            self._show_question()

    def _show_question(self) -> None:
        asked = self.approvals[0]
        # Whole and on their own lines: the end of a long command is where
        # the harm hides; invisible and direction-changing characters shown.
        arguments, flagged = shown_plainly(asked.arguments)
        text = f"* {asked.tool} needs your approval:\n" + "\n".join(
            f"    {line}" for line in arguments.splitlines() or [""])
        if flagged:
            text += ("\n  ! it holds invisible or direction-changing characters, shown as "
                     "⟨U+…⟩: read it with care")
        if asked.reason:  # "because it follows a stranger's mail (…)": whose words, whole
            reason = one_line(shown_plainly(asked.reason)[0], 600)
            text += (f"\n  Asked {reason}." if reason.startswith("because ")
                     else f"\n  ({reason})")
        deadline = deadline_text(asked.where, asked.expires_at, time.time())
        if deadline:
            text += f"\n  ({deadline})"
        self.screen.line(text, "notice")
        if self.bar is not None:
            self.bar.approvals = len(self.approvals)
        self.screen.ask()
        self.input.prompt_changed(self.prompts, asked.approval)

    def _approval_settled(self, message: ApprovalSettled) -> None:
        ids = [a.approval for a in self.approvals]
        if message.approval not in ids:
            return
        first = ids[0] == message.approval
        self.approvals = deque(a for a in self.approvals if a.approval != message.approval)
        if self.bar is not None:
            self.bar.approvals = len(self.approvals)
        if message.by != self.client:
            verdict = "allowed" if message.allowed else "declined"
            by = f" by {message.by}" if message.by else ""
            self.screen.line(f"(the question was settled{by}: {verdict})", "note")
        if first and self.approvals:
            self._show_question()
        elif not self.approvals:
            if not self.busy:
                self.screen.ready()
            self.input.prompt_changed(self.prompts, None)

    def _goodbye(self, message: Goodbye) -> None:
        self.goodbye = message.reason or "the agent stopped"
        self.screen.line(f"* the agent is leaving: {self.goodbye}", "notice")

    def _reply(self, message: Done | Status) -> None:
        future = self._waiting.pop(message.request, None)
        if future is not None and not future.done():
            future.set_result(message)
        elif isinstance(message, Status) and self.bar is not None:
            self._asked = None
            self._show_view(message.status)

    def _show_view(self, view: StatusView) -> None:
        if self.bar is None:
            return
        self.bar.view = view
        if not self.busy and view.busy:
            self.busy = True
        self.bar.phase = view.phase

    # -- what the person says --------------------------------------------------

    @property
    def asking(self) -> ApprovalAsked | None:
        """The approval question the next typed line answers, if one is open."""
        return self.approvals[0] if self.approvals else None

    def use_input(self, side: InputSide) -> None:
        """Lines come from `side`, which says when each prompt was drawn."""
        self.input = side

    async def take_line(self, text: str, *, at: int) -> bool:
        """One typed line, entered at input position `at` (see `answers.py`):
        an answer, a command or a message. False means leave."""
        self.screen.line_read(text)
        verdict = read_line(text, self.prompts.at(at))
        try:
            if isinstance(verdict, Reply):
                await self._send_answer(verdict)
                if verdict.words:  # refused, and what they wrote instead is for the agent
                    await self._say(verdict.words)
            elif isinstance(verdict, Command):
                if not await self._command(verdict.text):
                    return False
            elif isinstance(verdict, Message):
                if self.asking is not None:  # entered before the question was drawn
                    self.screen.line(f"(\"{one_line(verdict.text, 40)}\" was typed before the "
                                     "question was shown: sent as a message, not as your "
                                     "answer)", "note")
                await self._say(verdict.text)
        except AgentGone:
            return False
        except (ConnectionError, TimeoutError) as exc:
            self.screen.line(f"! the agent did not take that: {exc or type(exc).__name__}",
                             "error")
        if self.asking is not None and not isinstance(verdict, Reply):
            self.screen.ask()  # the question still waits for its answer
        else:
            self._ready_if_idle()
        return True

    def _ready_if_idle(self) -> None:
        if not self.busy and not self.approvals:
            self.screen.ready()

    async def _send_answer(self, reply: Reply) -> None:
        """Send an answer bound to the question it was given at; one whose
        question was settled meanwhile (elsewhere, by a stop) is not used."""
        if all(a.approval != reply.question for a in self.approvals):
            self.screen.line(f"(your answer to approval {reply.question} came after it was "
                             "settled, so it was not used)", "note")
            return
        try:
            await self.connection.send(Answer(approval=reply.question, allow=reply.allow))
        except ConnectionError as exc:
            if self.closed.is_set():
                raise AgentGone(str(exc)) from exc
            self.screen.line(f"! the answer did not reach the agent: {exc}", "error")

    async def _say(self, text: str) -> None:
        was_busy, idles, cancels = self.busy, self._idles, self._cancels
        self._mine.append(text)
        done = await self.request(Say(request=self._next(), text=text))
        assert isinstance(done, Done)
        if not done.ok:
            with contextlib.suppress(ValueError):
                self._mine.remove(text)
            self.screen.line(f"! your message was not taken: {done.error}", "error")
            return
        if self._idles == idles:
            # A message to an idle agent starts a cycle; its Idle has not come yet.
            self.busy = True
        # A message that interrupted the thought needs no note; one that waits does.
        if was_busy and self._cancels == cancels and self._idles == idles:
            self.screen.line("(noted: the agent reads it when the current cycle ends)", "note")

    async def _command(self, text: str) -> bool:
        word = text.split()[0].lower()
        if word in QUIT:
            return False
        if word == "/stop":
            await self.stop(say_nothing_to_stop=True)
        elif word == "/status":
            view = await self.ask_status()
            self.screen.line(format_status(view))
        elif word == "/help":
            self.screen.line(HELP + (("\n" + self.extra_help) if self.extra_help else ""))
        else:
            self.screen.line(f"unknown command {word}; /help lists them")
        return True

    async def stop(self, say_nothing_to_stop: bool = False) -> None:
        """Stop the current cycle (also cuts a provider's retry wait short)."""
        if not self.busy and say_nothing_to_stop:
            self.screen.line("(nothing to stop)", "note")
            return
        done = await self.request(Stop(request=self._next()))
        if isinstance(done, Done) and not done.ok and done.error:
            self.screen.line(f"({done.error})", "note")

    async def ask_status(self) -> StatusView:
        """A fresh status snapshot (the bar is updated with it too)."""
        reply = await self.request(AskStatus(request=self._next()))
        if isinstance(reply, Done):  # the agent could not say: an error, not a status
            raise ConnectionError(reply.error or "the agent gave no status")
        assert isinstance(reply, Status)
        self._show_view(reply.status)
        return reply.status

    def _refresh_status(self) -> None:
        """Ask for a status in the background (the bar shows it when it comes);
        one question at a time, however many messages call for it."""
        if self.closed.is_set() or self._asked is not None:
            return
        request = self._asked = self._next()

        async def ask() -> None:
            try:
                await self.connection.send(AskStatus(request=request))
            except ConnectionError:
                self._asked = None

        self._background.add(task := asyncio.get_running_loop().create_task(ask()))
        task.add_done_callback(self._background.discard)

    def _next(self) -> int:
        self._requests += 1
        return self._requests

    async def request(self, message: ClientMessage,
                      timeout: float = REQUEST_TIMEOUT) -> ServerMessage:
        """Send a request and wait for its answer (`Done`, or `Status`)."""
        if self.closed.is_set():
            raise AgentGone("the agent is gone")
        number = message.request  # type: ignore[union-attr]
        future: asyncio.Future[ServerMessage] = asyncio.get_running_loop().create_future()
        self._waiting[number] = future
        try:
            await self.connection.send(message)
            return await asyncio.wait_for(future, timeout)
        except ConnectionError as exc:
            if self.closed.is_set():
                raise AgentGone(str(exc)) from exc
            raise
        finally:
            self._waiting.pop(number, None)


def said_line(turn: TurnView) -> str:
    """A person's message from another channel: `[telegram] Ana: text`."""
    where = turn.channel or "elsewhere"
    who = f"{turn.sender}: " if turn.sender else ""
    return f"[{where}] {who}{turn.content}"
