"""The asyncio shell around the reflexes: it feeds the core and does what it decides.

Everything that happens (a message, a stop, a sensor event, a model chunk,
a tool starting or ending, a cycle ending, a timer) becomes an input of
`Reflexes`; every decision it returns is performed here, at once and in
order: cycles run as tasks, a cancellation cancels the task (the model
stream closes with it) and repairs the history, packages are written to the
session. Cancelling and repairing are synchronous once the task is
cancelled, so an interruption costs milliseconds, not a polling period.

On start the shell closes whatever a crashed process left open, feeds
again every archived event the model never received (the delivery ledger,
`orchestrator.ledger`, settles what the archive was unsure of and says what
is owed), and picks up messages that were stored but never answered. The
ledger also acknowledges events and records every delivery around the turn
store's commits, so a crash at any point leaves each acknowledged event
either delivered exactly once or still owed.

Everything the shell runs for a cycle (delivering its input, the cycle
itself, the history repair, closing it) runs under one supervisor,
`_drive`: whatever fails there is logged with its traceback, told to the
person in one line, and the core is fed the input that ends the cycle, so
the agent is idle and answers the next message. The after-cycle hook runs
on the loop's next turn, once the next cycle's request is out, and its
failure is reported the same way. Nothing that goes wrong around a cycle
can leave it silent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from ..logs import SHOWN
from ..memory.session import Session, StorageFull, disk_full
from ..memory.tokens import estimate_tokens
from ..memory.turns import Flag, NewTurn, SourceKind, Turn, TurnKind, sources_union
from ..perception.clock import Clock, wall_clock
from ..perception.events import Event, Urgency
from ..perception.pipeline import Pipeline
from ..perception.treatments import UnknownChannel
from ..providers.base import ProviderError, RetryWait
from ..tools.registry import ToolResult
from .core import OrchestratorBug, Phase, Reflexes, ReflexStatus
from .context import RequestShape
from .cycle import CycleListener, CycleProgress, ReasoningCycle
from .decisions import (
    Decision,
    Deliver,
    Dropped,
    HandOver,
    KillTool,
    Origin,
    Queued,
    SafeCancel,
    StartCycle,
    StopCycle,
    UnsafeCancel,
    WakeAt,
)
from ..perception.whose import item_sources, words_of_catalogue
from .delivery import Render, plan_package, write_package
from .inputs import (
    CycleAborted,
    CycleEnded,
    Input,
    ModelChunk,
    Outcome,
    Perceived,
    PersonMessage,
    PersonStop,
    Polled,
    RestoreBegun,
    RestoreDone,
    Resume,
    StepStarted,
    Tick,
    ToolFinished,
    ToolStarted,
)
from .ledger import DeliveryLedger
from .repair import (
    answer_unfinished,
    close_leftovers,
    discard_cycle,
    keep_partial_text,
    recover_crashed_cycles,
)
from .settings import ReflexSettings
from .urgency import UrgencyRules

log = logging.getLogger(__name__)

STOPPED_NOTE = "The person stopped you here. Wait for what they say next."
DEFAULT_COMMIT_DELAY = 0.05


def failure_notice(exc: BaseException, during: str) -> str:
    """What the person is told, in one line, when something failed around a cycle."""
    if isinstance(exc, StorageFull):
        return f"{exc} (while {during}); the agent is ready again once there is room"
    detail = " ".join(str(exc).split())[:160]
    return (f"something failed while {during} ({type(exc).__name__}"
            f"{': ' + detail if detail else ''}); it is in the log, and the agent is ready "
            "for your next message")


class AgentListener(CycleListener):
    """What an interface hears from the agent, beyond a cycle's own steps."""

    def on_cycle_start(self, cycle_id: int, origin: str) -> None: ...
    def on_cycle_end(self, cycle_id: int, outcome: str, error: str | None) -> None: ...
    def on_notice(self, text: str) -> None: ...
    def on_memory(self, text: str) -> None:
        """News of narrative memory (a save point begun, written or refused): a
        notice that also changes what the status says."""
        self.on_notice(text)
    def on_idle(self) -> None: ...
    def on_submitted(self, turn: Turn) -> None:
        """A message from the person was stored, from whatever channel."""
    def on_decision(self, decision: Decision) -> None:
        """Every decision of the reflexes, as it is performed (for displays and logs)."""
    def on_sensor_crash(self, channel: str, retry_in: float) -> None:
        """The sensor of `channel` failed; it is started again in `retry_in` seconds."""


