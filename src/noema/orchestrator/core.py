"""The orchestrator's reflexes as a sans-IO state machine.

`Reflexes.handle(input)` takes one thing that happened (a message, a stop, an
event, a model chunk, a tool starting or finishing, a cycle ending, time
passing) and returns the decisions that follow, in order. It holds the
prioritised queue, the record of the cycle in flight and the guards; it has
no clock, no asyncio and no I/O, so every decision can be replayed and
tested with plain values. The asyncio shell (`agent.py`) performs them.

Every rule lives in the tables below: `POLICY` (urgency x cycle safety ->
action), `HELD_BACK` (what a guard turns a cancellation into) and
`TRANSITIONS` (phase x input -> handler). An input with no entry for the
current phase is a bug of ours and raises `OrchestratorBug`.

After a restart the shell feeds the events the archive still owes the model
between `RestoreBegun` and `RestoreDone`, while idle: in between nothing
starts a cycle, so the restored events and the waiting messages make one
package, as if they had all just arrived. Then, if the person's last question
was cut short by a shutdown or a crash, the shell feeds `Resume`: a cycle over
the history as it stands, unless one already started.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..perception.events import SensorInfo, Urgency
from .decisions import (
    Cause,
    Decision,
    Deliver,
    Dropped,
    HandOver,
    KillTool,
    Origin,
    Package,
    PersonEntry,
    Queued,
    QueueReason,
    SafeCancel,
    StartCycle,
    StopCycle,
    UnsafeCancel,
    WakeAt,
)
from .guards import EventRegistry, ProgressGuard, WorldBudget
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
from .queue import PendingQueue
from .record import CycleRecord, CycleView, Phase, ReflexStatus, RunningTool, Safety
from .settings import ReflexSettings
from .urgency import BUSY_MODE_URGENCY


class OrchestratorBug(RuntimeError):
    """The shell fed an input that cannot happen in the core's state: our bug."""


class Action(enum.StrEnum):
    QUEUE = "queue"
    QUEUE_AT_HEAD = "queue at head"
    SAFE_CANCEL = "safe cancel"
    UNSAFE_CANCEL = "unsafe cancel"


class CancelMode(enum.StrEnum):
    SAFE = "safe"
    UNSAFE = "unsafe"
    STOP = "stop"


# What an entry arriving during a cycle does, by its urgency and the cycle's safety.
POLICY: Mapping[tuple[Urgency, Safety], Action] = {
    (Urgency.NORMAL, Safety.SAFE): Action.QUEUE,
    (Urgency.NORMAL, Safety.UNSAFE): Action.QUEUE,
    (Urgency.PRIORITY, Safety.SAFE): Action.SAFE_CANCEL,
    (Urgency.PRIORITY, Safety.UNSAFE): Action.QUEUE_AT_HEAD,
    (Urgency.URGENT, Safety.SAFE): Action.SAFE_CANCEL,
    (Urgency.URGENT, Safety.UNSAFE): Action.UNSAFE_CANCEL,
}

# What an action becomes when a guard (progress, budget) forbids cancelling.
HELD_BACK: Mapping[Action, Action] = {
    Action.QUEUE: Action.QUEUE,
    Action.QUEUE_AT_HEAD: Action.QUEUE_AT_HEAD,
    Action.SAFE_CANCEL: Action.QUEUE_AT_HEAD,
    Action.UNSAFE_CANCEL: Action.QUEUE_AT_HEAD,
}

_CANCEL_MODE: Mapping[Action, CancelMode] = {
    Action.SAFE_CANCEL: CancelMode.SAFE,
    Action.UNSAFE_CANCEL: CancelMode.UNSAFE,
}

_QUEUE_REASON: Mapping[Action, QueueReason] = {
    Action.QUEUE: QueueReason.NORMAL,
    Action.QUEUE_AT_HEAD: QueueReason.UNSAFE,
}


@dataclass(slots=True)
class _Cancelling:
    mode: CancelMode
    then_stop: bool = False  # the person stopped while an event's cancellation ran


# A handler applies one input in one phase: (core, input, decisions so far, now).
Handler = Callable[..., None]


