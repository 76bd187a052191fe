"""`noema schedule`: the person's view of the agent's alarms and recurring
schedules, as plain functions that return the text to print.

They work whether or not the agent is running: the schedules file is shared
(SQLite WAL), and the running agent's scheduler reads it again before
anything fires, so a schedule cancelled here never fires.
"""

from __future__ import annotations

from ...paths import AgentPaths
from ...scheduling.listing import schedule_line, schedule_lines
from ...scheduling.store import ScheduleNotFound, ScheduleStore, schedules_path

LIST_LIMIT = 50


class ScheduleCommandError(Exception):
    """What the person asked cannot be done; the message says why."""


def list_schedules(paths: AgentPaths, *, now: float, include_ended: bool = False) -> str:
    """The schedules that may still fire (with `include_ended`, the latest
    `LIST_LIMIT` of every kind, newest first), one line each."""
    path = schedules_path(paths)
    if not path.exists():
        return "No schedules."
    with ScheduleStore(path) as store:
        found = store.recent(LIST_LIMIT) if include_ended else store.active()
        return schedule_lines(found, now)


def cancel_schedule(paths: AgentPaths, schedule_id: int, *, now: float) -> str:
    """Cancel one schedule by its ID; ScheduleCommandError if there is none."""
    path = schedules_path(paths)
    if not path.exists():
        raise ScheduleCommandError(f"there is no schedule #{schedule_id} (no schedules at all)")
    with ScheduleStore(path) as store:
        try:
            before = store.get(schedule_id)
        except ScheduleNotFound:
            raise ScheduleCommandError(
                f"there is no schedule #{schedule_id}; `noema schedule list` shows the IDs"
            ) from None
        if not before.active:
            return f"Nothing to cancel: {schedule_line(before, now)}"
        return f"Cancelled: {schedule_line(store.cancel(schedule_id, now), now)}"
