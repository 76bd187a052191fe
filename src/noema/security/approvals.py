"""Autonomy levels: which tool calls run on their own, which wait for the
person's yes, and which never run.

The level is read at call time, so a setting changed in the GUI applies to
the next call. `allow` is the person's level for the person's own requests:
while outside words lead the context (`ToolContext.lead`), or when a call's
arguments carry what only outside words said (`ToolContext.words`, see
`provenance.py`), a call with side effects is asked about whatever the level
says, and the question says whose words are the reason. An interface (chat, daemon, GUI) that can ask the person
attaches an Approver; with none attached, an `ask` call is refused with an
explanation rather than run unasked.

**Asked away.** An approver that finds nobody at the machine raises
`AskAway`: the question then goes to the person's own channels
(`security/away.py`), and the call does not wait inside the cycle. The
model gets at once a result saying which approval waits, where it was asked
and when it expires; the agent goes on with other events. When the person
answers, the same call runs again, with the same arguments and the same
`ToolContext`, past the question that was answered (and only that one),
and its outcome reaches the model as an event.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..memory.turns import Source, sources_union
from ..perception.untrusted import escape_invisible
from ..tools.errors import tidy
from ..tools.registry import Tool, ToolContext, ToolError, ToolResult
from .provenance import describe
from .settings import AutonomySettings, Level

log = logging.getLogger(__name__)
# A value is shown whole up to this size; past it, its head and its tail
# (where the dangerous end of a long command sits) with the middle counted.
_SHOWN_CHARS = 8000
_TAIL_CHARS = 2000


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the person is asked to approve."""

    tool: str
    arguments: str  # a readable summary, long values shortened
    reason: str  # why it asks, a sentence for the person: "because …"
    call_id: str = ""
    turn_id: int | None = None
    # Whose outside words led to the call or are in its arguments: the call's
    # outcome carries them (an outcome that repeats them is theirs too).
    sources: tuple[Source, ...] = ()


class Approver(Protocol):
    """Asks the person; True means go ahead. Interfaces implement this; one
    that finds nobody to ask at the machine raises `AskAway`."""

    async def __call__(self, request: ApprovalRequest) -> bool: ...


class AskAway(Exception):
    """Raised by an approver: nobody is at the machine, so the question goes
    to the person's own channels and the call waits there, not in the cycle.

    A question first asked at the machine, whose watchers all left, goes
    away as itself: `number` and `expires_at` (epoch seconds) are the ones
    it was asked with. Both None: a new question, numbered and timed there."""

    def __init__(self, number: int | None = None, expires_at: float | None = None) -> None:
        super().__init__()
        self.number = number
        self.expires_at = expires_at


@dataclass(frozen=True, slots=True)
class AwayTicket:
    """A question sent to the person's channels: what the model is told at once."""

    number: int
    where: str  # "on Telegram", "by mail to ana@example.org"
    expires: str  # when it expires, as the person's clock reads it


RunApproved = Callable[[], Awaitable[ToolResult]]


class AwayAsker(Protocol):
    """Sends a question to the person's channels and, once they allow it, runs
    `run` (the call, past this question) in the background."""

    async def post(self, request: ApprovalRequest, ctx: ToolContext, run: RunApproved, *,
                   number: int | None = None, expires_at: float | None = None) -> AwayTicket:
        """Ask (as approval `number`, expiring at `expires_at`, when it was
        asked before); ToolError when no channel of the person's can."""
        ...


class _WaitsAway(ToolError):
    """The question went away: the nearest guarded call turns this into the
    waiting result. Met anywhere else, it reads as a refusal."""

    def __init__(self, request: ApprovalRequest, away: AwayAsker | None,
                 asked: AskAway) -> None:
        super().__init__(
            f"{request.tool} needs the person's approval ({request.reason}); nobody is at "
            "the machine, and this call cannot wait for an answer from their channels, so "
            "it was not run. Tell the person what you wanted to do.")
        self.request = request
        self.away = away
        self.asked = asked  # its number and expiry, when it was asked at the machine first


# The questions the person answered yes to away, for the call being run again
# because of that yes: asking them again would ask for ever.
_ANSWERED: contextvars.ContextVar[frozenset[ApprovalRequest]] = contextvars.ContextVar(
    "approved away", default=frozenset())


