"""Questions asked while the person is away: sent to their channels, answered
from anywhere, and the approved call run without holding up the agent.

When no interface is attached, the gate (`approvals.py`) hands a question
here with the call it guards. `post` records it (`away_store.py`), sends it
on the first of the person's channels that can ask now (Telegram's buttons,
then mail), and returns at once: the cycle ends and the agent handles other
events while the question waits.

**The first answer wins.** A press on Telegram, the person's reply by mail,
or an interface that attached meanwhile (the host lists the open questions
in its welcome) all call `answer`; the first one settles the question and
every later one is told it is closed and how. The channel that asked is
told too, so its message says where the question was answered. A question
nobody answers within `[autonomy] approval_timeout_s` expires as a refusal.

**The outcome is an event.** An allowed call runs in the background with
the arguments the person was shown and the call's own `ToolContext`; what
it returned, or the refusal, or the expiry, is recorded with the next
outcome number and reported by the approvals sensor
(`perception/sensors/approvals.py`) through the hub, like any event.

**A restart** ends what the process left: a question still waiting is
reported expired (its buttons and its mail were that process's; a late
answer is told it is closed), a call allowed but not finished is reported
cut short and never run twice.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, tzinfo
from typing import Any, Protocol

from ..tools.registry import ToolContext, ToolError
from .approvals import ApprovalRequest, AwayTicket, RunApproved
from .away_store import AwayStore, Question

log = logging.getLogger(__name__)

OUTCOME_CHARS = 6000  # of a result, in the outcome event; the rest is counted
ARGUMENT_CHARS = 400  # of the arguments, to remind the model which call it was

# Who answered, as a sentence names the place.
_PLACES = {"telegram": "on Telegram", "email": "by mail", "web": "on the web page",
           "chat": "in the terminal", "terminal": "in the terminal"}
TIMEOUT = "timeout"
RESTART = "restart"


@dataclass(frozen=True, slots=True)
class AwayQuestion:
    """A question as a channel sends it."""

    number: int
    request: ApprovalRequest
    timeout: float  # seconds it waits for an answer
    expires_at: float


@dataclass(frozen=True, slots=True)
class Posted:
    """A question a channel sent: where (for the model) and how to close it later."""

    place: str  # "on Telegram", "by mail to ana@example.org"
    handle: Mapping[str, Any]  # JSON data: the channel's own reference to it


# What a channel calls with the person's answer: None when it settled the
# question, else why it did not (closed, and how), for the person.
Answer = Callable[[int, bool, str], str | None]


class AwayChannel(Protocol):
    """A channel of the person's that can ask (Telegram, mail)."""

    name: str

    async def post_question(self, question: AwayQuestion, answer: Answer) -> Posted:
        """Send the question; RuntimeError when this channel cannot ask now."""
        ...

    async def close_question(self, handle: Mapping[str, Any], outcome: str) -> None:
        """The question was settled elsewhere (or expired): say so, take no more answers."""
        ...


class AwayListener(Protocol):
    """Who shows the questions at the machine (the host)."""

    def away_asked(self, number: int, request: ApprovalRequest, place: str,
                   expires_at: float) -> None: ...

    def away_settled(self, number: int, allowed: bool, by: str) -> None: ...


@dataclass
class _Waiting:
    question: Question
    request: ApprovalRequest
    ctx: ToolContext
    run: RunApproved
    timer: asyncio.TimerHandle | None = None


