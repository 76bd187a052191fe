"""`noema status`: a running agent's `StatusView` as a few lines of text."""

from __future__ import annotations

import time
from datetime import datetime

from ..host.protocol import ChannelView, RequestView, SensorView, StatusView

URGENCIES = ("urgent", "priority", "normal")


def format_status(view: StatusView, *, now: float | None = None, asker: bool = False) -> str:
    """The status for a terminal: the agent, its work, its queue, its senses.
    `asker`: the client that asked is attached, and is counted apart."""
    now = time.time() if now is None else now
    others = view.clients - 1 if asker else view.clients
    clients = f"{others} {'other ' if asker else ''}interface{'s' if others != 1 else ''} attached"
    lines = [
        f"agent {view.agent} · pid {view.pid} · up {_duration(now - view.started_at)} · {clients}",
        f"state: {_state(view)}",
        _context(view),
        *([f"memory: {view.memory}"] if view.memory else []),
        *_request(view.request),
        f"waiting: {_waiting(view)}",
        f"world budget: {_budget(view)}",
    ]
    lines += _table("sensors", [_sensor(s) for s in view.sensors])
    lines += _table("channels", [_channel(c) for c in view.channels])
    lines.append(f"last error: {view.last_error or 'none'}")
    return "\n".join(lines)


def _state(view: StatusView) -> str:
    if view.phase == "cancelling":
        return "stopping a cycle"
    return "working on a reply" if view.busy else "idle, waiting for you or the world"


def _context(view: StatusView) -> str:
    share = view.context_tokens / view.context_window if view.context_window else 0.0
    text = (f"context: about {view.context_tokens:,} of {view.context_window:,} tokens "
            f"({share:.0%}) in {view.session_turns} turns")
    if view.save_point_id is not None:
        text += f" · save point #{view.save_point_id}"
    return text


def _request(request: RequestView | None) -> list[str]:
    """What the next request carries, part by part; why none fits, if so."""
    if request is None:
        return []
    if request.problem:
        return [f"next request: does not fit the window ({request.problem}); "
                "`noema config check` says what would"]
    saved = f" (the save point {request.save_point:,} of it)" if request.save_point else ""
    tools = f"{request.tools:,} for {request.tools_offered} tools"
    if request.tools_offered < request.tools_total:
        tools += f" of {request.tools_total} (the rest by enable_tools)"
    turns = f"{request.turns} messages {request.turn_tokens:,}"
    if request.left_out:
        turns += f", the {request.left_out} oldest turns left out"
    if request.cut:
        turns += f", {request.cut} cut"
    return [f"next request: system prompt {request.system:,}{saved} · tools {tools} · "
            f"{turns} · answer reserve {request.answer:,}"]


def _waiting(view: StatusView) -> str:
    parts = [f"{view.waiting_messages} message(s)"] if view.waiting_messages else []
    events = [f"{view.waiting_events[u]} {u}" for u in URGENCIES if view.waiting_events.get(u)]
    events += [f"{n} {u}" for u, n in sorted(view.waiting_events.items())
               if u not in URGENCIES and n]
    if events:
        parts.append("events: " + ", ".join(events))
    text = "; ".join(parts) or "nothing"
    if view.held and events:
        text += " (events wait for you to write)"
    return text


def _budget(view: StatusView) -> str:
    if view.world_tokens_per_hour is None:
        return f"{view.world_tokens_spent:,} tokens this hour (no limit)"
    text = f"{view.world_tokens_spent:,} of {view.world_tokens_per_hour:,} tokens this hour"
    if view.world_budget_exhausted:
        text += ", spent: events wait for you"
    return text


def _sensor(sensor: SensorView) -> list[str]:
    state = sensor.state
    if sensor.silenced_until is not None:
        state += f" until {datetime.fromtimestamp(sensor.silenced_until):%H:%M}"
    return [sensor.channel, sensor.nature, sensor.urgency, state, f"{sensor.events} events"]


def _channel(channel: ChannelView) -> list[str]:
    return [channel.name, channel.state, channel.detail]


def _table(title: str, rows: list[list[str]]) -> list[str]:
    if not rows:
        return [f"{title}: none"]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"{title}:"]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, _ = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} days"