def shown_plainly(text: str) -> tuple[str, bool]:
    """`text` with every invisible or direction-changing character written as
    a visible `⟨U+XXXX⟩` (lines kept), and whether there was any: a person
    asked to approve `r\u200bm -rf` or a name reversed by U+202E must see them."""
    shown = escape_invisible(text, keep_newlines=True, shown="⟨U+{:04X}⟩")
    return shown, shown != text


def summarize(arguments: dict[str, Any]) -> str:
    """Arguments as `name: value` lines: whole, or for a very long value its
    head and its tail with the size of the middle left out."""
    lines = []
    for name, value in arguments.items():
        if value is None:
            continue
        text = value if isinstance(value, str) else repr(value)
        if len(text) > _SHOWN_CHARS:
            head = _SHOWN_CHARS - _TAIL_CHARS
            text = (f"{text[:head]}\n… ({len(text) - _SHOWN_CHARS} characters left out of "
                    f"{len(text)} in all) …\n{text[-_TAIL_CHARS:]}")
        lines.append(f"{name}: {text}")
    return "\n".join(lines)


class ApprovalGate:
    """Applies the autonomy settings to tools."""

    def __init__(self, settings: AutonomySettings, approver: Approver | None = None,
                 away: AwayAsker | None = None) -> None:
        self.settings = settings
        self._approver = approver
        self.away = away  # where a question goes when the approver raises AskAway

    def attach(self, approver: Approver | None) -> None:
        """Set (or, with None, remove) who is asked when a call needs approval."""
        self._approver = approver

    def level(self, tool: Tool) -> Level:
        return self.settings.level_for(tool.name, tool.side_effects)

    def wrap(self, tool: Tool) -> Tool:
        """The same tool, guarded by its autonomy level."""
        inner = tool.handler

        async def guarded(ctx: ToolContext, **arguments: Any) -> str | ToolResult:
            try:
                try:
                    await self._admit(tool, ctx, arguments)
                except ToolError as refused:
                    if isinstance(refused, _WaitsAway):
                        raise
                    # The gate's own words, whatever the tool's are.
                    return ToolResult(f"Error: {tidy(str(refused))}", is_error=True, sources=())
                outcome = inner(ctx, **arguments)
                if inspect.isawaitable(outcome):
                    outcome = await outcome
            except _WaitsAway as waiting:
                if waiting.away is None:
                    raise
                return await self._send_away(waiting.away, waiting.request, ctx,
                                             lambda: guarded(ctx, **arguments), waiting.asked)
            return outcome

        return replace(tool, handler=guarded)

    async def _send_away(self, away: AwayAsker, request: ApprovalRequest, ctx: ToolContext,
                         again: Callable[[], Awaitable[str | ToolResult]],
                         asked: AskAway) -> ToolResult:
        """Post the question and tell the model the call waits; the yes runs `again`."""
        approved = _ANSWERED.get() | {request}

        async def run() -> ToolResult:
            token = _ANSWERED.set(approved)
            try:
                outcome = await again()
            except ToolError as exc:  # its message may repeat stored outside words
                return ToolResult(f"Error: {exc}", is_error=True, sources=exc.sources)
            except Exception as exc:  # a bug of ours or a library's: the event says so
                log.exception("the approved call of %s failed", request.tool)
                return ToolResult(f"Error: {request.tool} failed unexpectedly "
                                  f"({type(exc).__name__}: {exc}).", is_error=True)
            finally:
                _ANSWERED.reset(token)
            return outcome if isinstance(outcome, ToolResult) else ToolResult(str(outcome))

        ticket = await away.post(request, ctx, run, number=asked.number,
                                 expires_at=asked.expires_at)
        return ToolResult(waiting_text(request.tool, ticket), waiting=True, sources=())

    def wrap_all(self, tools: Iterable[Tool]) -> list[Tool]:
        return [self.wrap(t) for t in tools]

    async def _admit(self, tool: Tool, ctx: ToolContext, arguments: dict[str, Any]) -> None:
        level = self.level(tool)
        if level == "deny":
            raise ToolError(
                f"{tool.name} is denied by the person's configuration ([autonomy] sets it to "
                "'deny'), so it was not run. Do not retry it; do the task another way or ask "
                "the person to do this step."
            )
        reasons: list[str] = []
        sources: list[Source] = []
        if tool.side_effects:
            # The person's `allow` is for the person's own requests: outside
            # words may be what asked for this call.
            carried = ctx.words.carried(arguments) if ctx.words is not None else None
            if ctx.lead:
                reasons.append(_is_in(ctx.lead))
                sources += ctx.lead
            if carried is not None:
                shown = ", ".join(f"“{s}”" for s in carried.samples)
                if set(carried.sources) <= set(ctx.lead):
                    reasons[-1] += f"; its arguments repeat it ({shown})"
                else:
                    reasons.append(f"its arguments repeat what only "
                                   f"{describe(carried.sources)} said ({shown})")
                sources += carried.sources
        if level == "ask":
            reasons.append(f"{asked_name(tool.name)} are set to ask first")
        if not reasons:
            return
        await self.ask(
            ApprovalRequest(tool.name, summarize(arguments), "because " + "; and ".join(reasons),
                            ctx.call_id, ctx.turn_id, sources_union(sources)),
            ctx)

    async def ask(self, request: ApprovalRequest, ctx: ToolContext | None = None) -> None:
        """Ask the person about one call; returns only if they approve it.

        Otherwise raises ToolError, with what the model should do next: when
        nobody can be asked (no approver attached), when asking failed (an
        interface's failure counts as a refusal: nothing runs unasked), and
        when the person declines. An approver may raise ToolError itself, to
        say why it cannot ask; that message stands. Cancelled while waiting,
        the call is recorded in `ctx` as never run. An approver's `AskAway`
        becomes a `_WaitsAway`, which the guarded call around this one turns
        into the question sent away and the waiting result.
        """
        if request in _ANSWERED.get():
            return  # the person allowed this very question away: this is the call it ran
        approver = self._approver
        if approver is None:
            raise ToolError(
                f"{request.tool} needs the person's approval ({request.reason}), but nobody "
                "can be asked in this session, so it was not run. Tell the person what you "
                "wanted to do, or do the task without this tool."
            )
        try:
            approved = await approver(request)
        except asyncio.CancelledError:
            if ctx is not None:
                ctx.interruption.append("It never ran: it was still waiting for the person's "
                                        "approval, so it had no effect.")
            raise
        except AskAway as asked:
            raise _WaitsAway(request, self.away, asked) from None
        except ToolError:
            raise
        except Exception as exc:  # the interface failed; the call must not run unasked
            log.warning("asking for approval of %s failed: %s", request.tool, exc)
            raise ToolError(
                f"the person could not be asked to approve {request.tool} ({exc}); it was "
                "not run"
            ) from exc
        if not approved:
            raise ToolError(
                f"the person declined this {request.tool} call ({request.reason}); it was not "
                "run. Do not repeat it unchanged: ask them what they would prefer."
            )


