"""The model's tools over its own perception: look in the archive, know and
control its senses, and ask for pending events.

Tools are built by factories that bind what they act on; `now` is read
from the injected clock at each call.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from datetime import UTC, tzinfo

from ..memory.turns import Source, SourceKind, sources_union
from ..tools.registry import Tool, ToolContext, ToolError, ToolResult, tool
from .archive import ArchivePage, SearchPage, SensoryArchive, UnknownBatch
from .clock import Clock, wall_clock
from .events import Event, Nature, SensorInfo
from .moments import read_moment
from .pipeline import ChannelStatus, Pipeline
from .timefmt import clock_time, format_duration, full_time, parse_duration
from .treatments import UnknownChannel
from .untrusted import SessionDelimiter
from .whose import WordsOf, event_sources, words_of_catalogue

Pending = Callable[[], str | Awaitable[str]]
# Why a channel's sensor cannot read its source right now (None: it can).
SourceProblem = Callable[[str], str | None]


def _no_problem(channel: str) -> str | None:
    return None


def perception_tools(
    pipeline: Pipeline,
    *,
    clock: Clock,
    delimiter: SessionDelimiter,
    pending: Pending,
    tz: tzinfo = UTC,
    source_problem: SourceProblem = _no_problem,
) -> list[Tool]:
    """Every perception tool, bound to one agent's pipeline."""
    return [
        lookup_tool(pipeline.archive, delimiter, tz, clock,
                    words_of_catalogue(pipeline.catalogue)),
        *control_tools(pipeline, clock, tz, source_problem),
        pool_event_tool(pending),
    ]


def pool_event_tool(pending: Pending) -> Tool:
    """`pool_event()`: the events waiting for the model, packed and rendered.

    `pending` belongs to the orchestrator: it drains its queue and renders
    it. The orchestrator puts polled events back if the cycle is discarded,
    so polling changes nothing for good and the tool is read-only: a model
    that looks at its senses does not make its thought unsafe to cancel.
    """

    # Own words: the orchestrator's `pending` marks what it hands over with the
    # sources of the events it packs.
    @tool(side_effects=False, own_words=True)
    async def pool_event(ctx: ToolContext) -> str | ToolResult:
        """Receive the events your senses reported that you have not seen yet
        (messages, log activity, file changes, state updates), packed and
        condensed. The body also delivers them by itself; call this to look now."""
        result = pending()
        if inspect.isawaitable(result):
            result = await result
        return result

    return pool_event


