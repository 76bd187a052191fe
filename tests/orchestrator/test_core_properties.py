"""The core against a simulated shell, over every nature of event.

A legal shell is simulated (it feeds only inputs that can happen, and
reports the cancellations it was told to make); random actions drive it.
Checked at every decision: the policy (normal never interrupts, a safe
cancellation never follows a side effect, an unsafe one only follows one
and only for urgent causes, the notice comes exactly after an unsafe
cancellation), the progress guard's bound, and at the end that every raw
event accepted was delivered exactly once (condensed items account for
every event they stand for).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noema.orchestrator.core import Phase
from noema.orchestrator.decisions import (
    Deliver,
    Dropped,
    HandOver,
    SafeCancel,
    StartCycle,
    StopCycle,
    UnsafeCancel,
    WakeAt,
)
from noema.orchestrator.inputs import (
    CycleAborted,
    CycleEnded,
    ModelChunk,
    Outcome,
    Perceived,
    PersonMessage,
    PersonStop,
    Polled,
    Tick,
    ToolFinished,
    ToolStarted,
)
from noema.perception.events import Urgency

from .conftest import T0, event, reflexes

GUARD = {"max_cancellations": 2, "window_s": 30.0}


@dataclass
class Shell:
    """A shell that feeds only legal inputs and checks every decision."""

    core: object
    now: float = T0
    run: int | None = None
    tool: tuple[int, bool] | None = None  # (call, side effects)
    side_effects: int = 0
    cancel: type | None = None
    calls: int = 0
    turns: int = 0
    accepted: int = 0
    delivered: int = 0
    provisional: list[int] = field(default_factory=list)  # polled, result not stored yet
    confirmed: list[int] = field(default_factory=list)  # polled, result stored
    handed: int = 0  # events the model polled and kept
    cancels_since_end: list[float] = field(default_factory=list)
    last_cancel: type | None = None
    wake: float | None = None

    def feed(self, signal, trigger_urgency: Urgency | None = None) -> list:
        decisions = self.core.handle(signal)
        for d in decisions:
            self.apply(d, trigger_urgency)
        return decisions

    def apply(self, d, trigger: Urgency | None) -> None:
        if isinstance(d, (SafeCancel, UnsafeCancel)):
            assert trigger is not None and trigger is not Urgency.NORMAL, "normal interrupted"
            if isinstance(d, SafeCancel):
                assert self.side_effects == 0, "a safe cancellation after a side effect"
            else:
                assert self.side_effects > 0, "an unsafe cancellation of a safe cycle"
                assert trigger is Urgency.URGENT, "only urgent cancels unsafely"
            self.cancels_since_end = [t for t in self.cancels_since_end
                                      if t > self.now - GUARD["window_s"]]
            assert len(self.cancels_since_end) < GUARD["max_cancellations"], "guard broken"
            self.cancels_since_end.append(self.now)
            self.cancel = type(d)
        elif isinstance(d, StopCycle):
            self.cancel = StopCycle
        elif isinstance(d, Deliver):
            assert d.notice == (self.last_cancel is UnsafeCancel), "notice without unsafe cancel"
            self.last_cancel = None
            self.delivered += d.package.event_count
        elif isinstance(d, StartCycle):
            assert self.run is None
            self.run, self.side_effects, self.tool = d.run, 0, None
            self.provisional, self.confirmed = [], []
        elif isinstance(d, HandOver):
            self.provisional.append(sum(item.count for item in d.items))
        elif isinstance(d, Dropped):
            self.accepted -= 1
        elif isinstance(d, WakeAt):
            self.wake = d.when

    # -- actions ---------------------------------------------------------------------

    def perceive(self, channel: str, urgency: Urgency, key: str) -> None:
        self.accepted += 1
        e = event(channel, f"{channel} {key}", at=self.now, sender=f"{channel}-{key}", key=key)
        self.feed(Perceived(e, urgency, self.now), urgency)

    def message(self) -> None:
        self.turns += 1
        self.feed(PersonMessage(self.turns, self.now), Urgency.PRIORITY)

    def stop(self) -> None:
        self.feed(PersonStop(self.now))

    def tool_start(self, side_effects: bool) -> None:
        if self.run is None or self.cancel or self.tool:
            return
        self.calls += 1
        self.tool = (self.calls, side_effects)
        self.side_effects += side_effects
        self.feed(ToolStarted(self.run, self.calls, "t", side_effects, self.now))

    def poll(self) -> None:
        if self.run is not None and self.tool and not self.cancel:
            self.feed(Polled(self.run, self.now))

    def pool_event(self) -> None:
        """The model's own pool_event() call, whole: started, polled, answered."""
        if self.run is None or self.cancel or self.tool:
            return
        self.tool_start(False)
        self.poll()
        self.tool_end(True)

    def tool_end(self, ok: bool) -> None:
        if self.run is None or not self.tool:
            return
        self.feed(ToolFinished(self.run, self.tool[0], ok, self.now))
        self.tool = None
        self.confirmed += self.provisional
        self.provisional = []

    def chunk(self) -> None:
        if self.run is not None:
            self.feed(ModelChunk(self.run, self.now))

    def finish(self, outcome: Outcome) -> None:
        if self.run is None or (self.cancel is None and self.tool):
            return  # no cycle, or its tool still runs: it cannot end on its own
        run, self.run, self.tool = self.run, None, None
        if self.cancel:
            mode, self.cancel = self.cancel, None
            # A safe cancellation takes what the model polled out with the cycle;
            # a poll whose result was never stored did not reach it either way.
            if mode is not SafeCancel:
                self.handed += sum(self.confirmed)
            self.last_cancel = mode
            self.feed(CycleAborted(run, 10, self.now))
        else:
            self.handed += sum(self.confirmed)
            self.cancels_since_end = []
            self.feed(CycleEnded(run, outcome, 10, self.now))

    def tick(self, dt: float) -> None:
        self.now += dt
        self.feed(Tick(self.now))

    def play(self, plan: list[tuple]) -> None:
        """Feed a plan drawn from `actions`."""
        for name, *args in plan:
            if name == "event":
                self.perceive(*args)
            else:
                getattr(self, name)(*args)

    def drain(self) -> None:
        """Let every cycle end, every window ripen, and the person speak."""
        for _ in range(50):
            self.tool_end(True)
            self.finish(Outcome.ANSWERED)
            self.tick(400.0)
            if self.core.phase is Phase.IDLE and self.core.status().waiting.events == 0:
                break
            if self.core.phase is Phase.IDLE:
                self.message()


