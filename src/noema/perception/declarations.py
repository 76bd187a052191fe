"""Sensor declarations kept in the sensory archive.

A channel's events may still be owed to the model after a restart that no
longer configures its sensor; the declaration kept here lets them be
delivered with the treatment they were archived under.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from .events import Nature, Payload, SensorInfo, TreatmentParams, Urgency

SCHEMA = """
CREATE TABLE IF NOT EXISTS channels (
    channel TEXT PRIMARY KEY,
    info    TEXT NOT NULL
);
"""


class Declarations:
    """Every channel's latest declaration: staged here, written by the archive's
    group commit."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._staged: dict[str, str] = {}

    def remember(self, info: SensorInfo) -> None:
        """Stage a sensor's declaration (it replaces the channel's previous one)."""
        self._staged[info.channel] = json.dumps(_info_data(info), separators=(",", ":"))

    def declared(self) -> dict[str, SensorInfo]:
        """The declarations committed so far, by channel."""
        rows = self._conn.execute("SELECT channel, info FROM channels").fetchall()
        return {channel: _info_from(channel, json.loads(info)) for channel, info in rows}

    # -- the archive's group commit ------------------------------------------

    @property
    def staged(self) -> bool:
        return bool(self._staged)

    def write(self, db: sqlite3.Connection) -> None:
        """Write what is staged, inside the archive's transaction."""
        db.executemany(
            "INSERT INTO channels (channel, info) VALUES (?, ?)"
            " ON CONFLICT(channel) DO UPDATE SET info = excluded.info",
            self._staged.items(),
        )

    def clear_staged(self) -> None:
        """Forget what the archive's transaction has just committed."""
        self._staged = {}


def _info_data(info: SensorInfo) -> dict[str, Any]:
    t = info.treatment
    return {
        "description": info.description, "nature": info.nature.value,
        "parameters": info.parameters.thaw(), "can_silence": info.can_silence,
        "default_urgency": info.default_urgency.value,
        "treatment": {"window": t.window, "quiet_gap": t.quiet_gap,
                      "max_hold": t.max_hold, "hold": t.hold},
    }


def _info_from(channel: str, data: Mapping[str, Any]) -> SensorInfo:
    return SensorInfo(
        channel, data["description"], Nature(data["nature"]),
        parameters=Payload(data.get("parameters") or {}),
        can_silence=bool(data.get("can_silence", True)),
        default_urgency=Urgency(data.get("default_urgency", "normal")),
        treatment=TreatmentParams(**data.get("treatment", {})),
    )