class Reflexes:
    """The orchestrator core: inputs in, decisions out."""

    def __init__(
        self,
        catalogue: Mapping[str, SensorInfo],
        settings: ReflexSettings | None = None,
    ) -> None:
        self.settings = settings = settings or ReflexSettings()
        self._queue = PendingQueue(catalogue)
        self._registry = EventRegistry()
        self._guard = ProgressGuard(settings.progress.max_cancellations, settings.progress.window_s)
        self._budget = WorldBudget(settings.world_tokens_per_hour)
        self._phase = Phase.IDLE
        self._record: CycleRecord | None = None
        self._cancelling: _Cancelling | None = None
        self._runs = 0
        self._now = 0.0
        self._arrivals = 0  # inputs that may wake the agent: messages and accepted events
        self._hold_mark: int | None = None  # arrivals at a stop/failure: older ones wait
        self._burst_first: float | None = None  # first and last world arrival not yet taken
        self._burst_last: float | None = None
        self._wake: float | None = None
        self._restoring = False  # between RestoreBegun and RestoreDone

    # -- reading ----------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def run(self) -> int | None:
        """The number of the cycle in flight (or being cancelled), if any."""
        return self._record.run if self._record else None

    def seen(self, event_id: str) -> bool:
        """Whether an event with this ID was already accepted (a repeat is refused)."""
        return event_id in self._registry

    def cycle(self) -> CycleView | None:
        r = self._record
        if r is None:
            return None
        return CycleView(
            r.run, r.origin, r.started_at, r.step, r.chunks, r.tools_started,
            r.side_effects_started, r.last_confirmed_action,
            r.running.name if r.running else None, r.safety,
        )

    def status(self, now: float | None = None) -> ReflexStatus:
        at = max(self._now, now or 0.0)
        return ReflexStatus(
            phase=self._phase,
            cycle=self.cycle(),
            waiting=self._queue.counts(),
            held=self._held(),
            guard_engaged=self._guard.engaged(at),
            world_tokens_spent=self._budget.spent(at),
            world_tokens_per_hour=self._budget.per_hour,
            world_budget_exhausted=self._budget.exhausted(at),
            world_budget_frees_at=self._budget.frees_at(at),
            wake_at=self._wake,
        )

    # -- the one entry point --------------------------------------------------------

    def handle(self, signal: Input) -> list[Decision]:
        """Apply one input; returns the decisions to carry out, in order."""
        handler = TRANSITIONS.get((self._phase, type(signal)))
        if handler is None:
            raise OrchestratorBug(f"{type(signal).__name__} cannot happen while {self._phase}")
        run = getattr(signal, "run", None)
        if run is not None and run != self.run:
            raise OrchestratorBug(
                f"{type(signal).__name__} names run {run}, but the run in flight is {self.run}"
            )
        # Time never runs backwards inside the core, whatever clocks the shell mixes.
        now = self._now = max(self._now, signal.at)
        out: list[Decision] = []
        handler(self, signal, out, now)
        if self._phase is Phase.IDLE:
            self._start_if_due(now, out)
        self._schedule(now, out)
        return out

    # -- arrivals ---------------------------------------------------------------------

    def _accept_event(self, signal: Perceived, out: list[Decision], now: float) -> bool:
        event = signal.event
        if not self._queue.knows(event.channel):
            out.append(Dropped(event.id, f"no sensor declares the channel {event.channel!r}"))
            return False
        if not self._registry.admit(event.id):
            out.append(Dropped(event.id, "already received: an event is delivered once"))
            return False
        self._queue.add_event(event, signal.urgency, now)
        self._arrivals += 1
        if self._burst_first is None:
            self._burst_first = now
        self._burst_last = now
        return True

    def _accept_message(self, signal: PersonMessage) -> PersonEntry:
        self._arrivals += 1
        return self._queue.add_person(signal.turn_id, self._busy_urgency(), signal.at)

    def _busy_urgency(self) -> Urgency:
        return BUSY_MODE_URGENCY[self.settings.message_while_busy]

    # -- the policy ------------------------------------------------------------------

    def _react(
        self, ref: str, urgency: Urgency, cause: Cause, out: list[Decision], now: float,
        *, from_world: bool,
    ) -> None:
        """Apply the policy to an entry that arrived while a cycle runs."""
        record = self._require_record()
        action = POLICY[(urgency, record.safety)]
        reason = _QUEUE_REASON.get(action)
        if action in _CANCEL_MODE:
            if self._guard.engaged(now):
                action, reason = HELD_BACK[action], QueueReason.GUARD
            elif from_world and self._budget.exhausted(now):
                action, reason = HELD_BACK[action], QueueReason.BUDGET
        if reason is not None:
            out.append(Queued(ref, urgency, action is Action.QUEUE_AT_HEAD, reason))
            return
        mode = _CANCEL_MODE[action]
        if record.running is not None:
            tool = record.running
            out.append(KillTool(record.run, tool.call, tool.name, tool.side_effects))
        out.append(
            SafeCancel(record.run, cause) if mode is CancelMode.SAFE
            else UnsafeCancel(record.run, cause)
        )
        self._cancelling = _Cancelling(mode)
        self._phase = Phase.CANCELLING

    # -- starting cycles --------------------------------------------------------------

    def _held(self) -> bool:
        return self._hold_mark is not None and self._arrivals <= self._hold_mark

    def _quiet(self, now: float) -> bool:
        if self._burst_last is None or self._burst_first is None:
            return True
        s = self.settings
        return now >= min(
            self._burst_last + s.idle_quiet_window_s, self._burst_first + s.idle_max_wait_s
        )

    def _start_if_due(self, now: float, out: list[Decision]) -> None:
        if self._restoring:
            return
        if self._queue.has_person():
            self._start(now, out, Origin.PERSON)
            return
        if self._held() or self._budget.exhausted(now) or not self._queue.world_ready(now):
            return
        if self._queue.urgent_waiting() or self._quiet(now):
            self._start(now, out, Origin.WORLD)

    def _start(
        self, now: float, out: list[Decision], origin: Origin, *, notice: bool = False,
        package: Package | None = None,
    ) -> None:
        package = package or self._take(now)
        if package is None:
            return
        if package.person_turns:
            origin = Origin.PERSON
        out.append(Deliver(package, notice))
        self._open(now, out, origin)

    def _open(self, now: float, out: list[Decision], origin: Origin) -> None:
        """Start a cycle over the history as it stands (after its delivery, if any)."""
        self._runs += 1
        self._record = CycleRecord(self._runs, origin, now)
        self._phase = Phase.RUNNING
        self._hold_mark = None
        out.append(StartCycle(self._runs, origin))

    def _take(self, now: float) -> Package | None:
        package = self._queue.take(now)
        if package is not None:
            self._burst_first = self._burst_last = None
        return package

    def _schedule(self, now: float, out: list[Decision]) -> None:
        when = self._next_wake(now)
        if when != self._wake:
            self._wake = when
            out.append(WakeAt(when))

    def _next_wake(self, now: float) -> float | None:
        if self._phase is not Phase.IDLE or self._restoring or self._held():
            return None
        if not self._queue.world_waiting():
            return None
        if self._budget.exhausted(now):
            return self._budget.frees_at(now)
        if self._queue.world_ready(now):
            s = self.settings
            first = self._burst_first if self._burst_first is not None else now
            last = self._burst_last if self._burst_last is not None else now
            return max(now, min(last + s.idle_quiet_window_s, first + s.idle_max_wait_s))
        # Nothing ripe yet (an aggregation window is open): wake when it closes.
        ripening = self._queue.next_ripening()
        return None if ripening is None else max(now, ripening)

    def _require_record(self) -> CycleRecord:
        if self._record is None:
            raise OrchestratorBug(f"no cycle record while {self._phase}")
        return self._record

    def _end_run(self, tokens: int, now: float) -> CycleRecord:
        record = self._require_record()
        if record.origin is Origin.WORLD:
            self._budget.charge(now, tokens)
        self._record = None
        self._cancelling = None
        self._phase = Phase.IDLE
        return record