@dataclass
class AwayApprovals:
    """The questions asked away, from sending to the outcome event."""

    store: AwayStore
    channels: Sequence[AwayChannel]
    timeout: Callable[[], float]  # [autonomy] approval_timeout_s, read at each question
    zone: tzinfo
    listeners: list[AwayListener] = field(default_factory=list)
    _waiting: dict[int, _Waiting] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _new: asyncio.Event = field(default_factory=asyncio.Event)

    # -- asking ---------------------------------------------------------------------

    async def post(self, request: ApprovalRequest, ctx: ToolContext, run: RunApproved, *,
                   number: int | None = None, expires_at: float | None = None) -> AwayTicket:
        """Send the question on the first channel that can ask; ToolError when none can.

        A question asked at the machine first (its watchers left) keeps its
        `number` and its `expires_at`; otherwise both are new."""
        now = time.time()
        if expires_at is None:
            expires_at = now + self.timeout()
        timeout = max(0.0, expires_at - now)
        if number is None:
            number = self.store.next_number()
        question = AwayQuestion(number, request, timeout, expires_at)
        # Recorded before it leaves: a restart in between reports it expired.
        self.store.record(number, request.tool, asdict(request), ctx.call_id, ctx.turn_id,
                          expires_at)
        try:
            channel, posted = await self._send(question)
        except BaseException:  # nobody was asked (or the call was stopped meanwhile)
            self.store.forget(number)
            raise
        self.store.placed(number, channel.name, posted.place, posted.handle)
        recorded = self.store.get(number)
        assert recorded is not None
        waiting = self._waiting[number] = _Waiting(recorded, request, ctx, run)
        waiting.timer = asyncio.get_running_loop().call_later(
            timeout, self._settle, number, False, TIMEOUT)
        log.info("approval %d of %s asked %s; it expires in %.0f s", number, request.tool,
                 posted.place, timeout)
        for listener in self.listeners:
            listener.away_asked(number, request, posted.place, expires_at)
        return AwayTicket(number, posted.place, self._clock(expires_at))

    async def _send(self, question: AwayQuestion) -> tuple[AwayChannel, Posted]:
        problems = []
        for channel in self.channels:
            try:
                return channel, await channel.post_question(question, self.answer)
            except RuntimeError as exc:  # configured, but it cannot ask now
                log.info("%s cannot ask the person: %s", channel.name, exc)
                problems.append(f"{channel.name}: {exc}")
        why = f" ({'; '.join(problems)})" if problems else ""
        raise ToolError(
            f"{question.request.tool} needs the person's approval, but no interface is "
            f"attached and no channel of the person's can ask them now{why} (a Telegram chat "
            "can: [telegram] chat_ids; so can mail: [mail] allow_from), so it was not run. "
            "Tell the person what you wanted to do; they can approve it when they attach.")

    def pending(self) -> list[tuple[int, ApprovalRequest, str, float]]:
        """The questions waiting now, oldest first (for an interface that
        attaches): number, request, where it was asked, when it expires."""
        return [(n, w.request, w.question.place, w.question.expires_at)
                for n, w in sorted(self._waiting.items())]

    def is_waiting(self, number: int) -> bool:
        return number in self._waiting

    def knows(self, number: int) -> bool:
        """Whether `number` was a question asked away (waiting or closed)."""
        return number in self._waiting or self.store.get(number) is not None

    def answer(self, number: int, allowed: bool, by: str) -> str | None:
        """The person's answer from anywhere: None when it settled the question,
        else why it did not (it is closed, and how)."""
        if number not in self._waiting:
            return self._closed(number)
        self._settle(number, allowed, by)
        return None

    # -- what the process left ----------------------------------------------------------

    async def start(self) -> None:
        """Settle what a previous process left unfinished (nothing runs again)."""
        for question in self.store.unfinished():
            if question.state == "waiting":
                self.store.move(question.number, "expired", by=RESTART,
                                outcome=_restarted(question))
                self._background(self._close_on(question, "The agent restarted before an "
                                                          "answer came: it expired, and "
                                                          "nothing was run."))
                for listener in self.listeners:  # the call's line in the chats says so
                    listener.away_settled(question.number, False, RESTART)
            else:  # allowed, or running: it may have had part of its effect
                self.store.move(question.number, "failed", outcome=_cut_short(question))
        self._new.set()

    async def aclose(self) -> None:
        """Stop the timers and the calls still running: the next start reports them."""
        for waiting in self._waiting.values():
            if waiting.timer is not None:
                waiting.timer.cancel()
        self._waiting.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- the outcome events' source --------------------------------------------------------

    def outcomes_after(self, seq: int) -> list[Question]:
        return self.store.outcomes_after(seq)

    def reported(self) -> int:
        return self.store.reported()

    def set_reported(self, seq: int) -> None:
        self.store.set_reported(seq)

    async def wait_new(self) -> None:
        """Return once an outcome may have been recorded since the last call."""
        await self._new.wait()
        self._new.clear()

    # -- inside -------------------------------------------------------------------------

    def _settle(self, number: int, allowed: bool, by: str) -> None:
        waiting = self._waiting.pop(number, None)
        if waiting is None:
            return
        if waiting.timer is not None:
            waiting.timer.cancel()
        question = waiting.question
        if allowed:
            self.store.move(number, "allowed", by=by)
            self._background(self._run(waiting, by))
        elif by == TIMEOUT:
            minutes = max(1, round((question.expires_at - question.asked_at) / 60))
            self.store.move(number, "expired", by=by, outcome=(
                f"{_heading(question)}: nobody answered within {minutes} minute"
                f"{'s' if minutes != 1 else ''}, so it expired as a refusal; it was not run."))
        else:
            self.store.move(number, "refused", by=by, outcome=(
                f"{_heading(question)}: the person refused it {_place(by)}; it was not run. "
                "Do not repeat it unchanged: ask them what they would prefer."))
        log.info("approval %d of %s: %s (%s)", number, question.tool,
                 "allowed" if allowed else "refused", by)
        if by != question.channel:  # the channel's message says where it was settled
            self._background(self._close_on(question, _settled_text(allowed, by)))
        for listener in self.listeners:
            listener.away_settled(number, allowed, by)
        self._new.set()

    async def _run(self, waiting: _Waiting, by: str) -> None:
        question = waiting.question
        self.store.move(question.number, "running")
        result = await waiting.run()
        content = result.content
        if len(content) > OUTCOME_CHARS:
            content = (f"{content[:OUTCOME_CHARS]}\n… ({len(content) - OUTCOME_CHARS} more "
                       "characters left out)")
        how = "ran and failed" if result.is_error else "ran"
        self.store.move(question.number, "failed" if result.is_error else "ran",
                        outside=result.outside,
                        outcome=f"{_heading(question)}: the person allowed it {_place(by)}; it "
                                f"{how}. Its result:\n{content}")
        self._new.set()

    async def _close_on(self, question: Question, outcome: str) -> None:
        for channel in self.channels:
            if channel.name == question.channel:
                try:
                    await channel.close_question(question.handle, outcome)
                except Exception as exc:  # the question is settled whatever it shows
                    log.info("closing approval %d on %s failed: %s", question.number,
                             channel.name, exc)

    def _background(self, work) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _closed(self, number: int) -> str:
        question = self.store.get(number)
        if question is None:
            return f"approval {number} is not one this agent knows (or it is long closed)"
        if question.state == "waiting":  # recorded, still on its way to a channel
            return (f"approval {number} is being sent to the person's channels right now; "
                    "answer it again in a moment")
        if question.by == RESTART:
            how = "it expired when the agent restarted"
        elif question.by == TIMEOUT:
            how = "it expired unanswered and was refused"
        else:
            verb = "refused" if question.state == "refused" else "allowed"
            how = f"it was {verb} {_place(question.by or '')} already"
        return f"approval {number} is closed: {how}; nothing was done with this answer"

    def _clock(self, at: float) -> str:
        moment = datetime.fromtimestamp(at, self.zone)
        minutes = math.ceil((at - time.time()) / 60)
        return f"{moment:%Y-%m-%d %H:%M %Z} (in {minutes} minute{'s' if minutes != 1 else ''})"


def _place(by: str) -> str:
    return _PLACES.get(by, f"from {by}" if by else "")


def _settled_text(allowed: bool, by: str) -> str:
    if by == TIMEOUT:
        return "No answer came in time: it expired as a refusal, and nothing was run."
    return f"Answered {_place(by)}: {'allowed' if allowed else 'refused'}."


def _heading(question: Question) -> str:
    arguments = str(question.request.get("arguments", ""))
    if len(arguments) > ARGUMENT_CHARS:
        arguments = arguments[:ARGUMENT_CHARS] + " …"
    place = question.place or "as the agent stopped"
    return (f"Approval {question.number} ({question.tool}, call {question.call_id or '?'}, "
            f"asked {place}; arguments: {arguments})")


def _restarted(question: Question) -> str:
    return (f"{_heading(question)}: the agent restarted before the person answered, so it "
            "expired; it was not run. If it is still needed, call it again.")


def _cut_short(question: Question) -> str:
    return (f"{_heading(question)}: the person allowed it, but the agent stopped before it "
            "finished; it may have had part of its effect and was not run again. Check "
            "before calling it again.")
