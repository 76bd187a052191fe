"""The built-in sensors, and building them from settings."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, tzinfo

from ..clock import Clock, wall_clock
from ..hub import Sensor, Sleep
from ..settings import PerceptionSettings
from .clock import ClockSensor, SilenceWatch
from .folder import FolderSensor, describe_changes
from .logfile import LogFileSensor, LogFollower, normalise_line
from .simulated import SimulatedSensor, Stimulus

__all__ = [
    "ClockSensor", "FolderSensor", "LogFileSensor", "LogFollower", "SilenceWatch",
    "SimulatedSensor", "Stimulus", "build_sensors", "describe_changes", "normalise_line",
]


def build_sensors(
    settings: PerceptionSettings,
    *,
    last_exchange: Callable[[], float | None],
    clock: Clock = wall_clock,
    sleep: Sleep = asyncio.sleep,
    tz: tzinfo = UTC,
) -> list[Sensor]:
    """The sensors the settings enable (none if perception is disabled)."""
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
            can_silence=log.can_silence, sleep=sleep,
        ))
    for folder in settings.folders:
        sensors.append(FolderSensor(
            folder.path, channel=folder.channel_name, recursive=folder.recursive,
            debounce_ms=folder.debounce_ms, urgency=folder.urgency,
            can_silence=folder.can_silence, treatment=settings.treatment.params(),
        ))
    return sensors
