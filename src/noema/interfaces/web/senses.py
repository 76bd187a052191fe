"""The senses page's data: each channel's event rate over time with the
moments of delivery and of cancellation, silence and start (asked of the agent
over the attach protocol, wherever it runs), archive search.

The rates are read from the archive and turn store files through read-only
connections (both are SQLite in WAL mode, so a reader never blocks the agent);
the page draws them with uPlot, served from the package. The urgency-rule
tester lives here too: it says which rule an event like one the person
describes would meet.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

from ...paths import AgentPaths
from ...perception.archive import SensoryArchive
from ...perception.timefmt import parse_duration
from ..host.protocol import SensorView, StatusView
from .dates import when_text
from .live import Bridge

WINDOW_S = 3600.0  # the plot shows the last hour
BUCKETS = 60  # one bar a minute
CANCELLED = ("cancelled_safe", "cancelled_unsafe", "stopped")

# The taxonomy's terms stay on the page (they are what the model and the
# configuration use); these words say beside them what each does.
NATURE_WORDS = {
    "discrete": "each event one by one",
    "aggregatable": "counted in windows",
    "mergeable": "joined into one message",
    "state": "latest value only",
}
URGENCY_WORDS = {
    "normal": "waits until the agent is free",
    "priority": "interrupts work that has changed nothing yet",
    "urgent": "interrupts whatever the agent is doing",
}


def nature_words(nature: str) -> str:
    """What a nature does to a sensor's events, in a person's words."""
    return NATURE_WORDS.get(nature, nature)


def urgency_words(urgency: str) -> str:
    """What an urgency does when an event arrives, in a person's words."""
    return URGENCY_WORDS.get(urgency, urgency)


@dataclass(frozen=True, slots=True)
class ChannelPlot:
    channel: str
    total: int
    peak: int
    counts: list[int]  # events in each bucket, oldest first


@dataclass(frozen=True, slots=True)
class Plot:
    """Events per bucket per channel, and the moments of delivery and cancellation
    (Unix seconds), for the page's chart library to draw with their axes."""

    start: float
    step: float
    channels: list[ChannelPlot]
    deliveries: list[float]
    cancellations: list[float]

    @property
    def times(self) -> list[float]:
        """Each bucket's start."""
        return [round(self.start + i * self.step, 3) for i in range(BUCKETS)]

    def data(self) -> dict:
        """What the page's script draws, as JSON."""
        return {"start": self.start, "step": self.step, "times": self.times,
                "end": self.start + BUCKETS * self.step,
                "channels": [{"channel": c.channel, "total": c.total, "peak": c.peak,
                              "counts": c.counts} for c in self.channels],
                "deliveries": self.deliveries, "cancellations": self.cancellations}


def _read_only(path: Path) -> sqlite3.Connection | None:
    if not path.exists():
        return None
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def rates(archive_db: Path, turns_db: Path, now: float | None = None) -> Plot:
    """Events per minute per channel over the last hour, with the moments marked."""
    end = time.time() if now is None else now
    step = WINDOW_S / BUCKETS
    # Buckets on whole minutes, so the axis's ticks fall on the bars' edges.
    start = (end // step + 1) * step - WINDOW_S
    counts: dict[str, list[int]] = {}
    deliveries: list[float] = []
    archive = _read_only(archive_db)
    if archive is not None:
        try:
            rows = archive.execute(
                "SELECT b.channel, CAST((e.received_at - ?) / ? AS INTEGER), COUNT(*)"
                " FROM events e JOIN batches b ON b.id = e.batch WHERE e.received_at >= ?"
                " GROUP BY 1, 2", (start, step, start)).fetchall()
            for channel, bucket, count in rows:
                counts.setdefault(channel, [0] * BUCKETS)[min(int(bucket), BUCKETS - 1)] += count
            deliveries = [ts for (ts,) in archive.execute(
                "SELECT settled_at FROM deliveries WHERE state = 'delivered' AND settled_at >= ?",
                (start,))]
        except sqlite3.OperationalError:  # an archive older than these tables: nothing to plot
            pass
        finally:
            archive.close()
    cancellations: list[float] = []
    turns = _read_only(turns_db)
    if turns is not None:
        try:
            cancellations = [ts for (ts,) in turns.execute(
                f"SELECT ended FROM cycles WHERE ended >= ? AND status IN "
                f"({','.join('?' * len(CANCELLED))})", (start, *CANCELLED))]
        finally:
            turns.close()
    plots = [ChannelPlot(channel, sum(series), max(series), series)
             for channel, series in sorted(counts.items())]
    return Plot(start, step, plots, deliveries, cancellations)


class SenseRefused(ValueError):
    """The agent would not silence or start the channel; the text says why."""


async def silence(bridge: Bridge, channel: str, duration: str,
                  zone: ZoneInfo | None = None) -> str:
    """Close `channel` for `duration` ("30m", "90s", seconds) through the attach
    protocol, so it works beside `noema run` as in process; says until when."""
    seconds = parse_duration(duration)
    done = await bridge.silence(channel, seconds)
    if not done.ok:
        raise SenseRefused(done.error or f"{channel} was not silenced")
    until = _sensor(await bridge.status(), channel)
    when = (when_text(until.silenced_until, zone)
            if until is not None and until.silenced_until else "later")
    return f"{channel} is silenced until {when}; its events are counted and archived, not delivered."


async def start(bridge: Bridge, channel: str) -> str:
    """Reopen `channel` now, through the attach protocol."""
    before = _sensor(await bridge.status(), channel)
    done = await bridge.start_sense(channel)
    if not done.ok:
        raise SenseRefused(done.error or f"{channel} was not started")
    was_silenced = before is not None and before.state == "silenced"
    return f"{channel} is active again." if was_silenced else f"{channel} was already active."


def _sensor(status: StatusView, channel: str) -> SensorView | None:
    return next((s for s in status.sensors if s.channel == channel), None)


def search_archive(archive: SensoryArchive, query: str, channel: str | None) -> list[dict]:
    """Events found by words, best first, as text for the page."""
    page = archive.search(query, channel=channel or None, limit=30)
    return [{"channel": hit.batch.channel, "batch": hit.batch.batch_id,
             "when": hit.event.received_at,
             "sender": hit.event.sender, "text": hit.event.text} for hit in page.hits]


def which_rule(paths: AgentPaths, channel: str, sender: str, key: str, text: str,
               authorised: bool) -> str:
    """Which configured urgency rule an event like this would meet, in words.
    ValueError when the event itself is not valid (a bad channel name…);
    ConfigError when the configuration cannot be read."""
    import uuid

    from ...config import load_config
    from ...orchestrator.urgency import UrgencyRules
    from ...perception.events import Event

    rules = load_config(paths).reflexes.rules
    now = time.time()
    event = Event(id=uuid.uuid4().hex[:16], channel=channel, sender=sender or "tester",
                  authorised=authorised, occurred_at=now, received_at=now, key=key, text=text)
    verdict = UrgencyRules.from_settings(rules).classify(event)
    if not verdict.from_rule:
        how = ("its own urgency hint" if verdict.hinted
               else "the sensor's default urgency")
        return f"No rule of {len(rules)} matches; {how} applies."
    rule = rules[verdict.rule]
    shown = ", ".join(f"{name}={value!r}" for name, value in
                      rule.model_dump(exclude_none=True, exclude_defaults=True).items())
    bypass = "; it is delivered even while the sensor is silenced" if verdict.bypass_stopped_sensor else ""
    return f"Rule {verdict.rule + 1} ({shown}) matches: {verdict.urgency.value}{bypass}."
