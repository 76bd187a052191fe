"""History repair after a cycle is cut short: cancelled, stopped or crashed.

Each function leaves the session valid for both provider protocols (every
call answered once, in order) and keeps in the store, flagged, whatever left
the context. What a cut-short call did is said plainly: a tool that never
started had no effect; a read-only tool has none; a side-effect tool reports
its own effect when it can (`ToolContext.interruption`), or is flagged as
uncertain so the model checks before retrying.
"""

from __future__ import annotations

import time

from ..memory.session import Session
from ..memory.turns import Flag, NewTurn, Turn, TurnKind
from .cycle import CycleProgress

CANCELLED_TOOL = "haveCurrentOperationsBeenCancelled"

def keep_partial_text(
    session: Session, progress: CycleProgress, *, in_context: bool = False
) -> Turn | None:
    """Store streamed-but-unfinished assistant text, flagged interrupted.

    It stays in the context only when the person saw it and stopped it (so
    the model knows what it had said); otherwise it is flagged discarded.
    """
    text = "".join(progress.partial)
    progress.partial.clear()
    if not text.strip():
        return None
    if in_context:  # read back later, it is the words that led as much as the model's
        turn = session.append(
            NewTurn(TurnKind.ASSISTANT, text, cycle_id=progress.cycle_id, flags=Flag.INTERRUPTED,
                    sources=progress.lead)
        )
        progress.stored.append(turn.id)
        return turn
    return session.store.append(
        NewTurn(
            TurnKind.ASSISTANT,
            text,
            cycle_id=progress.cycle_id,
            flags=Flag.DISCARDED | Flag.INTERRUPTED,
            sources=progress.lead,
        )
    )


def discard_cycle(session: Session, progress: CycleProgress) -> None:
    """Safe cancellation: the cycle's response leaves the context.

    The input that started the cycle stays; everything the cycle wrote (text,
    read-only calls and their results) is flagged discarded in the store.
    """
    keep_partial_text(session, progress)
    session.remove(progress.stored, Flag.DISCARDED)
    progress.stored.clear()
    progress.unanswered.clear()


def answer_unfinished(session: Session, progress: CycleProgress, why: str) -> list[Turn]:
    """Give each stored-but-unanswered call a result that tells what happened.

    `why` completes "... because {why}", e.g. "the person stopped the cycle".
    A cancelled tool's account of its effect comes from its ToolContext.
    """
    keep_partial_text(session, progress)
    news = []
    for call in progress.unanswered:
        if progress.running is not None and call.id == progress.running.id:
            news.append(_interrupted_result(call, progress, why))
        else:
            news.append(
                NewTurn(
                    TurnKind.TOOL_RESULT,
                    f"Not run: this call was cancelled before it started because {why}. "
                    "It had no effect.",
                    tool_name=call.tool_name,
                    call_id=call.call_id,
                    cycle_id=progress.cycle_id,
                    flags=Flag.ERROR | Flag.SYNTHETIC,
                )
            )
    stored = session.append_all(news)
    progress.stored.extend(t.id for t in stored)
    progress.unanswered.clear()
    progress.running = progress.running_context = None
    return stored


def _interrupted_result(call: Turn, progress: CycleProgress, why: str) -> NewTurn:
    reported = list(progress.running_context.interruption) if progress.running_context else []
    if not progress.running_began and not reported:
        text = (
            f"Not run: this call was cancelled before it started because {why}. "
            "It had no effect."
        )
    elif reported:
        text = f"Interrupted because {why}. " + " ".join(reported)
    elif progress.running_side_effects:
        text = (
            f"Interrupted while running because {why}. It may have taken effect in part: "
            "check the current state before doing it again."
        )
    else:
        text = f"Interrupted because {why} before it finished. It is read-only: no effect."
    return NewTurn(
        TurnKind.TOOL_RESULT,
        text,
        tool_name=call.tool_name,
        call_id=call.call_id,
        cycle_id=progress.cycle_id,
        flags=Flag.ERROR | Flag.SYNTHETIC | Flag.INTERRUPTED,
    )


def close_leftovers(session: Session, why: str) -> int:
    """Write what the repair of a failed cycle could not (the disk was full, a
    page was damaged): every call in the session still without a result gets
    one, and every cycle still open in the store is closed, in one
    transaction. Run before anything else joins the history, so each result
    stays next to its call. Returns how many calls it answered."""
    answered = {t.call_id for t in session.turns if t.is_result}
    news = [
        NewTurn(
            TurnKind.TOOL_RESULT,
            f"Did not complete: {why}. If it changes files or runs commands, check the "
            "current state before doing it again.",
            tool_name=call.tool_name,
            call_id=call.call_id,
            cycle_id=call.cycle_id,
            flags=Flag.ERROR | Flag.SYNTHETIC | Flag.INTERRUPTED,
        )
        for call in session.turns if call.is_call and call.call_id not in answered
    ]
    with session.transaction():
        session.append_all(news)
        for cycle_id in session.store.open_cycles():
            session.store.close_cycle(cycle_id, "failed")
    return len(news)


def cancellation_notice(cycle_id: int | None, call_id: str) -> list[NewTurn]:
    """The synthetic `haveCurrentOperationsBeenCancelled()` call and its `true`."""
    return [
        NewTurn(
            TurnKind.TOOL_CALL,
            tool_name=CANCELLED_TOOL,
            call_id=call_id,
            arguments="{}",
            cycle_id=cycle_id,
            flags=Flag.SYNTHETIC,
        ),
        NewTurn(
            TurnKind.TOOL_RESULT,
            "true",
            tool_name=CANCELLED_TOOL,
            call_id=call_id,
            cycle_id=cycle_id,
            flags=Flag.SYNTHETIC,
        ),
    ]


def recover_crashed_cycles(session: Session) -> list[str]:
    """Close cycles a dead process left open; returns what to tell the person.

    Partial assistant text of a crashed cycle was never stored, so it is gone
    by construction; calls stored without a result get one saying they did
    not complete, and the model is told the cycle was cut short.
    """
    store = session.store
    told = []
    for cycle_id in store.open_cycles():
        answered = {t.call_id for t in session.turns if t.is_result}
        unanswered = [
            t for t in session.turns if t.is_call and t.cycle_id == cycle_id
            and t.call_id not in answered
        ]
        news = [
            NewTurn(
                TurnKind.TOOL_RESULT,
                "Did not complete: the agent stopped (crash or kill) while this call was "
                "pending. If it changes files or runs commands, check the current state "
                "before doing it again.",
                tool_name=call.tool_name,
                call_id=call.call_id,
                cycle_id=cycle_id,
                flags=Flag.ERROR | Flag.SYNTHETIC | Flag.INTERRUPTED,
            )
            for call in unanswered
        ]
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime())
        news.append(
            NewTurn(
                TurnKind.NOTE,
                f"The agent restarted at {when} after its previous cycle was cut short "
                f"(it had {len(unanswered)} unfinished tool call(s)). Anything you were "
                "writing when it stopped was lost; continue from here.",
                cycle_id=cycle_id,
                flags=Flag.SYNTHETIC,
            )
        )
        session.append_all(news)
        store.close_cycle(cycle_id, "crashed")
        told.append(
            f"The previous session ended in the middle of a reply (cycle {cycle_id}); "
            f"{len(unanswered)} unfinished tool call(s) were closed and nothing "
            "acknowledged was lost."
        )
    return told