def _is_in(sources: tuple[Source, ...]) -> str:
    """"it follows a stranger's mail (mallory@example.net), not a message of yours"."""
    return f"it follows {describe(sources)}, not a message of yours"


# How the person names what a level governs, for "because you set … to ask".
_ASKED_NAMES = {
    "shell_execute": "shell commands",
    "file_write": "file writes",
    "file_search_and_replace": "file edits",
    "file_patch": "file patches",
    "file_mkdir": "new folders",
    "file_restore": "file restores",
    "email_send": "sending mail",
    "email_save_attachment": "saving attachments",
    "telegram_send": "Telegram messages",
    "telegram_save_file": "saving Telegram files",
    "schedule_alarm": "alarms",
    "schedule_recurring": "recurring schedules",
    "schedule_cancel": "cancelling schedules",
    "sensor_stop": "silencing senses",
    "sensor_start": "reopening senses",
    "web_get_content": "reading web pages",
}


def asked_name(tool: str) -> str:
    """What the person calls the calls of `tool` ("shell commands")."""
    return _ASKED_NAMES.get(tool, tool)


def waiting_text(tool: str, ticket: AwayTicket) -> str:
    """What the model is told of a call whose question went to the person's channels."""
    return (f"Not run yet: {tool} waits for the person's answer to approval "
            f"{ticket.number}, asked {ticket.where}; unanswered, it expires as a refusal at "
            f"{ticket.expires}. Do not call it again meanwhile: go on with other work. "
            "When the person answers, the outcome (it ran, with its result; or it was "
            "refused, or expired) comes to you as an event of the `approvals` channel.")