_EVENT = st.tuples(st.just("event"), st.sampled_from(["alerts", "logs", "chat", "mail", "pager"]),
                  st.sampled_from(list(Urgency)), st.sampled_from(["a", "b"]))
_NORMAL_EVENT = st.tuples(st.just("event"), st.sampled_from(["alerts", "logs", "chat"]),
                          st.just(Urgency.NORMAL), st.sampled_from(["a", "b"]))
_MOVES = {
    "event": _EVENT,
    "normal": _NORMAL_EVENT,
    "message": st.just(("message",)),
    "stop": st.just(("stop",)),
    "tool_start": st.tuples(st.just("tool_start"), st.booleans()),
    "poll": st.just(("poll",)),
    "pool_event": st.just(("pool_event",)),
    "tool_end": st.tuples(st.just("tool_end"), st.booleans()),
    "chunk": st.just(("chunk",)),
    "finish": st.tuples(st.just("finish"), st.sampled_from(list(Outcome))),
    "tick": st.tuples(st.just("tick"), st.sampled_from([0.5, 3.0, 20.0, 90.0])),
}
# Weighted so that events often wait while the model polls and cycles get cancelled.
_WEIGHTS = ["event"] * 4 + ["normal"] * 3 + ["pool_event"] * 2 + [
    "message", "stop", "tool_start", "tool_start", "poll", "poll", "tool_end", "chunk",
    "finish", "finish", "tick"]

actions = st.lists(st.sampled_from(_WEIGHTS).flatmap(_MOVES.__getitem__), min_size=5, max_size=60)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=actions, quiet=st.sampled_from([0.0, 2.0]))
def test_the_core_keeps_its_policy_and_delivers_every_event_once(plan, quiet):
    shell = Shell(reflexes(idle_quiet_window_s=quiet, idle_max_wait_s=quiet * 5,
                           progress=GUARD))
    shell.play(plan)
    shell.drain()
    assert shell.core.phase is Phase.IDLE
    assert shell.core.status().waiting.events == 0
    assert shell.delivered + shell.handed == shell.accepted


# -- arrival order around the person's messages ----------------------------------------


def _shown_ids(item) -> list[str]:
    for name in ("events", "messages"):
        if hasattr(item, name):
            return [e.id for e in getattr(item, name)]
    if hasattr(item, "first"):
        return [item.first.id, item.latest.id]
    return [item.value.id]


@dataclass
class OrderShell(Shell):
    """The shell above, also keeping when each message and event arrived."""

    arrivals: int = 0
    arrived: dict[str, int] = field(default_factory=dict)  # event ID → arrival
    waiting: dict[int, int] = field(default_factory=dict)  # the person's turn → arrival

    def perceive(self, channel: str, urgency: Urgency, key: str) -> None:
        self.arrivals += 1
        self.accepted += 1
        e = event(channel, f"{channel} {key}", at=self.now, sender=f"{channel}-{key}", key=key)
        self.arrived[e.id] = self.arrivals
        self.feed(Perceived(e, urgency, self.now), urgency)

    def message(self) -> None:
        self.arrivals += 1
        self.turns += 1
        self.waiting[self.turns] = self.arrivals
        self.feed(PersonMessage(self.turns, self.now), self.core._busy_urgency())

    def apply(self, d, trigger: Urgency | None) -> None:
        entries = []
        if isinstance(d, Deliver):
            entries = list(d.package.entries)
        elif isinstance(d, HandOver):
            entries = [type("E", (), {"item": i})() for i in d.items]
        for entry in entries:
            turn = getattr(entry, "turn_id", None)
            if turn is not None:
                self.waiting.pop(turn, None)
                continue
            latest = max(self.arrived.get(i, 0) for i in _shown_ids(entry.item))
            overtaken = [t for t, at in self.waiting.items() if at < latest]
            assert not overtaken, (f"an event that arrived after the person's message(s) "
                                   f"{overtaken} was delivered before them")
        super().apply(d, trigger)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=actions, busy=st.sampled_from(["queue", "priority", "urgent"]))
def test_no_event_is_delivered_ahead_of_a_message_of_the_person_it_came_after(plan, busy):
    """Whatever `message_while_busy` says, a message of the person is never
    delivered after outside words that arrived after it: it would seem to
    answer words the person never saw."""
    shell = OrderShell(reflexes(progress=GUARD, message_while_busy=busy))
    shell.play(plan)
    shell.drain()
    assert shell.delivered + shell.handed == shell.accepted