def lookup_tool(archive: SensoryArchive, delimiter: SessionDelimiter, tz: tzinfo = UTC,
                clock: Clock = wall_clock, words_of: WordsOf | None = None) -> Tool:
    """`lookup_sensory_archive`: page through a batch, or search every raw event by
    words; what it shows carries the sources of the events shown."""

    def whose(events: list[Event]) -> tuple[Source, ...]:
        kind = (lambda channel: words_of(channel)) if words_of else (lambda _: SourceKind.EVENT)
        return sources_union(*(event_sources(e, k) for e in events
                               if (k := kind(e.channel)) is not None))

    @tool(side_effects=False, own_words=True)
    def lookup_sensory_archive(
        ctx: ToolContext,
        batch_id: str | None = None,
        offset: int = 0,
        limit: int = 20,
        filter: str | None = None,
        query: str | None = None,
        channel: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> ToolResult:
        """Read raw events kept in the sensory archive: page through a batch, for
        example the events a condensed package left out ("… 148 more: batch b12
        offsets 1–148"), or search every event ever perceived by its words, even
        those that reached you only as a count.

        Args:
            batch_id: the batch to page through, as named in a package, like "b12".
            offset: where to start: a position in the batch, or a rank in the search results.
            limit: how many events to return, at most 200.
            filter: with batch_id, only events whose text, sender or key contains this.
            query: search by words instead (all of them, or any if no event has all;
                "quoted words" as a phrase), best matches first.
            channel: with query, only channels matching this name or pattern ("log.*").
            since: with query, only events that arrived from then on: an ISO date or
                time, "yesterday", "last tuesday", "el martes", "3 days ago".
            until: with query, only events that arrived until then; a day means its end.
        """
        if (batch_id is None) == (query is None):
            raise ToolError("give batch_id to page through a batch, or query to search "
                            "by words (not both)")
        try:
            if query is not None:
                if filter is not None:
                    raise ValueError("filter goes with batch_id; put the words in query")
                now = clock()
                start = read_moment(since, now, tz, end_of_day=False) if since else None
                end = read_moment(until, now, tz, end_of_day=True) if until else None
                found = archive.search(query, channel=channel, since=start, until=end,
                                       offset=offset, limit=limit)
                return ToolResult(render_search(found, delimiter, tz, query),
                                  sources=whose([h.event for h in found.hits]))
            if channel or since or until:
                raise ValueError("channel, since and until go with query")
            assert batch_id is not None
            page = archive.lookup(batch_id, offset, limit, filter)
            # The page is headed by the batch's name, its events' key or
            # sender (a log line's pattern, a caller's key), shown even when
            # no event is: whoever's those events are.
            named = () if page.batch.dropped else archive.lookup(batch_id, 0, 1).events
        except (UnknownBatch, ValueError) as exc:
            raise ToolError(str(exc)) from None
        return ToolResult(render_page(page, delimiter, tz, filter),
                          sources=whose([*page.events, *named]))

    return lookup_sensory_archive


def render_search(found: SearchPage, d: SessionDelimiter, tz: tzinfo, query: str) -> str:
    """Search results as the model reads them, outside text inside the envelope."""
    asked = d.datamark(query)
    if not found.hits:
        lines = [f'No archived event matches "{asked}" here.' if not found.offset else
                 f"No more events match: all {found.ranked} were shown."]
    else:
        first, last = found.offset + 1, found.offset + len(found.hits)
        some = " (no event holds every word; these hold some)" if found.any_word else ""
        order = "newest first" if found.newest_only else "best first"
        lines = [f'Events matching "{asked}"{some}, {order}: {first}–{last} of {found.ranked}.']
    if found.newest_only:
        lines.append(f"More than {found.ranked} events match: these are the newest, not ranked; "
                     "give since/until or a channel to narrow the search.")
    if found.unindexed:
        lines.append(f"{found.unindexed} older events are still being indexed and were not "
                     "searched; try again shortly.")
    if not found.hits:
        return "\n".join(lines)
    lines.append(d.open("archive", "search"))
    for hit in found.hits:
        e = hit.event
        lines += _event_lines(
            e, d, f"{e.batch_id}#{e.batch_seq} {e.channel} [{full_time(e.occurred_at, tz)}]"
        )
    lines.append(d.close("archive"))
    if found.next_offset is not None:
        lines.append(f"More: call again with offset={found.next_offset}.")
    lines.append("Page around an event with batch_id and offset.")
    return "\n".join(lines)


def _event_lines(e: Event, d: SessionDelimiter, place: str) -> list[str]:
    """One archived event as the model reads it: where and when (`place`),
    who, and its text and data datamarked."""
    who = f"{d.attribute(e.sender)} authorised={'yes' if e.authorised else 'no'}"
    lines = [f"{place} {who}: {d.datamark(e.text)}"]
    if len(e.payload):
        lines.append(f"data: {d.datamark(e.payload.to_json())}")
    return lines


def render_page(
    page: ArchivePage, d: SessionDelimiter, tz: tzinfo = UTC, filter: str | None = None
) -> str:
    """An archive page as the model reads it, outside text inside the envelope."""
    b = page.batch
    kind, _, value = b.bucket.partition(":")
    if b.dropped:
        stream = "events dropped while the channel was silenced"
    elif kind == "key":
        stream = f"events with key «{d.datamark(value)}»"
    else:
        stream = f"events from {d.attribute(value)}"
    sealed = f", sealed {clock_time(b.sealed_at, tz)}" if b.sealed_at is not None else ", open"
    lines = [
        f"Batch {b.batch_id}: {b.size} {stream} on channel {b.channel} "
        f"(opened {clock_time(b.opened_at, tz)}{sealed}).",
    ]
    if not page.events:
        lines.append("No events match here." if filter else "No events at this offset.")
        return "\n".join(lines)
    filtered = f' containing "{d.datamark(filter)}"' if filter else ""
    lines.append(
        f"Offsets {page.events[0].batch_seq}–{page.events[-1].batch_seq}: {len(page.events)} "
        f"of {page.matching} events{filtered} from offset {page.events[0].batch_seq} on."
    )
    lines.append(d.open("archive", f"batch={b.batch_id} channel={b.channel}"))
    for e in page.events:
        lines += _event_lines(e, d, f"#{e.batch_seq} [{clock_time(e.occurred_at, tz)}]")
    lines.append(d.close("archive"))
    if page.next_offset is not None:
        lines.append(f"More: call again with offset={page.next_offset}.")
    return "\n".join(lines)


def control_tools(pipeline: Pipeline, clock: Clock, tz: tzinfo = UTC,
                  source_problem: SourceProblem = _no_problem) -> list[Tool]:
    """The metacognition tools: capabilities, stop, start, status."""

    def channels_or_all(channels: list[str] | None) -> list[str]:
        if not channels:
            return sorted(pipeline.catalogue)
        unknown = [c for c in channels if c not in pipeline.catalogue]
        if unknown:
            raise ToolError(
                f"unknown channel(s): {', '.join(unknown)}. Known channels: "
                f"{', '.join(sorted(pipeline.catalogue)) or 'none'}."
            )
        return list(dict.fromkeys(channels))

    @tool(side_effects=False, own_words=True)
    def get_sensor_capabilities(ctx: ToolContext) -> str:
        """List your senses: each channel, what it perceives, how its events are
        condensed (its nature), its parameters, and whether it is active or silenced."""
        now = clock()
        if not pipeline.catalogue:
            return "No sensors are declared."
        blocks = [_capability(pipeline.status(c, now), now, tz, source_problem(c))
                  for c in sorted(pipeline.catalogue)]
        return "\n".join(blocks)

    @tool(side_effects=True, own_words=True)
    def sensor_stop(ctx: ToolContext, channels: list[str], duration: str | float) -> str:
        """Silence channels for a while, to concentrate. Events arriving meanwhile
        are counted and archived but never delivered, not even later; the
        channels reopen by themselves when the duration ends.

        Args:
            channels: the channels to silence, as named by get_sensor_capabilities.
            duration: how long: seconds, or text like "90s", "30m", "2h".
        """
        wanted = channels_or_all(channels) if channels else []
        if not wanted:
            raise ToolError("name at least one channel to silence")
        try:
            seconds = parse_duration(duration)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        now = clock()
        try:
            until = pipeline.stop(wanted, seconds, now)
        except (UnknownChannel, ValueError) as exc:
            raise ToolError(str(exc)) from None
        capped = ""
        if until - now < seconds:
            capped = f" (capped at the longest silence, {format_duration(until - now)})"
        return (
            f"Silenced {', '.join(wanted)} until {clock_time(until, tz)}, "
            f"{format_duration(until - now)} from now{capped}. Events arriving meanwhile "
            "are counted and archived, not delivered; sensor_start reopens sooner."
        )

    @tool(side_effects=True, own_words=True)
    def sensor_start(ctx: ToolContext, channels: list[str]) -> str:
        """Reopen silenced channels now; events flow again from this moment (what
        arrived while silenced stays in the archive, it is not delivered).

        Args:
            channels: the channels to reopen.
        """
        wanted = channels_or_all(channels) if channels else []
        if not wanted:
            raise ToolError("name at least one channel to reopen")
        reopened = pipeline.start(wanted, clock())
        already = [c for c in wanted if c not in reopened]
        parts = []
        if reopened:
            parts.append(f"Reopened {', '.join(reopened)}.")
        if already:
            parts.append(f"Already active: {', '.join(already)}.")
        return " ".join(parts)

    @tool(side_effects=False, own_words=True)
    def sensor_status(ctx: ToolContext, channels: list[str] | None = None) -> str:
        """How your senses are doing: active or silenced (and for how long),
        events counted over the last 1, 5 and 15 minutes with their rates.

        Args:
            channels: the channels to report; all of them if left out.
        """
        now = clock()
        wanted = channels_or_all(channels)
        if not wanted:
            return "No sensors are declared."
        return "\n".join(_status(pipeline.status(c, now), now, tz, source_problem(c))
                         for c in wanted)

    return [get_sensor_capabilities, sensor_stop, sensor_start, sensor_status]


def _gate_line(status: ChannelStatus, now: float, tz: tzinfo, waiting: str | None = None) -> str:
    gate = status.gate
    if gate.open:
        return f"active, but waiting: {waiting}" if waiting else "active"
    assert gate.until is not None
    line = (f"silenced until {clock_time(gate.until, tz)} "
            f"({format_duration(gate.time_left(now))} left)")
    if gate.dropped:
        line += f", {gate.dropped} dropped so far"
        if status.silenced_batch:
            line += f" (archived in batch {status.silenced_batch})"
    return line


def _treatment(info: SensorInfo) -> str:
    p = info.treatment
    if info.nature is Nature.AGGREGATABLE:
        return f"counted per pattern over {format_duration(p.window)} windows"
    if info.nature is Nature.MERGEABLE:
        return (f"messages of one sender merged until {format_duration(p.quiet_gap)} of quiet "
                f"(held at most {format_duration(p.max_hold)})")
    if info.nature is Nature.STATE:
        return "only the newest value of each key is delivered"
    return "each event delivered as it is"


def _capability(status: ChannelStatus, now: float, tz: tzinfo, waiting: str | None) -> str:
    info = status.info
    params = ", ".join(f"{k}={v}" for k, v in info.parameters.items())
    lines = [
        f"{info.channel}: {info.description}",
        f"  nature {info.nature.value}: {_treatment(info)}; default urgency "
        f"{info.default_urgency.value}; "
        + ("can be silenced" if info.can_silence else "cannot be silenced"),
    ]
    if params:
        lines.append(f"  parameters: {params}")
    lines.append(f"  now: {_gate_line(status, now, tz, waiting)}")
    return "\n".join(lines)


def _status(status: ChannelStatus, now: float, tz: tzinfo, waiting: str | None) -> str:
    counts = status.counts
    windows = " · ".join(
        f"{format_duration(w.seconds)}: {w.received} ({w.per_minute:.1f}/min)"
        + (f", {w.dropped} dropped" if w.dropped else "")
        for w in counts.windows
    )
    last = (f"last event {format_duration(now - counts.last_at)} ago"
            if counts.last_at is not None else "no events yet")
    return (
        f"{status.info.channel}: {_gate_line(status, now, tz, waiting)}. {windows}. "
        f"Since start: {counts.received} received, {counts.dropped} dropped; {last}."
    )
