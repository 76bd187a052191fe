"""What compaction is doing, as the person should hear it.

A save point is written in the background, by a model that may take minutes
and may fail. `MemoryActivity` listens to the compactor and tells it three
ways: the log (every attempt, with its verdict), one notice when a save point
is begun and one when it is written or refused (with why, and that the raw
turns are kept), and `line()`, a short phrase for the status of the chats and
the memory page while it works or after it failed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from .compaction import NO_BLOCK_YET, CompactionListener, Outcome
from .selection import Block
from .validator import Verdict

log = logging.getLogger(__name__)

# A reason longer than this is cut for a status line or a notice (the log and
# the memory page keep it whole).
REASON_CHARS = 140


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


class MemoryActivity(CompactionListener):
    """The compactor's listener for people: the log, notices and a status line."""

    def __init__(self, say: Callable[[str], None] | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._say = say or (lambda text: None)
        self._clock = clock
        self.block: Block | None = None  # the block being written, while one is
        self.attempt = 0
        self.attempts = 0
        self.turns = 0
        self.waiting = False
        self.started = 0.0
        self.failure = ""  # why the last compaction failed, until one succeeds
        self._reasons: list[str] = []

    # -- the compactor's side ---------------------------------------------------

    def on_compaction_start(self, block: Block, reason: str) -> None:
        self.block, self.turns, self._reasons = block, len(block.turns), []
        self.attempt = self.attempts = 0
        self.started = self._clock()
        log.info("compaction: writing a save point of turns %d-%d (%s)", block.first, block.last,
                 reason)
        self._say(f"memory: writing a save point of turns {block.first}–{block.last} in the "
                  "background; the conversation goes on")

    def on_attempt_start(self, number: int, of: int, turns: int, answer_tokens: int) -> None:
        self.attempt, self.attempts, self.turns, self.waiting = number, of, turns, False
        log.info("compaction: attempt %d of %d over %d turns, asking for at most %s tokens",
                 number, of, turns, answer_tokens or "the window's")

    def on_attempt(self, number: int, verdict: Verdict) -> None:
        if verdict.ok:
            log.info("compaction: attempt %d accepted by the validator", number)
            return
        reasons = "; ".join(f.message for f in verdict.failures)
        self._reasons.append(verdict.failures[0].message if verdict.failures else "")
        log.warning("compaction: attempt %d rejected: %s", number, reasons)

    def on_attempt_failed(self, number: int, why: str) -> None:
        self._reasons.append(why)
        log.warning("compaction: attempt %d failed: %s", number, why)

    def on_waiting(self, why: str) -> None:
        self.waiting = True
        log.info("compaction: the attempt gave way and waits (%s)", why)

    def on_compaction_end(self, outcome: Outcome) -> None:
        block, self.block = self.block, None
        spent = self._clock() - self.started
        if outcome.status == "accepted" and outcome.save_point is not None:
            self.failure = ""
            sp = outcome.save_point
            log.info("compaction: save point %d written in %.0f s (turns %d-%d)", sp.id, spent,
                     sp.first_turn, sp.last_turn)
            self._say(f"memory: save point {sp.id} written; turns {sp.first_turn}–{sp.last_turn} "
                      "now live in it (each still readable by its number)")
        elif outcome.status == "rejected":
            why = self._reasons[-1] if self._reasons else outcome.reason
            self.failure = _short(why or outcome.reason)
            span = (f"turns {block.first}–{block.last}" if block is not None
                    else "the oldest turns")
            log.warning("compaction: no save point after %d attempt(s) in %.0f s (%s); the raw "
                        "turns stay in the session", self.attempt, spent, outcome.reason)
            self._say(f"memory: the save point for {span} was refused ({self.failure}); those "
                      "turns stay as they are and it is tried again later with fewer of them")
        elif outcome.status == "abandoned":
            log.info("compaction: abandoned (%s)", outcome.reason)
        elif outcome.status == "nothing" and outcome.reason != NO_BLOCK_YET:
            # Said once: the same reason after every reply would only be noise.
            if self.failure != _short(outcome.reason):
                self.failure = _short(outcome.reason)
                log.warning("compaction: no save point can be written: %s", outcome.reason)
                self._say(f"memory: no save point can be written: {outcome.reason}")

    # -- the person's side ----------------------------------------------------------

    @property
    def writing(self) -> bool:
        return self.block is not None

    def line(self) -> str:
        """A short phrase for a status: what is being written now, or why the
        last save point failed; empty when there is nothing to say."""
        if self.block is not None:
            attempt = f", attempt {self.attempt} of {self.attempts}" if self.attempt else ""
            waiting = ", waiting for your reply to finish" if self.waiting else ""
            turns = f"{self.turns} turn" + ("" if self.turns == 1 else "s")
            return f"writing a save point of {turns}{attempt}{waiting}"
        if self.failure:
            return f"no save point: {self.failure}; the raw turns are kept"
        return ""
