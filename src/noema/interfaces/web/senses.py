"""The senses page's data: each channel's event rate over time with the
moments of delivery and of cancellation, silence and start (asked of the agent
over the attach protocol, wherever it runs), archive search.

The rates are read from the archive and turn store files through read-only
connections (both are SQLite in WAL mode, so a reader never blocks the agent).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from ...perception.archive import SensoryArchive
from ...perception.timefmt import parse_duration
from ..protocol import SensorView, StatusView
from .live import Bridge

WINDOW_S = 3600.0  # the plot shows the last hour
BUCKETS = 60  # one bar a minute
WIDTH, HEIGHT = 600, 80  # the plot's drawing units (it scales to the page)
CANCELLED = ("cancelled_safe", "cancelled_unsafe", "stopped")


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    height: float
    count: int


@dataclass(frozen=True, slots=True)
class ChannelPlot:
    channel: str
    total: int
    peak: int
    bars: list[Bar]


@dataclass(frozen=True, slots=True)
class Plot:
    """Bars per channel, and the x positions of deliveries and cancellations."""

    start: float
    end: float
    channels: list[ChannelPlot]
    deliveries: list[float]
    cancellations: list[float]
    bar_width: float = WIDTH / BUCKETS
    width: int = WIDTH
    height: int = HEIGHT


def _read_only(path: Path) -> sqlite3.Connection | None:
    if not path.exists():
        return None
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def rates(archive_db: Path, turns_db: Path, now: float | None = None) -> Plot:
    """Events per minute per channel over the last hour, with the moments marked."""
    end = time.time() if now is None else now
    start = end - WINDOW_S
    step = WINDOW_S / BUCKETS

    def x(ts: float) -> float:
        return round((ts - start) / WINDOW_S * WIDTH, 1)

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
            deliveries = [x(ts) for (ts,) in archive.execute(
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
            cancellations = [x(ts) for (ts,) in turns.execute(
                f"SELECT ended FROM cycles WHERE ended >= ? AND status IN "
                f"({','.join('?' * len(CANCELLED))})", (start, *CANCELLED))]
        finally:
            turns.close()
    plots = []
    for channel in sorted(counts):
        series = counts[channel]
        peak = max(series)
        bars = [Bar(round(i * WIDTH / BUCKETS, 1), round(HEIGHT - h, 1), round(h, 1), n)
                for i, n in enumerate(series) if n
                for h in [max(1.0, n / peak * (HEIGHT - 10))]]
        plots.append(ChannelPlot(channel, sum(series), peak, bars))
    return Plot(start, end, plots, deliveries, cancellations)


class SenseRefused(ValueError):
    """The agent would not silence or start the channel; the text says why."""


async def silence(bridge: Bridge, channel: str, duration: str) -> str:
    """Close `channel` for `duration` ("30m", "90s", seconds) through the attach
    protocol, so it works beside `noema run` as in process; says until when."""
    seconds = parse_duration(duration)
    done = await bridge.silence(channel, seconds)
    if not done.ok:
        raise SenseRefused(done.error or f"{channel} was not silenced")
    until = _sensor(await bridge.status(), channel)
    when = (time.strftime("%H:%M:%S", time.localtime(until.silenced_until))
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
             "when": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(hit.event.received_at)),
             "sender": hit.event.sender, "text": hit.event.text} for hit in page.hits]