@dataclass(frozen=True, slots=True)
class Senses:
    """What the shell needs from perception: the pipeline (catalogue, gate,
    archive), how packed events are written for the model, and the longest an
    arrived event waits before the archive commits it (acknowledges it)."""

    pipeline: Pipeline
    render: Render
    commit_delay: float = DEFAULT_COMMIT_DELAY

    def __post_init__(self) -> None:
        if not 0 < self.commit_delay <= 10:
            raise ValueError("commit_delay is a positive number of seconds, at most 10")


@dataclass(frozen=True, slots=True)
class AgentStatus:
    busy: bool
    context_tokens: int
    context_window: int
    session_turns: int
    waiting_messages: int
    last_input_tokens: int | None
    save_point_id: int | None
    reflexes: ReflexStatus | None = None
    request: RequestShape | None = None  # the next request, part by part

    @property
    def context_share(self) -> float:
        return self.context_tokens / self.context_window if self.context_window else 0.0

    @property
    def waiting_events(self) -> int:
        return self.reflexes.waiting.events if self.reflexes else 0


Abort = SafeCancel | UnsafeCancel | StopCycle

# How a cycle ends when the process stops under it ("shutdown", by `close`)
# or dies in it ("crashed", closed on the next start): nobody chose to end it.
_CUT_SHORT = frozenset({"shutdown", "crashed"})

# How a cancelled cycle is recorded in the store and told to the interface.
_ABORT_STATUS: dict[type, str] = {
    SafeCancel: "cancelled_safe",
    UnsafeCancel: "cancelled_unsafe",
    StopCycle: "stopped",
}


