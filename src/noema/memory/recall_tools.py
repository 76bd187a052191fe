"""The memory tools offered to the model: lookup_turn, search_full_history, annotate_observation."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

from ..tools.registry import Tool, ToolContext, ToolError, ToolResult, tool
from . import observations
from .recall import turn_body, turn_header, when
from .render import cut
from .search import ROLE_KINDS, Found, HistorySearch, SearchResult
from .store import StoreError, TurnStore
from .turns import Turn, sources_of, sources_union

MAX_CONTEXT_WINDOW = 5
TURN_CHARS = 12_000  # one page of a long turn, unless the caller asks for another size
MIN_PAGE_CHARS = 500
MAX_PAGE_CHARS = 100_000  # a page must stay well inside any model's window
NEIGHBOUR_CHARS = 1_500
MAX_LIMIT = 50


def memory_tools(
    store: TurnStore,
    search: HistorySearch,
    *,
    zone: ZoneInfo | None = None,
    pinned_limit: int = 20,
) -> list[Tool]:
    """The three memory tools bound to one store."""

    @tool(side_effects=False, own_words=True)
    def lookup_turn(
        ctx: ToolContext, id: int, context_window: int = 0, offset: int = 0, limit: int = TURN_CHARS
    ) -> ToolResult:
        """Read an original turn of the conversation by its ID, for example one that the
        chronicle cites as {cite:ID}, one found with search_full_history, or one shown
        cut because it was too long for the context.

        Args:
            id: The turn's ID.
            context_window: How many turns before and after it to show as well (0 to 5).
            offset: For a very long turn, the character to start reading from.
            limit: For a very long turn, how many characters to read from offset (500 to 100000).
        """
        if not 0 <= context_window <= MAX_CONTEXT_WINDOW:
            raise ToolError(f"context_window must be between 0 and {MAX_CONTEXT_WINDOW}")
        if offset < 0:
            raise ToolError("offset cannot be negative")
        if not MIN_PAGE_CHARS <= limit <= MAX_PAGE_CHARS:
            raise ToolError(f"limit must be between {MIN_PAGE_CHARS} and {MAX_PAGE_CHARS}")
        target = store.get(id)
        if target is None:
            raise ToolError(f"there is no turn {id}; turn IDs go from 1 to {store.last_id()}")
        around = store.range(id - context_window, id + context_window) if context_window else [target]
        parts = []
        for turn in around:
            if turn.id == id:
                parts.append(_page(turn, offset, limit))
            else:
                parts.append(f"{turn_header(turn, zone)}\n{cut(turn_body(turn), NEIGHBOUR_CHARS, turn.id)}")
        # The words shown are whoever's they were: a stranger's stay a stranger's.
        return ToolResult("\n\n".join(parts), sources=sources_union(*map(sources_of, around)))

    def _page(turn: Turn, offset: int, limit: int) -> str:
        """The requested turn from `offset`, at most `limit` characters, saying how to go on."""
        body = turn_body(turn)
        page = body[offset : offset + limit]
        if offset and not page:
            raise ToolError(f"turn {turn.id} has only {len(body):,} characters")
        shown = f"{turn_header(turn, zone)} ◀ requested\n{page}"
        end = offset + len(page)
        if end < len(body):
            more = f"offset={end}" if limit == TURN_CHARS else f"offset={end}, limit={limit}"
            shown += (
                f"\n[characters {offset:,}-{end:,} of {len(body):,}; "
                f"call lookup_turn(id={turn.id}, {more}) for more]"
            )
        elif offset:
            shown += f"\n[characters {offset:,}-{end:,} of {len(body):,}: the end of turn {turn.id}]"
        return shown

    @tool(side_effects=False, own_words=True)
    def search_full_history(
        ctx: ToolContext,
        query: str,
        limit: int = 10,
        roles: list[str] | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> ToolResult:
        """Search every turn of the conversation ever kept, including those no longer in
        your context, and get the best matches with a snippet each. Write the query as
        words that the turns you look for would contain; names and dates help.

        Args:
            query: What to look for.
            limit: How many turns to return (1 to 50).
            roles: Only these kinds of turn: user, assistant, tool, event, note.
            since: Only turns from this date or time on (ISO, e.g. 2025-03-01 or 2025-03-01T09:30).
            until: Only turns up to this date or time (a date includes that whole day).
        """
        if not query.strip():
            raise ToolError("the query is empty; give the words to look for")
        if not 1 <= limit <= MAX_LIMIT:
            raise ToolError(f"limit must be between 1 and {MAX_LIMIT}")
        if roles:
            unknown = sorted(set(roles) - set(ROLE_KINDS))
            if unknown:
                raise ToolError(f"unknown role(s) {', '.join(unknown)}; use {', '.join(ROLE_KINDS)}")
        start = _moment(since, zone, end_of_day=False) if since else None
        end = _moment(until, zone, end_of_day=True) if until else None
        try:
            found = search.search(query, limit=limit, roles=roles or None, since=start, until=end)
        except StoreError as exc:
            raise ToolError(str(exc)) from None
        read = ", ".join(found.terms) or "nothing searchable"
        scope = _scope(found, start, end)
        lines = []
        if not found.hits:
            lines.append(f'No turn matches "{query}" (searched for: {read}; {scope}).')
        else:
            lines.append(f'{len(found.hits)} turn(s) for "{query}", best first '
                         f"(searched for: {read}; {scope}).")
        lines.extend(_limits(found, zone))
        for hit in found.hits:
            lines.append(f"\n{turn_header(hit.turn, zone)} {_matched(hit)}\n  {hit.snippet}")
        if found.hits:
            lines.extend(_follow_up(found))
            lines.append("\nRead a whole turn with lookup_turn(id); context_window shows its neighbours.")
        return ToolResult("\n".join(lines),
                          sources=sources_union(*(sources_of(h.turn) for h in found.hits)))

    @tool(side_effects=False, own_words=True)
    def annotate_observation(ctx: ToolContext, source: str, note: str) -> ToolResult:
        """Pin a short note distilled from something bulky (a long tool result, a document,
        a page) so it stays in view after that turn is pruned or compacted.

        Args:
            source: Where the note comes from, e.g. "read_file report.csv (turn 812)".
            note: The observation itself, a few sentences at most.
        """
        try:
            pinned = observations.pin(store, ctx.turn_id, source, note)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        # Pinned while outside words lead, or repeating them: the result's
        # sources travel with the note, which the prompt shows as data and
        # the gate counts (see chronicle.outside_context).
        carried = ctx.words.carried({"note": note}) if ctx.words is not None else None
        return ToolResult(
            f"Pinned observation {pinned.id}. It stays in your system prompt among the "
            f"{pinned_limit} newest pinned notes.",
            sources=sources_union(ctx.lead, carried.sources if carried else ()))

    return [lookup_turn, search_full_history, annotate_observation]


def _scope(found: SearchResult, since: float | None, until: float | None) -> str:
    """What the search ranged over, in a few words."""
    window = " within since/until" if since is not None or until is not None else ""
    rules = "" if found.language == "en" else f", words read as {found.language!r}"
    return f"{found.covered:,} turns{window}{rules}"


def _matched(hit: Found) -> str:
    if hit.matched:
        return f"matched: {', '.join(hit.matched)}"
    return "matched no word itself: shown for the matches beside it"


def _follow_up(found: SearchResult) -> list[str]:
    """Which searched words no hit holds: the model may learn from the hits the
    name or place that finds what those words were about, and search for it."""
    held = {word for hit in found.hits for word in hit.matched}
    missing = [word for word in found.terms if word not in held]
    if not missing:
        return []
    return [
        f"\nNo hit holds: {', '.join(missing)}. If the hits name who or what the question is "
        "about (a person, a place, a title), search again for that name with these words."
    ]


def _limits(found: SearchResult, zone: ZoneInfo | None) -> list[str]:
    """What the search could not cover, said so that the model can search again."""
    lines = []
    if found.unmeant:
        lines.append(f"Ranked by words only, without the meaning signal: {found.unmeant}.")
    if found.absent:
        lines.append(f"In no turn at all: {', '.join(found.absent)}.")
    if found.dropped:
        lines.append(f"Left out, as words that do not tell turns apart: {', '.join(found.dropped)}.")
    if found.joined:
        lines.append(
            f"Too common to search alone: {', '.join(found.joined)}; found only in turns that "
            f"also hold {' or '.join(found.anchors)}."
        )
    if found.unsearched:
        lines.append(
            f"Not searched, too common: {', '.join(found.unsearched)}; add rarer words or "
            "since/until to use them."
        )
    if found.searched_from is not None:
        day = when(found.searched_from, zone)[:10]
        lines.append(
            f"Every word is common, so only turns from {day} on were searched; "
            f"call again with until={day} to search older ones."
        )
    return lines


def _moment(text: str, zone: ZoneInfo | None, *, end_of_day: bool) -> float:
    """Epoch seconds for an ISO date or date-time in the person's zone."""
    tz = zone or timezone.utc
    value = text.strip()
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            moment = datetime.combine(day, time.min, tz)
            if end_of_day:
                moment += timedelta(days=1) - timedelta(microseconds=1)
            return moment.timestamp()
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ToolError(
            f"{text!r} is not an ISO date or date-time; write 2025-03-01 or 2025-03-01T09:30"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    return moment.timestamp()