# -- handlers, one per (phase, input) --------------------------------------------------


def _message_idle(core: Reflexes, signal: PersonMessage, out: list[Decision], now: float) -> None:
    core._accept_message(signal)
    core._start_if_due(now, out)


def _message_running(
    core: Reflexes, signal: PersonMessage, out: list[Decision], now: float
) -> None:
    entry = core._accept_message(signal)
    core._react(f"turn:{entry.turn_id}", entry.urgency, Cause(entry.urgency), out, now,
                from_world=False)


def _message_cancelling(
    core: Reflexes, signal: PersonMessage, out: list[Decision], now: float
) -> None:
    entry = core._accept_message(signal)
    out.append(Queued(f"turn:{entry.turn_id}", entry.urgency, False, QueueReason.CANCELLING))


def _stop_idle(core: Reflexes, signal: PersonStop, out: list[Decision], now: float) -> None:
    # Nothing runs; what waits now waits for something new.
    core._hold_mark = core._arrivals


def _stop_running(core: Reflexes, signal: PersonStop, out: list[Decision], now: float) -> None:
    record = core._require_record()
    if record.running is not None:
        tool = record.running
        out.append(KillTool(record.run, tool.call, tool.name, tool.side_effects))
    out.append(StopCycle(record.run))
    core._cancelling = _Cancelling(CancelMode.STOP)
    core._phase = Phase.CANCELLING
    core._hold_mark = core._arrivals


