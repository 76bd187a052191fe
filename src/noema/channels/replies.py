"""Answers go back where the question came from.

A person's message that arrived by mail is answered by mail, in its thread;
one from Telegram, in that chat. The rule, over the stored turns: a cycle's
*answer* is its last text when nothing was called after it; the first answer
after a person's message from a channel is sent to that channel, once (to the
newest such message of each channel, when several came before it). Later
answers (a cycle an alarm started, say) are not sent on their own: the model
sends those with the channel's tools, as its prompt explains.

The rule reads the turn store, not the session, so it holds across a restart:
on start the router offers every recent pair again and each channel skips an
answer it already sent (it keeps its own record, keyed by the answer's ID) or
a question it did not take itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..memory.store import TurnStore
from ..memory.turns import Flag, Turn, TurnKind
from .base import Channel

log = logging.getLogger(__name__)

RECENT = 2000  # turns looked at for a question still owed its answer
_NOT_SAID = Flag.DISCARDED | Flag.INTERRUPTED


def answered_pairs(turns: Sequence[Turn], channels: Iterable[str]) -> list[tuple[Turn, Turn]]:
    """(question, answer) for each person's message from one of `channels` and
    the first answer after it, in order. `turns` are consecutive, oldest first."""
    wanted = set(channels)
    finals: dict[int, Turn] = {}  # cycle → its last text, while nothing follows it
    for turn in turns:
        if turn.cycle_id is None:
            continue
        if turn.kind is TurnKind.ASSISTANT and turn.content.strip() and not turn.flags & _NOT_SAID:
            finals[turn.cycle_id] = turn
        elif turn.kind is TurnKind.TOOL_CALL and not turn.flags & Flag.DISCARDED:
            finals.pop(turn.cycle_id, None)  # the cycle went on after that text
    answers = sorted(finals.values(), key=lambda t: t.id)
    pairs: list[tuple[Turn, Turn]] = []
    waiting: dict[str, Turn] = {}  # channel → its newest question since the last answer
    at = 0
    for turn in [*turns, None]:
        while at < len(answers) and (turn is None or answers[at].id < turn.id):
            pairs += [(question, answers[at]) for question in waiting.values()]
            waiting.clear()
            at += 1
        if turn is not None and turn.kind is TurnKind.USER and turn.channel in wanted:
            waiting[turn.channel] = turn
    pairs.sort(key=lambda pair: pair[0].id)
    return pairs


class ReplyRouter:
    """Hands each owed answer to its channel when a cycle ends."""

    def __init__(self, store: TurnStore, channels: Mapping[str, Channel],
                 notice: Callable[[str], None]) -> None:
        self.store = store
        self.channels = dict(channels)
        self._notice = notice
        self._tasks: set[asyncio.Task[None]] = set()
        self._seen = 0  # the newest answer handed to a channel by this process

    def _recent(self) -> list[Turn]:
        last = self.store.last_id()
        return self.store.range(max(1, last - RECENT + 1), last) if last else []

    def catch_up(self) -> None:
        """Offer every recent pair (after a restart some answer may be owed)."""
        self.after_cycle()

    def after_cycle(self) -> None:
        """Call when a cycle ends: its answer, if it is one owed, goes out."""
        if not self.channels:
            return
        pairs = [(q, a) for q, a in answered_pairs(self._recent(), self.channels)
                 if a.id > self._seen]
        if pairs:
            self._seen = max(a.id for _, a in pairs)
            self._send(pairs)

    def _send(self, pairs: list[tuple[Turn, Turn]]) -> None:
        for question, answer in pairs:
            task = asyncio.get_running_loop().create_task(self._reply(question, answer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _reply(self, question: Turn, answer: Turn) -> None:
        channel = self.channels[question.channel or ""]
        try:
            await channel.reply(question, answer)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the answer is stored; the channel retries on the next start
            log.warning("answering turn %d by %s failed", question.id, channel.name,
                        exc_info=True)
            self._notice(f"the answer to your {channel.name} message could not be sent "
                         f"({type(exc).__name__}: {exc}); it is tried again on the next start")

    async def aclose(self) -> None:
        """Let answers being sent finish (briefly), then stop."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
