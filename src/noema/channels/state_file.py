"""A channel's own state file, opened so that damage never silences the channel."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..health.salvage import damaged_name, move_aside

log = logging.getLogger(__name__)

State = TypeVar("State")


def open_state(path: Path, open_: Callable[[Path], State], *, what: str, lost: str,
               notice: Callable[[str], None]) -> State:
    """`open_(path)`; a damaged file is moved aside (kept, for a look by hand)
    and a new one started, the person told what that costs (`lost`)."""
    try:
        return open_(path)
    except sqlite3.DatabaseError as exc:
        aside = damaged_name(path)
        move_aside(path, aside)
        log.warning("%s state file %s unusable (%s); moved to %s", what, path, exc, aside)
        notice(f"the {what} state file was damaged ({exc}); it was moved to {aside} and a "
               f"new one started. {lost}")
        return open_(path)
