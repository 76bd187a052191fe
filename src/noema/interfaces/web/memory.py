"""The memory inspector's data: save points with linked citations (the only
links they may hold), their validator reports, and search over every turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...memory import savepoints
from ...memory.observations import pinned
from ...memory.recall import kind_label, when
from ...memory.render import compact_ranges
from ...memory.search import ROLE_KINDS, HistorySearch
from ...memory.store import TurnStore
from ...memory.validator import CITATION
from ..commands.memory import format_report, support_share
from .render import citations_html

SEARCH_LIMIT = 30
PINNED_LIMIT = 100  # pinned observations shown, newest
ROLES = tuple(ROLE_KINDS)


def cited_markdown(text: str) -> str:
    """`{cite:N}` markers as links to the cited turns (the page opens them in place)."""
    def link(match) -> str:
        ids = [part.strip() for part in match.group(1).split(",")]
        return " ".join(f"[cite:{n}](/memory/turn/{n})" for n in ids)

    return CITATION.sub(link, text)


@dataclass(frozen=True, slots=True)
class SavePointView:
    """A save point as the inspector shows it."""

    id: int
    status: str
    written: str
    turns: str
    previous: int | None
    html: str  # the Journey, sanitised, citations as links inside the page and no other
    report: str  # the validator's report, as `noema memory show` words it
    rejected: list[dict[str, Any]]  # per attempt: failures and the text that was refused
    support: str = "-"  # the share of supported citations ("-": not checked)
    supported: int = 0
    judged: int = 0


def save_points(store: TurnStore) -> list[SavePointView]:
    """Every save point, oldest first, rejected attempts included."""
    views = []
    for sp in reversed(savepoints.listing(store)):
        rejected = [{"number": a.number, "failures": [f"[{c}] {m}" for c, m in a.failures],
                     "html": citations_html(cited_markdown(a.text)) if a.text else ""}
                    for a in sp.report.attempts if a.failures]
        views.append(SavePointView(
            id=sp.id, status=sp.status.value, written=when(sp.created),
            turns=compact_ranges(sp.turn_ids), previous=sp.previous,
            html=citations_html(cited_markdown(sp.text)) if sp.text else "",
            report=format_report(sp.report), rejected=rejected,
            support=support_share(sp.support), supported=sp.report.supported,
            judged=sp.report.judged))
    return views


@dataclass(frozen=True, slots=True)
class Hit:
    id: int
    label: str
    written: str
    snippet: str
    score: float


@dataclass(frozen=True, slots=True)
class Found:
    hits: list[Hit]
    terms: list[str]
    notes: list[str]  # what the search left out or narrowed, in the CLI's words


def search(store: TurnStore, query: str, roles: list[str]) -> Found:
    """Ranked turns for `query`; unknown roles are a ValueError naming the known ones."""
    unknown = [r for r in roles if r not in ROLE_KINDS]
    if unknown:
        raise ValueError(f"unknown kind {unknown[0]!r}; one of {', '.join(ROLES)}")
    engine = HistorySearch(store)
    try:
        result = engine.search(query, limit=SEARCH_LIMIT, roles=roles or None)
    finally:
        engine.close()
    notes = []
    if result.dropped:
        notes.append(f"left out: {', '.join(result.dropped)}")
    if result.recent_only:
        notes.append(f"only the latest {result.recent_only:,} turns were searched")
    hits = [Hit(h.turn.id, kind_label(h.turn), when(h.turn.ts), h.snippet, h.score)
            for h in result.hits]
    return Found(hits, list(result.terms), notes)


@dataclass(frozen=True, slots=True)
class PinnedView:
    turn_id: int
    written: str
    source: str
    note: str


def observations(store: TurnStore) -> list[PinnedView]:
    """The pinned observations still standing, oldest first, each with the call that pinned it."""
    return [PinnedView(o.turn_id, when(o.created), o.source, o.note)
            for o in pinned(store, PINNED_LIMIT)]
