"""The scheduler's tools: set an alarm, set a recurring schedule, list, cancel.

Every time is read in the agent's zone and echoed back as an absolute time
(weekday, date, time, zone) with what was assumed to reach it, so the model
can check it against what the person meant and correct it at once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from ..perception.clock import Clock, wall_clock
from ..perception.events import Urgency
from ..tools.errors import ToolError
from ..memory.turns import Source, sources_to_text, sources_union
from ..tools.registry import Tool, ToolContext, ToolResult, tool
from .listing import from_now, schedule_lines
from .phrases import describe, resolve_when
from .recurrence import occurrences, parse_rule
from .store import ScheduleNotFound, ScheduleStore
from .words import PhraseError

UrgencyName = Literal["normal", "priority", "urgent"]
SHOWN_NEXT = 3  # upcoming firings echoed for a recurring schedule


def _whose(ctx: ToolContext, reason: str) -> str:
    """The sources a schedule keeps: the outside words that led when it was set
    and those its reason repeats; its firings speak as theirs."""
    carried = ctx.words.carried({"reason": reason}) if ctx.words is not None else None
    sources: tuple[Source, ...] = sources_union(ctx.lead, carried.sources if carried else ())
    return sources_to_text(sources) or ""


def schedule_tools(store: ScheduleStore, zone: ZoneInfo, *, clock: Clock = wall_clock
                   ) -> list[Tool]:
    """`schedule_alarm`, `schedule_recurring`, `schedule_list` and `schedule_cancel`
    over one store, reading times in `zone`."""

    @tool(side_effects=True, own_words=True)
    def schedule_alarm(ctx: ToolContext, reason: str, when: str,
                       urgency: UrgencyName = "normal") -> str:
        """Set an alarm: when it comes due you receive an event on the scheduler
        channel carrying the reason. The time is echoed back; check it.

        Args:
            reason: What to do or remember then, in words you will understand on their own.
            when: When, in English or Spanish words ("in 20 minutes", "tomorrow at 9",
                "friday at 5pm", "mañana a las 9", "el viernes por la tarde") or an ISO
                time ("2026-03-27T16:00"), read in the person's time zone.
            urgency: How the event interrupts: "normal" (waits for the end of what you
                are doing), "priority" or "urgent".
        """
        now = clock()
        try:
            resolved = resolve_when(when, datetime.fromtimestamp(now, zone))
        except PhraseError as exc:
            raise ToolError(str(exc)) from None
        try:
            schedule = store.add_alarm(reason, resolved.timestamp, rule=when.strip(),
                                       zone=zone.key, urgency=Urgency(urgency), now=now,
                                       outside=_whose(ctx, reason))
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        text = (f"Alarm #{schedule.id} set for {describe(resolved.at)}, "
                f"{from_now(resolved.timestamp, now)}: {schedule.reason}")
        if resolved.notes:
            text += "\nAssumed: " + "; ".join(resolved.notes) + "."
        return text + (f"\nIf that is not the time meant, schedule_cancel({schedule.id}) "
                       "and set it again with a clearer time.")

    @tool(side_effects=True, own_words=True)
    def schedule_recurring(ctx: ToolContext, reason: str, rule: str,
                           urgency: UrgencyName = "normal") -> str:
        """Set a recurring schedule: each time it comes due you receive an event on
        the scheduler channel carrying the reason. The next firings are echoed back.

        Args:
            reason: What to do or remember each time.
            rule: How often, in words ("every weekday at 8:30", "every monday at 10",
                "every 15 minutes", "every other day", "every two weeks on friday",
                "the first monday of every month", "cada lunes a las 10", "cada dos
                semanas", "el último viernes de cada mes") or a five-field cron
                expression ("30 8 * * 1-5"), in the person's time zone.
            urgency: "normal", "priority" or "urgent", as for schedule_alarm.
        """
        now = clock()
        try:
            recurrence = parse_rule(rule, datetime.fromtimestamp(now, zone))
            schedule = store.add_recurring(reason, recurrence.cron, rule=rule.strip(),
                                           zone=zone.key, urgency=Urgency(urgency), now=now,
                                           outside=_whose(ctx, reason))
        except (PhraseError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        upcoming = occurrences(recurrence.cron, zone, now)
        shown = [describe(datetime.fromtimestamp(next(upcoming), zone))
                 for _ in range(SHOWN_NEXT)]
        return (f"Recurring schedule #{schedule.id} set: {recurrence.description} "
                f"(cron {recurrence.cron}, {zone.key}): {schedule.reason}\n"
                f"Next: {'; '.join(shown)}.\n"
                f"If that is not what was meant, schedule_cancel({schedule.id}) and set it "
                "again.")

    @tool(side_effects=False, own_words=True)
    def schedule_list(ctx: ToolContext) -> ToolResult:
        """List the alarms and recurring schedules that may still fire, with their IDs
        and when each fires next."""
        active = store.active()
        # A reason a stranger's words set is theirs when it is read back.
        return ToolResult(schedule_lines(active, clock()),
                          sources=sources_union(*(s.sources for s in active)))

    @tool(side_effects=True, own_words=True)
    def schedule_cancel(ctx: ToolContext, id: int) -> ToolResult:
        """Cancel an alarm or a recurring schedule so that it never fires again.

        Args:
            id: The schedule's ID, as schedule_list shows it (without the '#').
        """
        try:
            before = store.get(id)
        except ScheduleNotFound:
            raise ToolError(f"there is no schedule #{id}; schedule_list shows the IDs") from None
        if not before.active:
            how = "was cancelled" if before.cancelled_at is not None else "has already fired"
            return ToolResult(f"Schedule #{id} {how}; nothing to cancel.", sources=())
        store.cancel(id, clock())
        return ToolResult(f"Schedule #{id} cancelled: {before.reason}", sources=before.sources)

    return [schedule_alarm, schedule_recurring, schedule_list, schedule_cancel]
