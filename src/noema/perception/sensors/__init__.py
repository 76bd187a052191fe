"""The built-in sensors, and building them from settings."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, tzinfo

from ..clock import Clock, wall_clock
from ..hub import Bookmark, Sensor, Sleep
from ..settings import PerceptionSettings
from .clock import ClockSensor, SilenceWatch
from .folder import FolderSensor, describe_changes
from .logfile import LogFileSensor, LogFollower, LogPosition, normalise_line
from .simulated import SimulatedSensor, Stimulus

__all__ = [
    "ClockSensor", "FolderSensor", "LogFileSensor", "LogFollower", "LogPosition",
    "SilenceWatch", "SimulatedSensor", "Stimulus", "bookmark_source", "build_sensors",
    "describe_changes", "normalise_line",
]


def bookmark_source(channel: str) -> str:
    """The name a sensor's bookmark is kept under."""
    return "sensor:" + channel


def build_sensors(
    settings: PerceptionSettings,
    *,
    last_exchange: Callable[[], float | None],
    clock: Clock = wall_clock,
    sleep: Sleep = asyncio.sleep,
    tz: tzinfo = UTC,
    bookmarks: Callable[[str], Bookmark] | None = None,
    own_change: Callable[[str], bool] | None = None,
) -> list[Sensor]:
    """The sensors the settings enable (none if perception is disabled).

    `bookmarks` gives a durable bookmark by name (the sensory archive's
    `bookmark`), so sensors that can read their source again resume where
    they stood after a restart; without it they resume only after a crash
    inside this process. `own_change` tells a folder sensor which changes
    are the agent's own writes (not reported).
    """
    if not settings.enabled:
        return []
    sensors: list[Sensor] = []
    if settings.clock.enabled:
        sensors.append(ClockSensor(
            last_exchange, long_silence=settings.clock.long_silence,
            channel=settings.clock.channel, clock=clock, sleep=sleep, tz=tz,
        ))
    for log in settings.logs:
        sensors.append(LogFileSensor(
            log.path, channel=log.channel_name, window=log.window,
            poll_interval=log.poll_interval, from_start=log.from_start, urgency=log.urgency,
            can_silence=log.can_silence, sleep=sleep, max_backlog=log.resume_max_bytes,
            bookmark=bookmarks(bookmark_source(log.channel_name)) if bookmarks else None,
        ))
    for folder in settings.folders:
        sensors.append(FolderSensor(
            folder.path, channel=folder.channel_name, recursive=folder.recursive,
            debounce_ms=folder.debounce_ms, urgency=folder.urgency,
            can_silence=folder.can_silence, treatment=settings.treatment.params(),
            own=own_change,
        ))
    return sensors