def _stop_cancelling(
    core: Reflexes, signal: PersonStop, out: list[Decision], now: float
) -> None:
    cancelling = core._cancelling
    if cancelling is None:
        raise OrchestratorBug("cancelling without a cancellation")
    cancelling.then_stop = True
    core._hold_mark = core._arrivals


def _perceived_idle(core: Reflexes, signal: Perceived, out: list[Decision], now: float) -> None:
    if not core._accept_event(signal, out, now):
        return
    core._start_if_due(now, out)
    if core._phase is Phase.IDLE:
        if core._restoring:
            reason = QueueReason.RESTORING
        elif core._held():
            reason = QueueReason.HELD
        elif core._budget.exhausted(now):
            reason = QueueReason.BUDGET
        else:
            reason = QueueReason.IDLE
        out.append(Queued(signal.event.id, signal.urgency, False, reason))


def _perceived_running(
    core: Reflexes, signal: Perceived, out: list[Decision], now: float
) -> None:
    if core._accept_event(signal, out, now):
        event = signal.event
        cause = Cause(signal.urgency, event.channel, event.sender)
        core._react(event.id, signal.urgency, cause, out, now, from_world=True)


def _perceived_cancelling(
    core: Reflexes, signal: Perceived, out: list[Decision], now: float
) -> None:
    if core._accept_event(signal, out, now):
        out.append(Queued(signal.event.id, signal.urgency, False, QueueReason.CANCELLING))


def _restore_begun(
    core: Reflexes, signal: RestoreBegun, out: list[Decision], now: float
) -> None:
    if core._restoring:
        raise OrchestratorBug("a restore began while another was under way")
    core._restoring = True


def _restore_done(core: Reflexes, signal: RestoreDone, out: list[Decision], now: float) -> None:
    if not core._restoring:
        raise OrchestratorBug("a restore ended that never began")
    core._restoring = False  # handle() then starts what is due and schedules the rest


def _resume(core: Reflexes, signal: Resume, out: list[Decision], now: float) -> None:
    # The question is in the history already: the cycle starts with nothing
    # delivered. While a restore runs, or when a message of the person waits,
    # the cycle those start answers it too (it is in the history before them).
    if core._restoring or core._queue.has_person():
        return
    core._open(now, out, Origin.PERSON)


def _tick(core: Reflexes, signal: Tick, out: list[Decision], now: float) -> None:
    pass  # handle() itself starts a due cycle and schedules the next wake-up


def _step(core: Reflexes, signal: StepStarted, out: list[Decision], now: float) -> None:
    core._require_record().step = signal.step


def _chunk(core: Reflexes, signal: ModelChunk, out: list[Decision], now: float) -> None:
    core._require_record().chunks += 1


def _late_chunk(core: Reflexes, signal: ModelChunk, out: list[Decision], now: float) -> None:
    pass  # already buffered when the cancellation was decided; it changes nothing


def _tool_started(core: Reflexes, signal: ToolStarted, out: list[Decision], now: float) -> None:
    record = core._require_record()
    if record.running is not None:
        raise OrchestratorBug(f"{signal.name} started while {record.running.name} still runs")
    record.running = RunningTool(signal.call, signal.name, signal.side_effects)
    record.tools_started += 1
    if signal.side_effects:
        record.side_effects_started += 1


