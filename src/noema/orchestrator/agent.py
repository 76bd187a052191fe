"""The asyncio shell around reasoning cycles for a person at an interface.

It takes the person's messages, runs one cycle at a time, holds messages that
arrive mid-cycle until the cycle ends, stops a cycle on request and repairs
the history afterwards. On start it closes whatever a crashed process left
open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from ..memory.session import Session
from ..memory.tokens import estimate_tokens
from ..memory.turns import Flag, NewTurn, Turn, TurnKind
from ..providers.base import ProviderError
from .cycle import CycleListener, CycleProgress, ReasoningCycle
from .repair import answer_unfinished, keep_partial_text, recover_crashed_cycles

log = logging.getLogger(__name__)


class AgentListener(CycleListener):
    """What an interface hears from the agent, beyond a cycle's own steps."""

    def on_cycle_start(self, cycle_id: int, origin: str) -> None: ...
    def on_cycle_end(self, cycle_id: int, outcome: str, error: str | None) -> None: ...
    def on_notice(self, text: str) -> None: ...
    def on_idle(self) -> None: ...


@dataclass(frozen=True, slots=True)
class AgentStatus:
    busy: bool
    context_tokens: int
    context_window: int
    session_turns: int
    waiting_messages: int
    last_input_tokens: int | None
    save_point_id: int | None

    @property
    def context_share(self) -> float:
        return self.context_tokens / self.context_window if self.context_window else 0.0


class Agent:
    """One conversation: messages in, cycles run, history kept valid."""

    def __init__(
        self,
        session: Session,
        cycle: ReasoningCycle,
        listener: AgentListener | None = None,
        *,
        context_window: int,
    ) -> None:
        self.session = session
        self.cycle = cycle
        self.listener = listener or AgentListener()
        self.context_window = context_window
        self._task: asyncio.Task[None] | None = None
        self._progress: CycleProgress | None = None
        self._stop_requested = False
        self._last_input_tokens: int | None = None

    # -- lifecycle --------------------------------------------------------

    def start(self) -> None:
        """Repair what a previous process left and pick up unanswered messages."""
        for notice in recover_crashed_cycles(self.session):
            self.listener.on_notice(notice)
        if self.session.staged():
            self._ensure_running("restart")

    async def close(self) -> None:
        """Stop any running cycle (its history repaired) before the process exits."""
        if self._task and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- the person's side ------------------------------------------------

    def submit(self, text: str, *, channel: str = "terminal", sender: str | None = None) -> Turn:
        """Take a message from the person. It is stored before this returns."""
        new = NewTurn(TurnKind.USER, text, channel=channel, sender=sender)
        turn = self.session.stage(new)
        self._ensure_running("user")
        return turn

    async def stop(self) -> bool:
        """Stop the current cycle; False if there was none."""
        task = self._task
        if task is None or task.done() or self._progress is None:
            return False
        self._stop_requested = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(task)
        return True

    async def idle(self) -> None:
        """Wait until no cycle runs and no message waits."""
        while self._task and not self._task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    def status(self) -> AgentStatus:
        prompt = estimate_tokens(self.cycle.system_prompt())
        return AgentStatus(
            busy=self.busy,
            context_tokens=prompt + self.session.tokens(),
            context_window=self.context_window,
            session_turns=len(self.session),
            waiting_messages=len(self.session.staged()),
            last_input_tokens=self._last_input_tokens,
            save_point_id=self.session.save_point_id,
        )

    # -- driving cycles ---------------------------------------------------

    def _ensure_running(self, origin: str) -> None:
        if not self.busy:
            self._task = asyncio.get_running_loop().create_task(self._drive(origin))

    async def _drive(self, origin: str) -> None:
        """Run cycles while messages wait."""
        while staged := self.session.staged():
            self.session.admit(staged)
            await self._one_cycle(origin)
            origin = "user"
        self.listener.on_idle()

    async def _one_cycle(self, origin: str) -> None:
        store = self.session.store
        cycle_id = store.open_cycle(origin)
        progress = self._progress = CycleProgress(cycle_id)
        self.listener.on_cycle_start(cycle_id, origin)
        outcome, error = "failed", None
        try:
            outcome = await self.cycle.run(progress, self.listener)
        except asyncio.CancelledError:
            if not self._stop_requested:
                self._repair(progress, "the agent was shut down", stopped=False)
                store.close_cycle(cycle_id, "shutdown")
                self.listener.on_cycle_end(cycle_id, "shutdown", None)
                raise
            outcome = "stopped"
            self._repair(progress, "the person stopped the cycle", stopped=True)
        except ProviderError as exc:
            error = str(exc)
            self._repair(progress, "the model request failed", stopped=False)
        except Exception as exc:  # a bug of ours: logged in full, told plainly
            log.exception("cycle %s failed", cycle_id)
            error = f"internal error ({type(exc).__name__}: {exc}); see the log for details"
            self._repair(progress, "of an internal error", stopped=False)
        finally:
            self._stop_requested = False
            self._progress = None
            if progress.usage:
                self._last_input_tokens = progress.usage.input_tokens
        store.close_cycle(cycle_id, str(outcome))
        self.listener.on_cycle_end(cycle_id, str(outcome), error)

    def _repair(self, progress: CycleProgress, why: str, *, stopped: bool) -> None:
        keep_partial_text(self.session, progress, in_context=stopped)
        answer_unfinished(self.session, progress, why)
        if stopped:
            self.session.append(
                NewTurn(
                    TurnKind.NOTE,
                    "The person stopped you here. Wait for what they say next.",
                    cycle_id=progress.cycle_id,
                    flags=Flag.SYNTHETIC,
                )
            )
