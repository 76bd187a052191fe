"""Autonomy levels: which tool calls run on their own, which wait for the
person's yes, and which never run.

The level is read at call time, so a setting changed in the GUI applies to
the next call. `allow` is the person's level for the person's own requests:
while the context holds outside words (`ToolContext.outside`), a call with
side effects is asked about whatever the level says. An interface (chat, daemon, GUI) that can ask the person
attaches an Approver; with none attached, an `ask` call is refused with an
explanation rather than run unasked.
"""

from __future__ import annotations

import asyncio

import inspect
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..perception.untrusted import escape_invisible
from ..tools.registry import Tool, ToolContext, ToolError, ToolResult
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
    reason: str
    call_id: str = ""
    turn_id: int | None = None


class Approver(Protocol):
    """Asks the person; True means go ahead. Interfaces implement this."""

    async def __call__(self, request: ApprovalRequest) -> bool: ...


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

    def __init__(self, settings: AutonomySettings, approver: Approver | None = None) -> None:
        self.settings = settings
        self._approver = approver

    def attach(self, approver: Approver | None) -> None:
        """Set (or, with None, remove) who is asked when a call needs approval."""
        self._approver = approver

    def level(self, tool: Tool) -> Level:
        return self.settings.level_for(tool.name, tool.side_effects)

    def wrap(self, tool: Tool) -> Tool:
        """The same tool, guarded by its autonomy level."""
        inner = tool.handler

        async def guarded(ctx: ToolContext, **arguments: Any) -> str | ToolResult:
            await self._admit(tool, ctx, arguments)
            outcome = inner(ctx, **arguments)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            return outcome

        return replace(tool, handler=guarded)

    def wrap_all(self, tools: Iterable[Tool]) -> list[Tool]:
        return [self.wrap(t) for t in tools]

    async def _admit(self, tool: Tool, ctx: ToolContext, arguments: dict[str, Any]) -> None:
        level = self.level(tool)
        if level == "allow" and tool.side_effects and ctx.outside:
            # The person's `allow` is for the person's own requests: words from
            # outside in the context may be what asked for this call.
            await self.ask(
                ApprovalRequest(tool.name, summarize(arguments),
                                f"the conversation holds words from outside: {ctx.outside}",
                                ctx.call_id, ctx.turn_id),
                ctx)
            return
        if level == "allow":
            return
        if level == "deny":
            raise ToolError(
                f"{tool.name} is denied by the person's configuration ([autonomy] sets it to "
                "'deny'), so it was not run. Do not retry it; do the task another way or ask "
                "the person to do this step."
            )
        await self.ask(
            ApprovalRequest(tool.name, summarize(arguments),
                            f"the autonomy level of {tool.name} is 'ask'", ctx.call_id,
                            ctx.turn_id),
            ctx)

    async def ask(self, request: ApprovalRequest, ctx: ToolContext | None = None) -> None:
        """Ask the person about one call; returns only if they approve it.

        Otherwise raises ToolError, with what the model should do next: when
        nobody can be asked (no approver attached), when asking failed (an
        interface's failure counts as a refusal: nothing runs unasked), and
        when the person declines. An approver may raise ToolError itself, to
        say why it cannot ask; that message stands. Cancelled while waiting,
        the call is recorded in `ctx` as never run.
        """
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