def _tool_finished(
    core: Reflexes, signal: ToolFinished, out: list[Decision], now: float
) -> None:
    # Also while cancelling: a tool may complete before it sees the cancellation
    # (an atomic write does); what it did is real and is recorded.
    record = core._require_record()
    tool = record.running
    if tool is None or tool.call != signal.call:
        raise OrchestratorBug(f"turn {signal.call} finished but it is not the running tool")
    record.running = None
    record.handed.extend(record.handing)
    record.handing.clear()
    if signal.ok and tool.side_effects:
        record.last_confirmed_action = f"{tool.name} (turn {tool.call})"


def _polled(core: Reflexes, signal: Polled, out: list[Decision], now: float) -> None:
    record = core._require_record()
    if record.running is None:
        raise OrchestratorBug("pool_event() was polled with no tool running")
    entries = core._queue.take_world(now)
    record.handing.extend(entries)
    if entries and not core._queue.world_waiting():
        core._burst_first = core._burst_last = None
    held = tuple(run for e in entries for run in e.held)
    out.append(HandOver(record.run, tuple(e.item for e in entries), held))


def _ended(core: Reflexes, signal: CycleEnded, out: list[Decision], now: float) -> None:
    core._end_run(signal.tokens, now)
    core._guard.reset()
    if signal.outcome is Outcome.FAILED:
        # Starting again on the same failing endpoint would loop: wait for new input.
        core._hold_mark = core._arrivals


def _aborted(core: Reflexes, signal: CycleAborted, out: list[Decision], now: float) -> None:
    cancelling = core._cancelling
    if cancelling is None:
        raise OrchestratorBug("a cycle was aborted that the core did not cancel")
    record = core._end_run(signal.tokens, now)
    # Events polled by a call whose result was never stored did not reach the
    # model; after a safe cancellation none did, their results left with the cycle.
    core._queue.put_back(record.handing)
    if cancelling.mode is CancelMode.SAFE:
        core._queue.put_back(record.handed)
    if cancelling.mode is CancelMode.STOP:
        return
    core._guard.record(now)
    package = core._take(now)
    if package is None:
        raise OrchestratorBug("a cancellation left nothing to deliver")
    if cancelling.then_stop:
        out.append(Deliver(package, cancelling.mode is CancelMode.UNSAFE))
        return
    core._start(now, out, record.origin, notice=cancelling.mode is CancelMode.UNSAFE,
                package=package)


TRANSITIONS: Mapping[tuple[Phase, type], Handler] = {
    (Phase.IDLE, PersonMessage): _message_idle,
    (Phase.IDLE, PersonStop): _stop_idle,
    (Phase.IDLE, Perceived): _perceived_idle,
    (Phase.IDLE, Tick): _tick,
    (Phase.IDLE, RestoreBegun): _restore_begun,
    (Phase.IDLE, RestoreDone): _restore_done,
    (Phase.IDLE, Resume): _resume,
    (Phase.RUNNING, PersonMessage): _message_running,
    (Phase.RUNNING, PersonStop): _stop_running,
    (Phase.RUNNING, Perceived): _perceived_running,
    (Phase.RUNNING, Tick): _tick,
    (Phase.RUNNING, StepStarted): _step,
    (Phase.RUNNING, ModelChunk): _chunk,
    (Phase.RUNNING, ToolStarted): _tool_started,
    (Phase.RUNNING, ToolFinished): _tool_finished,
    (Phase.RUNNING, Polled): _polled,
    (Phase.RUNNING, CycleEnded): _ended,
    (Phase.CANCELLING, PersonMessage): _message_cancelling,
    (Phase.CANCELLING, PersonStop): _stop_cancelling,
    (Phase.CANCELLING, Perceived): _perceived_cancelling,
    (Phase.CANCELLING, Tick): _tick,
    (Phase.CANCELLING, ModelChunk): _late_chunk,
    (Phase.CANCELLING, ToolFinished): _tool_finished,
    (Phase.CANCELLING, CycleAborted): _aborted,
}
