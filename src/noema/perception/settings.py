"""Perception settings: the `[perception]` table of an agent's config.toml.

Durations are seconds or text like "30m"; every table refuses unknown keys,
so a typo is reported instead of silently ignored.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from .events import CHANNEL_PATTERN, TreatmentParams, Urgency
from .timefmt import parse_duration

Duration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]
Channel = Annotated[str, Field(pattern=CHANNEL_PATTERN.pattern)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClockSettings(_Strict):
    """The clock sensor: a notice after a long silence."""

    enabled: bool = True
    channel: Channel = "clock"
    long_silence: Duration = 3 * 3600.0


class LogFileSettings(_Strict):
    """One log file to follow.

    The sensor resumes where it stood after a crash or a restart; it reads
    back at most `resume_max_bytes` of a file (0: never catch up, start at
    the end), skipping the older part with a note. `from_start` only matters
    the first time, when there is no place to resume from.
    """

    path: Path
    channel: Channel | None = None  # default: "log." and the file's name
    window: Duration = 300.0
    poll_interval: Duration = 1.0
    from_start: bool = False
    urgency: Urgency = Urgency.NORMAL
    can_silence: bool = True
    resume_max_bytes: int = Field(8 * 1024 * 1024, ge=0, le=1 << 40)

    @property
    def channel_name(self) -> str:
        return self.channel or "log." + _slug(self.path.name)

    def path_problem(self) -> str | None:
        """Why the sensor cannot read its file now (it waits until it can), or None."""
        if self.path.is_dir():
            return f"{self.path} is a folder, not a log file"
        if not self.path.exists():
            return _missing(self.path)
        if not os.access(self.path, os.R_OK):
            return f"{self.path} cannot be read (permissions)"
        return None


class FolderSettings(_Strict):
    """One folder to watch."""

    path: Path
    channel: Channel | None = None  # default: "folder." and the folder's name
    recursive: bool = True
    debounce_ms: int = Field(500, ge=10, le=60_000)
    urgency: Urgency = Urgency.NORMAL
    can_silence: bool = True

    @property
    def channel_name(self) -> str:
        return self.channel or "folder." + _slug(self.path.name)

    def path_problem(self) -> str | None:
        """Why the sensor cannot watch its folder now, or None."""
        if not self.path.exists():
            return _missing(self.path)
        if not self.path.is_dir():
            return f"{self.path} is a file, not a folder"
        return None


class TreatmentSettings(_Strict):
    """Default treatment parameters for sensors that do not set their own."""

    window: Duration = 300.0
    quiet_gap: Duration = 5.0
    max_hold: Duration = 60.0
    hold: int = Field(20, ge=1, le=10_000)

    @model_validator(mode="after")
    def _hold_covers_gap(self) -> TreatmentSettings:
        if self.max_hold < self.quiet_gap:
            raise ValueError("max_hold must be at least quiet_gap")
        return self

    def params(self) -> TreatmentParams:
        return TreatmentParams(self.window, self.quiet_gap, self.max_hold, self.hold)


class PerceptionSettings(_Strict):
    """Everything about the senses of one agent."""

    enabled: bool = True
    clock: ClockSettings = ClockSettings()
    logs: list[LogFileSettings] = []
    folders: list[FolderSettings] = []
    treatment: TreatmentSettings = TreatmentSettings()
    sandwich_k: int = Field(3, ge=1, le=50)
    max_text_chars: int = Field(1000, ge=80, le=100_000)
    archive_flush_every: int = Field(1000, ge=1, le=100_000)
    # An event is acknowledged when the archive commits it: at most this long
    # after it arrives (or at once when archive_flush_every events wait).
    archive_commit_ms: int = Field(50, ge=1, le=10_000)
    max_silence: Duration = 24 * 3600.0

    def source_problem(self, channel: str) -> str | None:
        """Why the log or folder sensor of `channel` cannot read its source right
        now (checked at each call, so it clears when the file appears), or None."""
        for sensor in (*self.logs, *self.folders):
            if sensor.channel_name == channel:
                return sensor.path_problem()
        return None

    def path_warnings(self) -> list[str]:
        """One line per sensor that cannot read its source now: not an error (a
        log may appear later), but the person should know the sensor waits."""
        if not self.enabled:
            return []
        found = []
        for kind, sensors in (("logs", self.logs), ("folders", self.folders)):
            for index, sensor in enumerate(sensors):
                problem = sensor.path_problem()
                if problem:
                    found.append(f"perception.{kind}.{index}.path: {problem}; the "
                                 f"{sensor.channel_name} sensor waits until it can read it")
        return found

    @model_validator(mode="after")
    def _consistent(self) -> PerceptionSettings:
        if self.sandwich_k > self.treatment.hold:
            raise ValueError("sandwich_k cannot exceed treatment.hold (events kept at each end)")
        channels = [s.channel_name for s in (*self.logs, *self.folders)]
        if self.clock.enabled:
            channels.append(self.clock.channel)
        seen: set[str] = set()
        for channel in channels:
            if not CHANNEL_PATTERN.match(channel):
                raise ValueError(f"channel {channel!r} is not a usable name; set `channel`")
            if channel in seen:
                raise ValueError(f"two sensors use the channel {channel!r}; set `channel`")
            seen.add(channel)
        return self


def _missing(path: Path) -> str:
    if str(path).startswith("~"):
        return f"{path} does not exist: '~' is not expanded here, write the full path"
    return f"{path} does not exist (yet)"


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-.") or "file"
    return slug[:56]