class Agent:
    """One conversation: the person and the senses in, cycles run, history kept valid."""

    def __init__(
        self,
        session: Session,
        cycle: ReasoningCycle,
        listener: AgentListener | None = None,
        *,
        context_window: int,
        reflexes: ReflexSettings | None = None,
        senses: Senses | None = None,
        clock: Clock = wall_clock,
        after_cycle: Callable[[], None] | None = None,
        context_tokens: Callable[[], int] | None = None,
        request_shape: Callable[[], RequestShape] | None = None,
    ) -> None:
        """`after_cycle` runs when any cycle ends (the compactor checks the
        context there); `context_tokens` counts the context for the status
        (by default the system prompt and the session's turns)."""
        self.session = session
        self.cycle = cycle
        self.listener = listener or AgentListener()
        self.context_window = context_window
        self.senses = senses
        settings = reflexes or ReflexSettings()
        self.rules = UrgencyRules.from_settings(settings.rules)
        self.core = Reflexes(senses.pipeline.catalogue if senses else {}, settings)
        self._clock = clock
        self._after_cycle = after_cycle
        self._context_tokens = context_tokens or self._estimate_context
        self._request_shape = request_shape
        self._task: asyncio.Task[None] | None = None
        self._driving = False  # the cycle's task has begun to run
        self._run: int | None = None
        self._progress: CycleProgress | None = None
        self._abort: Abort | None = None
        self._started_call: int | None = None
        self._staged: dict[int, Turn] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._last_input_tokens: int | None = None
        # A delivery that failed: the cycle the core starts with it fails at
        # once (under supervision), and its messages are fed again with the next.
        self._fault: Exception | None = None
        self._undelivered: list[int] = []
        self._leftovers = False  # a failed cycle's repair could not be written in full
        self._last_failure: str | None = None  # told already, and nothing worked since
        self._ledger = (DeliveryLedger(senses.pipeline, session.store, senses.commit_delay)
                        if senses is not None else None)
        self._tap = _Tap(self)

    # -- lifecycle --------------------------------------------------------

    def start(self) -> None:
        """Repair what a previous process left, deliver the events it still owed,
        pick up unanswered messages, and answer the question a shutdown or a
        crash cut short (`Resume`; never one already answered).

        Call it inside the event loop, before the sensor hub starts: the
        events owed are fed again (with their own IDs and times, their urgency
        classified by the current rules) together with the waiting messages,
        and nothing starts a cycle until all of them are in.
        """
        try:
            for notice in recover_crashed_cycles(self.session):
                self.listener.on_notice(notice)
        except Exception as exc:  # a full disk, say: written before the first delivery
            self._report(exc, "closing what the previous run left open")
            self._leftovers = True
        restored = self._restore()
        for turn in self.session.staged():
            if turn.id not in self._staged:
                self._staged[turn.id] = turn
                self._feed(PersonMessage(turn.id, self._clock()))
        if restored:
            self._feed(RestoreDone(self._clock()))
            self.listener.on_notice(
                f"{restored} event(s) received before the restart had not reached the model; "
                "they are delivered now")
        # A cycle started above (a message written since, restored events) runs
        # over the unanswered question as well; with a repair left unwritten the
        # history is not fit to send until the next delivery writes it.
        if self.core.phase is Phase.IDLE and not self._leftovers and self._owes_an_answer():
            if any(isinstance(d, StartCycle) for d in self._feed(Resume(self._clock()))):
                self.listener.on_notice("the agent stopped before it answered your last "
                                        "message; it answers it now")

    def _owes_an_answer(self) -> bool:
        """Whether the person's last question is still unanswered because the
        process stopped or died in the cycle answering it. An answer stored
        since (any assistant text after the question) settles it: never twice."""
        last = self.session.store.last_cycle()
        if last is None or last.origin != Origin.PERSON.value or last.status not in _CUT_SHORT:
            return False
        for turn in reversed(self.session.turns):
            if turn.kind is TurnKind.ASSISTANT and turn.content.strip():
                return False
            if turn.kind is TurnKind.USER:
                return True
        return False

    def _restore(self) -> int:
        """Feed again (between RestoreBegun and the caller's RestoreDone) every
        event a previous process archived and never delivered."""
        if self._ledger is None:
            return 0
        now = self._clock()
        count = 0
        for event, info in self._ledger.owed(now):
            if not count:
                self._feed(RestoreBegun(now))
            verdict = self.rules.classify(event, info.default_urgency)
            self._take_in(event, verdict.urgency, now)
            count += 1
        return count

    async def close(self) -> None:
        """Stop any running cycle (its history repaired) and commit what the
        archive holds, before the process exits."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task = self._task
        if task and not task.done():
            self._abort = None
            task.cancel()
            await asyncio.wait({task})
        if self._ledger is not None:
            self._ledger.close()

    # -- the person's side ------------------------------------------------

    def submit(self, text: str, *, channel: str = "terminal", sender: str | None = None) -> Turn:
        """Take a message from the person. It is stored before this returns.

        Raises `StorageFull` when the disk is full: the message is refused
        and nothing changes, so the same call works once there is room.
        """
        turn = self.session.stage(NewTurn(TurnKind.USER, text, channel=channel, sender=sender))
        self._staged[turn.id] = turn
        try:
            self.listener.on_submitted(turn)
        except Exception:  # a display's bug must not refuse a stored message
            log.exception("an interface failed to show a message", extra=SHOWN)
        # Messages a failed delivery left staged go first, so the order holds;
        # while idle they and this one make one package, as on a restart.
        waiting, self._undelivered = self._undelivered, []
        together = bool(waiting) and self.core.phase is Phase.IDLE
        if together:
            self._feed(RestoreBegun(self._clock()))
        for turn_id in [*waiting, turn.id]:
            self._feed(PersonMessage(turn_id, self._clock()))
        if together:
            self._feed(RestoreDone(self._clock()))
        return turn

    async def stop(self) -> bool:
        """Stop the current cycle and wait until its history is repaired; False if none ran."""
        task = self._task
        self._feed(PersonStop(self._clock()))
        if task is None or task.done() or self.core.phase is not Phase.CANCELLING:
            return False
        await asyncio.wait({task})
        return True

    async def idle(self) -> None:
        """Wait until no cycle runs (cycles that follow one another included)."""
        while (task := self._task) is not None and not task.done():
            await asyncio.wait({task})

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    def _estimate_context(self) -> int:
        return estimate_tokens(self.cycle.system_prompt()) + self.session.tokens()

    def status(self) -> AgentStatus:
        request = self._request_shape() if self._request_shape is not None else None
        return AgentStatus(
            busy=self.busy,
            # what the next request really takes of the window, when it is known
            context_tokens=request.total if request and not request.problem
            else self._context_tokens(),
            context_window=self.context_window,
            session_turns=len(self.session),
            waiting_messages=len(self.session.staged()),
            last_input_tokens=self._last_input_tokens,
            save_point_id=self.session.save_point_id,
            reflexes=self.core.status(self._clock()),
            request=request,
        )

    # -- the senses' side ---------------------------------------------------

    def perceive(self, event: Event) -> None:
        """A sensor's event (the hub's `on_event`): classified, gated, archived, fed.

        It is acknowledged when the archive commits it, at most
        `Senses.commit_delay` later. A repeat of an event already received
        (same ID) is the same event: it is neither archived nor delivered again.
        """
        if self.senses is None:
            log.warning("event %s from %s ignored: the agent has no senses", event.id, event.channel)
            return
        if self.core.seen(event.id):
            log.info("event %s ignored: already received, and an event is delivered once",
                     event.id)
            return
        pipeline = self.senses.pipeline
        info = pipeline.catalogue.get(event.channel)
        verdict = self.rules.classify(event, info.default_urgency if info else Urgency.NORMAL)
        now = self._clock()
        try:
            archived = pipeline.admit(event, now, bypass_gate=verdict.bypass_stopped_sensor)
        except UnknownChannel:
            log.warning("event %s ignored: no sensor declares channel %s", event.id, event.channel)
            return
        if archived is not None:  # None: the model silenced the channel
            self._take_in(archived, verdict.urgency, now)
        if self._ledger is not None:
            self._ledger.commit_soon()

    def _take_in(self, event: Event, urgency: Urgency, now: float) -> None:
        # The core refuses a repeat it remembers: its archived copy is settled as refused.
        for decision in self._feed(Perceived(event, urgency, now)):
            if (isinstance(decision, Dropped) and decision.event_id == event.id
                    and event.batch_id is not None and self._ledger is not None):
                self._ledger.refuse(event, now)

    def _words_of(self, channel: str) -> SourceKind | None:
        """What a channel's unauthorised senders' words are; None for a sensor
        that speaks only its own words."""
        return words_of_catalogue(self.senses.pipeline.catalogue if self.senses else {})(channel)

    def pending_events(self) -> ToolResult:
        """What the model's own pool_event() call returns: every waiting event,
        packed, marked as outside words when a sender is not the person."""
        run = self.core.run
        if run is None or self.senses is None:
            raise OrchestratorBug("pool_event() was called outside a cycle or without senses")
        now = self._clock()
        for decision in self._feed(Polled(run, now)):
            if isinstance(decision, HandOver):
                return ToolResult(self.senses.render(decision.items, now),
                                  sources=sources_union(*(item_sources(i, self._words_of)
                                                          for i in decision.items)))
        raise OrchestratorBug("the core answered a poll without a HandOver")

    # -- feeding the core and performing its decisions ------------------------------

    def _feed(self, signal: Input) -> list[Decision]:
        decisions = self.core.handle(signal)
        for decision in decisions:
            _PERFORM[type(decision)](self, decision)
            self.listener.on_decision(decision)
        if self._fault is not None:  # a delivery failed and no cycle took the failure over
            fault, self._fault = self._fault, None
            self._report(fault, "delivering what was waiting")
        return decisions

    def _start_cycle(self, d: StartCycle) -> None:
        self._driving = False
        fault, self._fault = self._fault, None
        self._task = asyncio.get_running_loop().create_task(
            self._drive(d, fault), name=f"cycle:{d.run}")

    def _deliver(self, d: Deliver) -> None:
        now = self._clock()
        steps = plan_package(d.package)
        try:
            if self._leftovers:  # before the package, so each result stays by its call
                close_leftovers(self.session, "the agent failed while this call was pending")
                self._leftovers = False
            # Pending in the archive before the turns exist, settled once they do:
            # whichever commit a crash falls between, the turn store decides.
            with self._ledger.recording(steps, now) if self._ledger else nullcontext():
                written = write_package(
                    self.session, steps, notice=d.notice, staged=self._staged,
                    render=self.senses.render if self.senses else None, now=now,
                    words_of=self._words_of,
                )
        except Exception as exc:
            # Nothing of the package was written (one transaction). The core
            # counts it delivered, so the failure goes to the cycle it starts
            # (or is reported by `_feed`); its messages stay staged, to be fed
            # again with the next one, and its events stay owed in the archive.
            self._undelivered += [t for t in d.package.person_turns if t in self._staged]
            self._fault = exc
            return
        for turn_id in d.package.person_turns:
            self._staged.pop(turn_id, None)
        # The interfaces see the delivery as it is stored, not at the next reload.
        # The person's own messages were shown when submitted (`on_submitted`).
        for turn in written:
            if turn.kind is not TurnKind.USER:
                self.listener.on_turn(turn)

    def _hand_over(self, d: HandOver) -> None:
        if self._ledger is None or not d.items:
            return
        call = self._progress.running if self._progress is not None else None
        if call is None:
            raise OrchestratorBug("events were handed over with no pool_event call running")
        self._ledger.hand_over(call, d, self._clock())

    def _settle_handed(self) -> None:
        if self._ledger is not None:
            self._ledger.settle_handed(self._clock())

    def _cancel(self, d: Abort) -> None:
        self._abort = d
        if isinstance(d, (SafeCancel, UnsafeCancel)):
            self.listener.on_notice(f"interrupted: {d.cause.describe()}")
        # A task cancelled before its first step never runs `_drive`, so nothing
        # would report the abort: a cycle that has not begun sees it as it begins.
        if self._task is not None and self._driving:
            self._task.cancel()

    def _kill_tool(self, d: KillTool) -> None:
        progress = self._progress
        if progress is not None and progress.running_job is not None:
            progress.running_job.cancel()

    def _wake_at(self, d: WakeAt) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if d.when is not None:
            delay = max(0.0, d.when - self._clock())
            self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._feed(Tick(self._clock()))

    def _note(self, d: Queued | Dropped) -> None:
        if isinstance(d, Dropped):
            log.info("event %s dropped: %s", d.event_id, d.reason)
        else:
            log.debug("%s waits: %s", d.ref, d.reason.value)

    # -- one cycle ---------------------------------------------------------------

    async def _drive(self, start: StartCycle, fault: Exception | None = None) -> None:
        """The supervisor of one cycle: everything the shell runs for it runs
        here, and any failure ends in `_recover`, never in a dead task."""
        try:
            if fault is not None:
                raise fault
            await self._cycle(start)
        except asyncio.CancelledError:
            raise  # the agent is shutting down; `_cycle` repaired what it could
        except Exception as exc:
            # The world may start cycle after cycle on a full disk: one notice
            # for them all; a cycle the person started always gets its own.
            self._recover(start.run, exc, again=start.origin is Origin.WORLD,
                          during="delivering what was waiting" if exc is fault else None)

    async def _cycle(self, start: StartCycle) -> None:
        store = self.session.store
        cycle_id = store.open_cycle(start.origin.value)
        progress = self._progress = CycleProgress(cycle_id)
        self._run = start.run
        self.listener.on_cycle_start(cycle_id, start.origin.value)
        self._driving = True
        if self._abort is not None:  # cancelled before it began: nothing ran
            self._finish_abort(start, progress, self._abort)
            return
        outcome, error, why = Outcome.FAILED, None, None
        try:
            end = await self.cycle.run(progress, self._tap)
            outcome = Outcome(end.value)
        except asyncio.CancelledError:
            if self._abort is None:  # the agent is shutting down
                self._repair(progress, "the agent was shut down", stopped=False)
                self._settle_handed()
                self._close(progress, "shutdown", None)
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # the cancellation was ours and ends here
        except ProviderError as exc:  # their failure, not ours: said as it is
            error, why = str(exc), "the model request failed"
        if self._abort is not None:
            # Even a cycle that ended as the cancellation arrived is aborted as decided.
            self._finish_abort(start, progress, self._abort)
            return
        if why is not None:
            self._repair(progress, why, stopped=False)
        self._settle_handed()
        self._close(progress, outcome.value, error)
        if outcome is not Outcome.FAILED:
            self._last_failure = None
        self._feed(CycleEnded(start.run, outcome, progress.tokens, self._clock()))
        self._after(again=start.origin is Origin.WORLD)
        self._idle_unless_followed()

    def _finish_abort(self, start: StartCycle, progress: CycleProgress, abort: Abort) -> None:
        if isinstance(abort, SafeCancel):
            discard_cycle(self.session, progress)
        elif isinstance(abort, UnsafeCancel):
            answer_unfinished(self.session, progress, abort.cause.describe())
        else:
            self._repair(progress, "the person stopped the cycle", stopped=True)
        self._settle_handed()
        self._abort = None
        self._close(progress, _ABORT_STATUS[type(abort)], None)
        self._feed(CycleAborted(start.run, progress.tokens, self._clock()))
        self._after(again=start.origin is Origin.WORLD)
        self._idle_unless_followed()

    def _close(self, progress: CycleProgress, status: str, error: str | None) -> None:
        self.session.store.close_cycle(progress.cycle_id, status)
        self._progress = None
        self._run = None
        self._started_call = None
        if progress.usage:
            self._last_input_tokens = progress.usage.input_tokens
        self.listener.on_cycle_end(progress.cycle_id, status, error)

    def _after(self, *, again: bool) -> None:
        # After the core knows the cycle ended: a failing hook cannot keep it
        # busy. On the loop's next turn, not here: when the core has started
        # the next cycle (an urgent event cut this one), that cycle's request
        # goes out first, and the hook (the compactor's count over the whole
        # context, the reply router's look at the history) runs after it.
        if self._after_cycle is not None:
            asyncio.get_running_loop().call_soon(self._run_after, again)

    def _run_after(self, again: bool) -> None:
        # What `_drive` would have done had the hook failed in the cycle's task.
        try:
            if self._after_cycle is not None:
                self._after_cycle()
        except Exception as exc:
            self._report(exc, "finishing a reply", again=again)

    def _recover(self, run: int, exc: Exception, *, again: bool = False,
                 during: str | None = None) -> None:
        """After anything failed around cycle `run`: log it in full, tell the
        person in one line, keep the history valid as far as the store lets us,
        and feed the core what ends the cycle, so the agent is idle again."""
        mine = self.core.run == run  # else the core already ended it (a later step failed)
        progress = self._progress if mine else None
        during = during or ("the agent was working on a reply" if mine else "finishing a reply")
        self._report(exc, during, again=again)
        if mine:
            self._progress = self._abort = None
            self._run = self._started_call = None
        if progress is not None:
            # Each step may fail in turn (the same full disk, the same damaged
            # file); what could not be written is written before the next
            # delivery (`close_leftovers`), or on the next start.
            repaired = all([
                self._salvage("repairing the history", self._repair, progress,
                              "of an internal error", stopped=False),
                self._salvage("closing the cycle", self.session.store.close_cycle,
                              progress.cycle_id, "failed"),
            ])
            self._leftovers = self._leftovers or not repaired
            self._salvage("settling delivered events", self._settle_handed)
            self._salvage("telling the interface", self.listener.on_cycle_end,
                          progress.cycle_id, "failed", None)
        if mine:
            tokens, now = progress.tokens if progress else 0, self._clock()
            ended = (CycleAborted(run, tokens, now) if self.core.phase is Phase.CANCELLING
                     else CycleEnded(run, Outcome.FAILED, tokens, now))
            self._salvage("ending the cycle", self._feed, ended)
        self._idle_unless_followed()

    def _report(self, exc: BaseException, during: str, *, again: bool = False) -> None:
        """A failure around a cycle: the traceback to the log, one line to the
        person (unless `again` and it is the one they were told last)."""
        log.error("failure while %s", during, exc_info=exc, extra=SHOWN)
        if disk_full(exc) and not isinstance(exc, StorageFull):  # the archive's, say
            exc = StorageFull(self.session.folder)
        key = "disk full" if isinstance(exc, StorageFull) else f"{type(exc).__name__}: {exc}"
        if again and key == self._last_failure:
            return
        self._last_failure = key
        self.listener.on_notice(failure_notice(exc, during))

    def _salvage(self, what: str, step: Callable[..., object], *args: Any, **kw: Any) -> bool:
        try:
            step(*args, **kw)
        except Exception:
            log.exception("while recovering from a failed cycle, %s failed too", what,
                          extra=SHOWN)
            return False
        return True

    def _idle_unless_followed(self) -> None:
        # Called by a cycle's task as it ends: if no next cycle replaced it, the agent is idle.
        if self._task is asyncio.current_task():
            self.listener.on_idle()

    def _repair(self, progress: CycleProgress, why: str, *, stopped: bool) -> None:
        keep_partial_text(self.session, progress, in_context=stopped)
        answer_unfinished(self.session, progress, why)
        if stopped:
            note = self.session.append(
                NewTurn(TurnKind.NOTE, STOPPED_NOTE, cycle_id=progress.cycle_id,
                        flags=Flag.SYNTHETIC)
            )
            progress.stored.append(note.id)


class _Tap(CycleListener):
    """Feeds the core from the running cycle, then forwards to the interface."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def _run(self) -> int:
        run = self.agent._run
        if run is None:
            raise OrchestratorBug("a cycle reported progress with no run in flight")
        return run

    def on_model_request(self, step: int) -> None:
        a = self.agent
        a._feed(StepStarted(self._run(), step, a._clock()))
        a.listener.on_model_request(step)

    def on_text(self, delta: str) -> None:
        a = self.agent
        a._feed(ModelChunk(self._run(), a._clock()))
        a.listener.on_text(delta)

    def on_retry(self, wait: RetryWait) -> None:
        self.agent.listener.on_retry(wait)

    def on_turn(self, turn: Turn) -> None:
        self.agent.listener.on_turn(turn)

    def on_tool_start(self, call: Turn, side_effects: bool) -> None:
        a = self.agent
        a._started_call = call.id
        a._feed(ToolStarted(self._run(), call.id, call.tool_name or "?", side_effects, a._clock()))
        a.listener.on_tool_start(call, side_effects)

    def on_tool_end(self, call: Turn, result: Turn) -> None:
        a = self.agent
        # Calls refused before running (unknown tool, bad arguments) never started.
        if a._started_call == call.id:
            a._started_call = None
            a._feed(ToolFinished(self._run(), call.id, not result.has(Flag.ERROR), a._clock()))
        a.listener.on_tool_end(call, result)


_PERFORM: dict[type, Callable[[Agent, Any], None]] = {
    StartCycle: Agent._start_cycle,
    Deliver: Agent._deliver,
    HandOver: Agent._hand_over,
    SafeCancel: Agent._cancel,
    UnsafeCancel: Agent._cancel,
    StopCycle: Agent._cancel,
    KillTool: Agent._kill_tool,
    WakeAt: Agent._wake_at,
    Queued: Agent._note,
    Dropped: Agent._note,
}
