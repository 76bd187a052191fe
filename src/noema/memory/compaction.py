"""Compaction: when the session grows too large, its oldest block becomes a save point.

The `Compactor` runs in the background. The shell calls `maybe_start()` after
each cycle; if the context passed its threshold, a task selects the oldest
block, asks the chronicler for a save point, validates it (retrying with the
failures named) and, only if it is valid, swaps block and previous save
point for it in one transaction. The conversation goes on meanwhile: turns
that arrive while the chronicler writes are never part of the block and
stay in the session.

Nothing is written before that final transaction, so a process that dies
mid-compaction leaves the session exactly as it was, and the next process
simply compacts again. A failed compaction is recorded as a rejected save
point, and the next try waits until the conversation has moved on a little,
which is read from the store, so it holds across restarts as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from ..providers.base import ProviderError
from ..providers.traffic import Preempted
from . import savepoints
from .chronicler import Chronicler, ChronicleRequest, Rejection, answer_room, protocol_tokens
from .pruning import context_cost, prune
from .render import MESSAGE_CHARS_FACTOR, render_turn
from .savepoints import AttemptRecord, Report, SavePoint, Status
from .selection import Block, select_block
from .session import Session
from .settings import MemorySettings
from .support import Evidence, Support
from .tokens import estimate_tokens
from .turns import Turn
from .validator import Verdict, citable, validate

if TYPE_CHECKING:
    from .embeddings import Meaning

log = logging.getLogger(__name__)

# The newest turns kept raw take at most this share of the room the window
# leaves for the conversation (and at least two turns): a fixed count of
# turns would fill a small window by itself and leave nothing to compact.
KEEP_RECENT_SHARE = 0.3
# A save point rides in every request's system prompt: it may take at most
# this share of the reasoning model's window. The chronicler is told the bound
# only when it is tight (a large window leaves it free).
SAVE_POINT_SHARE = 0.15
SAVE_POINT_FREE_WORDS = 1_500
WORDS_PER_TOKEN = 0.75
# Prose runs about four characters a token; three keeps a cut turn inside its
# share of the chronicler's room even when its text is denser than prose.
CHARS_PER_TOKEN_LOW = 3
# Below this a tool result would say nothing but that it was cut.
MIN_RESULT_CHARS = 60
# An attempt is sized to this share of the time it may take (speeds vary on a
# shared machine), and its answer to this share of that time at most.
TIME_MARGIN = 0.8
ANSWER_TIME_SHARE = 0.6
# Fewer tokens than this could not hold a State and a Journey at all.
MIN_ANSWER_TOKENS = 160


NO_BLOCK_YET = "no block can be compacted yet"


@dataclass(frozen=True, slots=True)
class Sizing:
    """What one chronicler attempt may read (tokens of prompt; None: as much as
    the window allows) and write (tokens of answer)."""

    read: int | None
    answer: int


@dataclass(frozen=True, slots=True)
class Draft:
    """The outcome of writing one save point: the last verdict and every attempt."""

    verdict: Verdict | None  # None when the chronicler could not be reached
    attempts: tuple[AttemptRecord, ...]
    error: str | None = None
    block: tuple[Turn, ...] = ()  # the turns the last attempt narrated (a retry may take fewer)

    @property
    def ok(self) -> bool:
        return self.verdict is not None and self.verdict.ok


class CompactionListener:
    """Hears what a compaction does, for display. Every method is optional."""

    def on_compaction_start(self, block: Block, reason: str) -> None: ...
    def on_attempt_start(self, number: int, of: int, turns: int, answer_tokens: int) -> None:
        """Attempt `number` of `of` begins, over `turns` turns, asking for at most
        `answer_tokens`."""
    def on_attempt(self, number: int, verdict: Verdict) -> None: ...
    def on_attempt_failed(self, number: int, why: str) -> None:
        """Attempt `number` gave no text to judge (it ran out of time)."""
    def on_waiting(self, why: str) -> None:
        """The attempt waits its turn: the person's reply goes first."""
    def on_compaction_end(self, outcome: Outcome) -> None: ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a compaction ended."""

    status: str  # "accepted", "rejected", "abandoned" (the session moved under it), "nothing"
    save_point: SavePoint | None = None
    reason: str = ""


# What a retry may change: the request (a smaller block, advice) and the answer's size.
Reshape = Callable[[int, ChronicleRequest, Sequence[AttemptRecord]], ChronicleRequest]
TOO_SLOW = "too_slow"


async def _written(chronicler: Chronicler, request: ChronicleRequest, rejections: list[Rejection],
                   *, input_fraction: float, answer_tokens: int | None, attempt_s: float | None,
                   listener: CompactionListener) -> tuple[str, float]:
    """One attempt's text and the seconds it took. A request the person's reply
    cut short is asked again once the person's side is quiet; only the try that
    ran to its end (or out of time) is counted."""
    while True:
        await chronicler.wait_turn()  # waiting for the person is not the attempt's time
        started = time.perf_counter()
        try:
            async with asyncio.timeout(attempt_s):
                text = await chronicler.write(request, rejections, input_fraction=input_fraction,
                                              max_tokens=answer_tokens)
            return text, time.perf_counter() - started
        except Preempted:
            listener.on_waiting("the person's reply goes first")
            await chronicler.wait_turn()


async def draft_save_point(
    chronicler: Chronicler,
    request: ChronicleRequest,
    *,
    retries: int,
    min_coverage: float = 0.0,
    listener: CompactionListener | None = None,
    input_fraction: float = 0.5,
    evidence: Evidence | None = None,
    attempt_s: float | None = None,
    answer_tokens: Callable[[], int | None] | None = None,
    reshape: Reshape | None = None,
) -> Draft:
    """Ask for a save point until one is valid or the retries run out.

    Each attempt is stopped after `attempt_s` seconds (None: no limit) and asks
    for at most `answer_tokens()` tokens, asked anew each time because the
    chronicler's speed is learnt as it goes. A retry never repeats a request
    unchanged: it carries the failures of the attempt before, and `reshape`
    may give it a smaller block (the failures then travel as advice).
    `evidence` is where the support check finds the cited turns beyond the
    block and the vectors (without it: the block's turns, on words alone).
    """
    heard = listener or CompactionListener()
    rejections: list[Rejection] = []
    attempts: list[AttemptRecord] = []
    verdict: Verdict | None = None
    tries = retries + 1
    for number in range(1, tries + 1):
        if number > 1 and reshape is not None:
            reshaped = reshape(number, request, attempts)
            if reshaped.block != request.block:
                rejections.clear()  # their text narrates other turns
            request = reshaped
        answer = answer_tokens() if answer_tokens is not None else None
        heard.on_attempt_start(number, tries, len(request.block), answer or 0)
        try:
            text, spent = await _written(chronicler, request, rejections,
                                         input_fraction=input_fraction, answer_tokens=answer,
                                         attempt_s=attempt_s, listener=heard)
        except TimeoutError:
            why = (f"the attempt was stopped after {attempt_s:.0f} s (the time one attempt may "
                   "take); the next one reads fewer turns and writes less")
            heard.on_attempt_failed(number, why)
            attempts.append(AttemptRecord(number=number, failures=((TOO_SLOW, why),), chars=0,
                                          chronicler_s=round(attempt_s or 0.0, 3), validator_ms=0.0,
                                          turns=len(request.block), asked_tokens=answer or 0))
            continue
        except ProviderError as exc:
            return Draft(verdict, tuple(attempts), f"the chronicler failed: {exc}", request.block)
        # The store and the embedding model are read off the event loop.
        gathered = (await asyncio.to_thread(evidence.gather, text, request.block)
                    if evidence else None)
        verdict = validate(
            text,
            allowed=request.citable,
            block=request.block,
            min_journey_words=request.min_journey_words,
            min_coverage=min_coverage,
            sources=gathered.sources if gathered else None,
            clause_vectors=gathered.clause_vectors if gathered else None,
            language=request.language,
        )
        if gathered is not None and gathered.note:
            verdict = dataclasses.replace(verdict, notes=(*verdict.notes, gathered.note))
        heard.on_attempt(number, verdict)
        attempts.append(AttemptRecord(
            number=number,
            failures=tuple((f.code, f.message) for f in verdict.failures),
            chars=len(verdict.text),
            chronicler_s=round(spent, 3),
            validator_ms=round(verdict.seconds * 1000, 3),
            text="" if verdict.ok else text,
            support_ms=round(gathered.seconds * 1000, 3) if gathered else 0.0,
            turns=len(request.block),
            asked_tokens=answer or 0,
            structured=chronicler.last_structured,
        ))
        if verdict.ok:
            break
        rejections.append(Rejection(text, verdict.failures))
    error = None
    if verdict is None and attempts:  # every attempt ran out of time: nothing to judge
        error = f"every attempt ran out of time ({attempt_s or 0:.0f} s each)"
    return Draft(verdict, tuple(attempts), error, request.block)


def make_report(
    draft: Draft, *, chronicler: str, language: str, session_last: int | None = None
) -> Report:
    """The report stored with a save point."""
    verdict = draft.verdict
    return Report(
        cited=verdict.cited if verdict else (),
        covered=verdict.covered if verdict else 0,
        coverable=verdict.coverable if verdict else 0,
        chars=len(verdict.text) if verdict else 0,
        words=len(verdict.text.split()) if verdict else 0,
        tokens=verdict.tokens if verdict else 0,
        retries=max(len(draft.attempts) - 1, 0),
        chronicler=chronicler,
        language=language,
        attempts=draft.attempts,
        error=draft.error,
        notes=verdict.notes if verdict else (),
        session_last=session_last,
        **_support_counts(verdict),
    )


def _support_counts(verdict: Verdict | None) -> dict[str, int]:
    support = verdict.support if verdict else None
    if support is None:
        return {}
    return {"judged": len(support.judgements), "supported": support.count(Support.SUPPORTED),
            "weak": support.count(Support.WEAK), "unsupported": support.count(Support.UNSUPPORTED),
            "words_only": support.words_only}


class Compactor:
    """Compacts one session in the background, one compaction at a time."""

    def __init__(
        self,
        session: Session,
        chronicler: Chronicler,
        settings: MemorySettings,
        *,
        context_window: int,
        language: str = "en",
        agent_name: str = "the agent",
        overhead_tokens: Callable[[], int] | None = None,
        zone: ZoneInfo | None = None,
        listener: CompactionListener | None = None,
        meaning: Callable[[], Meaning | None] | None = None,
    ) -> None:
        """`overhead_tokens` counts what a request carries besides the session's
        turns: the system prompt with the chronicle, the tool descriptions, the
        answer reserve and the opening note (by default only the chronicle).
        `meaning` gives the search's embeddings, if any, whose vectors the
        support check of citations reads."""
        self.session = session
        self.store = session.store
        self.chronicler = chronicler
        self.settings = settings
        self.context_window = context_window
        self.language = settings.language_or(language)
        self.agent_name = agent_name
        self.overhead_tokens = overhead_tokens
        self.zone = zone
        self.listener = listener or CompactionListener()
        self.meaning = meaning
        self._task: asyncio.Task[Outcome] | None = None
        self._speed_recalled = False

    # -- deciding ----------------------------------------------------------

    def overhead(self) -> int:
        """What a request carries besides the session's turns."""
        if self.overhead_tokens is not None:
            return self.overhead_tokens()
        current = self.current_save_point()
        return estimate_tokens(current.text) if current else 0

    def context_tokens(self) -> int:
        """What the next request weighs: everything it carries besides the
        session's turns, and the turns."""
        return self.overhead() + sum(context_cost(t) for t in self.session.turns)

    def turn_room(self) -> int:
        """Tokens the window leaves for the session's turns."""
        return max(self.context_window - self.overhead(), 0)

    def keep_recent(self) -> int:
        """How many of the newest turns stay raw: the configured count, fewer
        when they would take more than their share of the room."""
        share = int(self.turn_room() * KEEP_RECENT_SHARE)
        kept, tokens = 0, 0
        for turn in reversed(self.session.turns):
            if kept >= self.settings.keep_recent_turns:
                break
            tokens += context_cost(turn)
            if kept >= 2 and tokens > share:
                break
            kept += 1
        return kept

    def due(self) -> str | None:
        """Why the session should be compacted now, or None.

        The threshold is a share of the room the window leaves for the turns,
        so a request never has to leave turns out while a block could have
        become a save point."""
        turns = len(self.session)
        if turns < self.keep_recent() + self.settings.min_block_turns:
            return None
        if self._waiting_after_failure():
            return None
        room = self.turn_room()
        held = sum(context_cost(t) for t in self.session.turns)
        threshold = int(room * self.settings.trigger_fraction)
        if held > threshold:
            return (f"the turns take about {held:,} tokens, past {threshold:,} (the window "
                    f"leaves {room:,} for them)")
        if turns >= self.settings.trigger_turns:
            return f"the session holds {turns} turns (the limit is {self.settings.trigger_turns})"
        return None

    def _waiting_after_failure(self) -> bool:
        """After a failed compaction the next waits for the conversation to move
        on, unless the turns no longer fit the room the window leaves them: the
        next request would then leave turns out, and a smaller block is worth
        trying at once."""
        latest = savepoints.latest(self.store)
        if latest is None or latest.accepted or not self.session.turns:
            return False
        smaller = self._turns_after_failure() < self._tried_turns(latest)
        if smaller and sum(context_cost(t) for t in self.session.turns) > self.turn_room():
            return False
        newest = self.session.turns[-1].id
        failed_at = latest.report.session_last or latest.last_turn
        return newest < failed_at + self.settings.retry_after_turns

    def _turns_after_failure(self) -> int:
        """The most turns the next block may take: half the block that just
        failed (a rejected block is never asked for again unchanged)."""
        latest = savepoints.latest(self.store)
        if latest is None or latest.accepted:
            return self.settings.max_block_turns
        return max(self._tried_turns(latest) // 2, self.settings.min_block_turns)

    @staticmethod
    def _tried_turns(failed: SavePoint) -> int:
        """The fewest turns an attempt of a failed compaction narrated."""
        return min((a.turns for a in failed.report.attempts if a.turns),
                   default=0) or len(failed.turn_ids)

    def current_save_point(self) -> SavePoint | None:
        sp_id = self.session.save_point_id
        return savepoints.get(self.store, sp_id) if sp_id is not None else None

    # -- running -----------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    def prune(self) -> list[int]:
        """Prune bulky old tool results from working memory."""
        return prune(
            self.session,
            older_than=self.settings.prune_after_turns,
            min_tokens=self.settings.prune_min_tokens,
        )

    def maybe_start(self, *, prune: bool = True) -> asyncio.Task[Outcome] | None:
        """Prune, then start a background compaction if one is due and none runs.

        Between the steps of a cycle (`prune=False`) nothing is pruned: the
        event or result the model is acting on stays whole until it answers."""
        if self.busy:
            return None
        if prune:
            self.prune()
        reason = self.due()
        if reason is None:
            return None
        self._task = asyncio.get_running_loop().create_task(self.compact(reason))
        self._task.add_done_callback(_log_failure)
        return self._task

    async def close(self) -> None:
        """Cancel a running compaction; nothing of it was written."""
        if self._task and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def next_block(self) -> Block | None:
        """The block a compaction started now would take (for display and previews)."""
        return self._select(self.current_save_point())

    async def compact(self, reason: str = "asked") -> Outcome:
        """Select, chronicle, validate and, if valid, replace. Safe to cancel."""
        previous = self.current_save_point()
        block = self._select(previous)
        if block is None:
            outcome = Outcome("nothing", reason=self._why_no_block(previous))
            self.listener.on_compaction_end(outcome)
            return outcome
        self.listener.on_compaction_start(block, reason)
        draft = await draft_save_point(
            self.chronicler,
            self._request(previous, block),
            retries=self.settings.retries,
            min_coverage=self.settings.min_coverage,
            listener=self.listener,
            input_fraction=self.settings.chronicler_input_fraction,
            evidence=self.evidence(),
            attempt_s=self.settings.chronicler_attempt_s,
            answer_tokens=lambda: self.sizing(previous).answer,
            reshape=lambda number, request, attempts: self._reshape(previous, number, request,
                                                                    attempts),
        )
        outcome = self._conclude(previous, Block(draft.block) if draft.block else block, draft)
        self.listener.on_compaction_end(outcome)
        return outcome

    def evidence(self) -> Evidence:
        """Where the support check reads cited turns, and vectors when the search has them."""
        meaning = self.meaning() if self.meaning is not None else None
        return Evidence(
            turns=self.store.get_many,
            vectors=meaning.table.get if meaning is not None else None,
            embed=meaning.embedder.embed if meaning is not None else None,
            agent_name=self.agent_name,
            language=self.language,
        )

    def _why_no_block(self, previous: SavePoint | None) -> str:
        """Why no block can be compacted: too few turns yet, or a chronicler too
        slow to read its instructions and a block in the time an attempt may take."""
        readable = self.sizing(previous).read
        if readable is not None and readable < protocol_tokens(self.language, self.agent_name) * 2:
            return (f"the chronicler's server is too slow to write a save point within "
                    f"{self.settings.chronicler_attempt_s:.0f} s ({self.chronicler.speed.describe()}"
                    "); raise memory.chronicler_attempt_s or choose a faster chronicler model")
        return NO_BLOCK_YET

    def _reshape(self, previous: SavePoint | None, number: int, request: ChronicleRequest,
                 attempts: Sequence[AttemptRecord]) -> ChronicleRequest:
        """The request of attempt `number`: the same block with the failures
        named, or, after an attempt that ran out of time and for the last try
        after rejections, about half the block (the failures as advice)."""
        last = attempts[-1] if attempts else None
        if last is None:
            return request
        too_slow = any(code == TOO_SLOW for code, _ in last.failures)
        last_try = number == self.settings.retries + 1 and number > 2
        if not (too_slow or last_try):
            return request
        block = request.block
        cost = sum(self._render_cost(t, request.result_chars) for t in block)
        fits = min(cost // 2, max(self.chronicler_room(previous), 0))
        smaller = select_block(
            block, keep_recent=0, target_tokens=fits, max_tokens=fits,
            min_turns=min(self.settings.min_block_turns, len(block)),
            max_turns=max(len(block) // 2, 1),
            cost=lambda t: self._render_cost(t, request.result_chars),
        )
        if smaller is None or len(smaller.turns) >= len(block):
            return request
        advice = tuple(dict.fromkeys(m for code, m in last.failures if code != TOO_SLOW))
        return self._request(previous, smaller, advice=advice[:4])

    def sizing(self, previous: SavePoint | None) -> Sizing:
        """What one attempt may read and write so that it stays within
        `chronicler_attempt_s` at the speed the chronicler's endpoint was
        measured at; its window alone decides while the speed is unknown."""
        window = self.chronicler.context_window
        answer = answer_room(window, self.settings.chronicler_input_fraction)
        speed = self.chronicler.speed
        if not speed.write:
            self._recall_speed()
        if not speed.write:
            return Sizing(None, answer)
        budget = self.settings.chronicler_attempt_s * TIME_MARGIN
        answer = min(answer, max(int(speed.write * budget * ANSWER_TIME_SHARE), MIN_ANSWER_TOKENS))
        if not speed.read:
            return Sizing(None, answer)
        reading = budget - answer / speed.write
        return Sizing(max(int(speed.read * reading), 0), answer)

    def _recall_speed(self) -> None:
        """After a restart, a first guess from the attempts the store kept: the
        characters each wrote over its whole time (reading included, so the
        guess errs slow) until this process measures the server itself."""
        if self._speed_recalled:
            return
        self._speed_recalled = True
        written = [(a.chars / 4, a.chronicler_s) for sp in savepoints.listing(self.store)[:3]
                   for a in sp.report.attempts if a.chars and a.chronicler_s > 0]
        if written:
            tokens, seconds = sum(t for t, _ in written), sum(s for _, s in written)
            self.chronicler.speed.write = tokens / seconds

    def chronicler_room(self, previous: SavePoint | None) -> int:
        """Tokens of the block the chronicler can read: its window less the
        answer it writes, its instructions, the previous save point and the
        citable IDs (a few tokens a range), and no more than it can read in
        the time an attempt may take."""
        window = self.chronicler.context_window
        room = window - answer_room(window, self.settings.chronicler_input_fraction)
        readable = self.sizing(previous).read
        if readable is not None:
            room = min(room, readable)
        room -= protocol_tokens(self.language, self.agent_name)
        if previous is not None:
            room -= estimate_tokens(previous.text) + 2 * len(previous.report.cited)
        return room

    def _select(self, previous: SavePoint | None) -> Block | None:
        settings = self.settings
        turns = self.session.turns
        total = sum(context_cost(t) for t in turns)
        # Enough to bring the turns well under the threshold again; a share of
        # the session, as configured, when that is more.
        below = total - int(self.turn_room() * settings.trigger_fraction * 0.5)
        chars = self.result_chars(previous)
        return select_block(
            turns,
            keep_recent=self.keep_recent(),
            target_tokens=max(int(total * settings.block_fraction), below),
            max_tokens=max(self.chronicler_room(previous), 0),
            min_turns=settings.min_block_turns,
            max_turns=min(settings.max_block_turns, self._turns_after_failure()),
            open_cycles=frozenset(self.store.open_cycles()),
            cost=lambda t: self._render_cost(t, chars),
        )

    def result_chars(self, previous: SavePoint | None = None) -> int:
        """How long a tool result may be as the chronicler reads it (a message
        may be `MESSAGE_CHARS_FACTOR` times longer): the configured length, less
        when the chronicler's window is small. A message larger than the room
        the smallest block may give one turn would never fit any block, and
        the session could then never be compacted at all."""
        per_turn = max(self.chronicler_room(previous), 0) // max(self.settings.min_block_turns, 1)
        fits = per_turn * CHARS_PER_TOKEN_LOW // MESSAGE_CHARS_FACTOR
        return max(min(self.settings.render_result_chars, fits), MIN_RESULT_CHARS)

    def _render_cost(self, turn: Turn, result_chars: int) -> int:
        return estimate_tokens(render_turn(turn, result_chars=result_chars))

    def _request(self, previous: SavePoint | None, block: Block | tuple[Turn, ...],
                 *, advice: tuple[str, ...] = ()) -> ChronicleRequest:
        turns = block.turns if isinstance(block, Block) else block
        allowed = citable(
            previous.text if previous else None,
            turns,
            lambda ids: (t.id for t in self.store.get_many(ids)),
        )
        return ChronicleRequest(
            previous_text=previous.text if previous else None,
            block=turns,
            citable=allowed,
            language=self.language,
            agent_name=self.agent_name,
            result_chars=self.result_chars(previous),
            min_journey_words=self.settings.min_journey_words,
            zone=self.zone,
            max_words=self.save_point_words(),
            advice=advice,
        )

    def save_point_words(self) -> int | None:
        """The most words a save point may have to fit the windows, or None when
        that is no real bound: its share of the reasoning model's window, and
        what the chronicler's answer room can hold."""
        tokens = min(int(self.context_window * SAVE_POINT_SHARE),
                     self.sizing(self.current_save_point()).answer)
        words = int(tokens * WORDS_PER_TOKEN)
        return words if words < SAVE_POINT_FREE_WORDS else None

    def _conclude(self, previous: SavePoint | None, block: Block, draft: Draft) -> Outcome:
        newest = self.session.turns[-1].id if self.session.turns else None
        report = make_report(draft, chronicler=self.chronicler.label, language=self.language,
                             session_last=newest)
        previous_id = previous.id if previous else None
        if not draft.ok:
            text = draft.verdict.text if draft.verdict else ""
            rejected = savepoints.record(
                self.store, status=Status.REJECTED, previous=previous_id,
                turn_ids=block.ids, text=text, report=report,
            )
            last = draft.attempts[-1].failures if draft.attempts else ()
            why = draft.error or "; ".join(dict.fromkeys(code for code, _ in last))
            return Outcome("rejected", rejected, why)
        assert draft.verdict is not None
        with self.store.transaction():
            # The session may have moved while the chronicler wrote: only
            # swap if every block turn and the previous save point are still
            # what the chronicle was written from.
            present = set(self.session.ids())
            if self.session.save_point_id != previous_id or not set(block.ids) <= present:
                return Outcome("abandoned", reason="the session changed while the chronicler wrote")
            accepted = savepoints.record(
                self.store, status=Status.ACCEPTED, previous=previous_id,
                turn_ids=block.ids, text=draft.verdict.text, report=report,
            )
            self.session.replace_with_save_point(block.ids, accepted.id)
        return Outcome("accepted", accepted, f"{len(block.ids)} turns became save point {accepted.id}")


def _log_failure(task: asyncio.Task[Outcome]) -> None:
    # A background task has nobody to raise to: the log keeps the traceback,
    # and its one line (what a terminal shows) says what failed and that the
    # conversation is not affected.
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        detail = " ".join(str(error).split())[:160]
        log.error("compaction failed (%s: %s); the conversation goes on uncompacted and it "
                  "is tried again after the next reply", type(error).__name__, detail,
                  exc_info=error)
