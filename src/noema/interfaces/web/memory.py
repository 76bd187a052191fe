"""The memory inspector's data: save points with linked citations (the only
links they may hold), their validator reports, and search over every turn."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from ...memory import savepoints
from ...memory.observations import pinned
from ...memory.render import compact_ranges
from ...memory.search import ROLE_KINDS
from ...memory.store import TurnStore
from ...memory.validator import CITATION
from ..commands.memory import PersonSearch, format_report, support_share
from .render import citations_html
from .words import kind_words

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
    written: float  # when, as a Unix time (the page writes it in the person's zone)
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
            id=sp.id, status=sp.status.value, written=sp.created,
            turns=compact_ranges(sp.turn_ids), previous=sp.previous,
            html=citations_html(cited_markdown(sp.text)) if sp.text else "",
            report=format_report(sp.report), rejected=rejected,
            support=support_share(sp.support), supported=sp.report.supported,
            judged=sp.report.judged))
    return views


@dataclass(frozen=True, slots=True)
class Hit:
    id: int
    label: str  # who or what the turn is, in words
    written: float
    snippet: Markup  # the turn's words around the match, as text, the matched words marked
    score: float


@dataclass(frozen=True, slots=True)
class Found:
    hits: list[Hit]
    terms: list[str]
    notes: list[str]  # what the search left out or narrowed, in the CLI's words
    ranked: str  # how the hits were ranked ("by words, then by meaning, …")


_MARKED = re.compile(r"«([^«»]*)»")
# Markdown's marks, which a snippet cut from a turn shows as source: taken out.
_MARKDOWN = [
    (re.compile(r"!?\[([^\]]*)\]\([^)]*\)"), r"\1"),  # a link or an image: its words
    (re.compile(r"```[\w+-]*"), " "),  # a code fence and its language
    (re.compile(r"(\*\*|__|~~|`)"), ""),  # strong, strike-through, code
    (re.compile(r"(?<![\w*])\*(?=\S)([^*]*?\S)\*(?![\w*])"), r"\1"),  # *emphasis*
    (re.compile(r"(?<!\w)_(?=\S)([^_]*?\S)_(?!\w)"), r"\1"),  # _emphasis_
    (re.compile(r"(^|\n)\s{0,3}(#{1,6}|>|[-*+]|\d+[.)])\s+"), r"\1"),  # headings, quotes, items
    (re.compile(r"\|?(\s*:?-{3,}:?\s*\|)+\s*:?-{0,}:?\s*"), " "),  # a table's rule row
    (re.compile(r"\s*\|\s*"), " · "),  # a table's cells, apart
    (re.compile(r"(\s*·){2,}\s*"), " · "),  # one row's end and the next's start: one dot
    (re.compile(r"^(\s*·\s*)+|(\s*·\s*)+$"), ""),  # no dot at either end
]


def snippet_html(snippet: str) -> Markup:
    """A search snippet as a person reads it: its Markdown marks taken out, the
    text escaped, and the words the search matched (between «» from the index)
    in <mark>."""
    text = snippet
    for pattern, replacement in _MARKDOWN:
        text = pattern.sub(replacement, text)
    text = " ".join(text.split())
    parts = _MARKED.split(text)  # odd places hold the matched words
    return Markup("").join(Markup("<mark>{}</mark>").format(part) if place % 2
                           else escape(part.replace("«", "").replace("»", ""))  # a mark cut off
                           for place, part in enumerate(parts))


def search(engine: PersonSearch, query: str, roles: list[str], agent: str) -> Found:
    """Ranked turns for `query`, by the search the agent itself uses; unknown
    roles are a ValueError naming the known ones."""
    unknown = [r for r in roles if r not in ROLE_KINDS]
    if unknown:
        raise ValueError(f"unknown kind {unknown[0]!r}; one of {', '.join(ROLES)}")
    result = engine.engine.search(query, limit=SEARCH_LIMIT, roles=roles or None)
    notes = []
    if result.dropped:
        notes.append(f"left out: {', '.join(result.dropped)}")
    if result.recent_only:
        notes.append(f"only the latest {result.recent_only:,} turns were searched")
    hits = [Hit(h.turn.id, kind_words(h.turn.kind.value, h.turn.tool_name, agent), h.turn.ts,
                snippet_html(h.snippet), h.score)
            for h in result.hits]
    return Found(hits, list(result.terms), notes, engine.how_ranked(result))


@dataclass(frozen=True, slots=True)
class PinnedView:
    turn_id: int
    written: float
    source: str
    note: str


def observations(store: TurnStore) -> list[PinnedView]:
    """The pinned observations still standing, oldest first, each with the call that pinned it."""
    return [PinnedView(o.turn_id, o.created, o.source, o.note)
            for o in pinned(store, PINNED_LIMIT)]
