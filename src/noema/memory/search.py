"""Ranked search over every turn ever stored, without any model call.

A natural-language query becomes an FTS5 expression over the store's index
(porter stemming, diacritics folded): stop words go, and terms so common
that they would cost more than they tell are left out, cheapest first, so
that a query never walks more than a bounded number of postings whatever
the size of the store. BM25 ranks the candidates; the ranking is then
refined with what a conversation knows and a bag of words does not:

- a turn is read in its neighbourhood: an answer rarely repeats the words
  of the question it answers, so each turn inherits a decaying share of the
  best-scoring neighbours within the same stretch of conversation;
- a name in the query that is the sender of a turn favours that turn;
- a date in the query favours turns written on that day or in that month.

Snippets come from FTS5 itself, run over the few hits in a scratch
in-memory index, so they highlight exactly what the search matched.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from .queries import STOP_WORDS, date_spans, names_in
from .recall import RECALL_TOOLS, excerpt
from .store import StoreError, TurnStore, own_text
from .turns import Turn, TurnKind

TOKENIZER = "porter unicode61 remove_diacritics 2"

ROLE_KINDS: dict[str, frozenset[TurnKind]] = {
    "user": frozenset({TurnKind.USER}),
    "assistant": frozenset({TurnKind.ASSISTANT}),
    "tool": frozenset({TurnKind.TOOL_CALL, TurnKind.TOOL_RESULT}),
    "event": frozenset({TurnKind.EVENT}),
    "note": frozenset({TurnKind.NOTE}),
}

_WORD = re.compile(r"[^\W_]+(?:\*)?|\"[^\"]+\"", re.UNICODE)


@dataclass(frozen=True, slots=True)
class SearchTuning:
    """The few constants of the ranking; general choices, not fitted to any data set."""

    max_postings: int = 6_000  # bounds the index work of one query (about 2.5 µs a posting)
    candidates: int = 100  # BM25 winners refined by the conversational signals
    filter_widening: int = 10  # with a kind filter, look this many times deeper for the kinds wanted
    neighbour_reach: int = 2  # turns either side that lend their score
    neighbour_decay: float = 0.5  # share lent by the nearest neighbour, halved per step
    stretch_gap_s: float = 6 * 3600  # turns further apart in time are not neighbours
    speaker_boost: float = 0.5  # a turn sent by someone the query names
    date_boost: float = 0.5  # a turn written on a date the query names
    common_share: float = 0.5  # a term in more than this share of turns tells nothing...
    common_min_turns: int = 1_000  # ...once there are enough turns for shares to mean something


@dataclass(frozen=True, slots=True)
class Found:
    """One search result with the passage that matched."""

    turn: Turn
    score: float  # higher is better
    snippet: str


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Ranked hits and how the query was read."""

    hits: tuple[Found, ...]
    terms: tuple[str, ...]  # what was searched
    dropped: tuple[str, ...] = ()  # left out: no meaning, or too common to be worth their cost
    recent_only: int | None = None  # only this many of the latest turns could be searched


@dataclass(frozen=True, slots=True)
class _Term:
    text: str  # as the person typed it
    expression: str  # as FTS5 receives it
    postings: int  # turns containing it


@dataclass(frozen=True, slots=True)
class _Meta:
    ts: float
    kind: str  # a TurnKind value
    sender: str | None
    recall: bool


_RECALL_KINDS = (TurnKind.TOOL_CALL.value, TurnKind.TOOL_RESULT.value)


@dataclass
class HistorySearch:
    """Search over all turns of one store."""

    store: TurnStore
    tuning: SearchTuning = field(default_factory=SearchTuning)
    zone: ZoneInfo | None = None  # how dates in a query are read; UTC when unset

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._scratch = sqlite3.connect(":memory:", check_same_thread=False)
        self._scratch.executescript(
            f"CREATE VIRTUAL TABLE words USING fts5(body, tokenize='{TOKENIZER}');"
            "CREATE VIRTUAL TABLE words_seen USING fts5vocab(words, instance);"
            f"CREATE VIRTUAL TABLE hits USING fts5(body, tokenize='{TOKENIZER}');"
        )
        with self.store.transaction() as db:
            db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.turns_vocab"
                " USING fts5vocab(main, turns_fts, row)"
            )

    def close(self) -> None:
        self._scratch.close()

    # -- the query ---------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        roles: Collection[str] | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> SearchResult:
        """The turns that best answer `query`, best first.

        `roles` keeps only some kinds of turn (keys of ROLE_KINDS); `since`
        and `until` are epoch seconds, inclusive. Calls to the recall tools
        and their results are never returned: they are copies of older turns.
        """
        kinds = _kinds_for(roles)
        with self._lock:
            terms, dropped = self._read_query(query)
            terms, costly = self._within_budget(terms, max(self.store.last_id(), 1))
            dropped += tuple(t.text for t in costly)
            if not terms:
                return SearchResult((), (), dropped)
            low, high = self._id_range(since, until)
            recent_only = None
            if terms[0].postings > self.tuning.max_postings:
                # Even the rarest term is everywhere: search only the latest
                # stretch of history that holds a budget's worth of it, and say so.
                start = self._budget_start(terms[0].expression, low, high)
                if start > low:
                    low, recent_only = start, high - start + 1
            expression = " OR ".join(t.expression for t in terms)
            scored = self._candidates(expression, low, high, kinds)
            ranked = self._refine(scored, query)
            chosen = self._filter(ranked, kinds, since, until, limit)
            turns = {t.id: t for t in self.store.get_many(i for i, _ in chosen)}
            snippets = self._snippets(expression, [turns[i] for i, _ in chosen if i in turns])
        hits = tuple(
            Found(turns[i], round(score, 4), snippets.get(i, ""))
            for i, score in chosen
            if i in turns
        )
        return SearchResult(hits, tuple(t.text for t in terms), dropped, recent_only)

    def _read_query(self, query: str) -> tuple[list[_Term], tuple[str, ...]]:
        """Meaningful terms of the query with their document counts."""
        pieces = _WORD.findall(query)
        meaningful, dropped = [], []
        for piece in pieces:
            bare = piece.strip('"*').lower()
            if piece.startswith('"'):
                meaningful.append(piece)
            elif bare in STOP_WORDS or (len(bare) < 2 and not bare.isdigit()):
                dropped.append(bare)
            else:
                meaningful.append(piece)
        if not meaningful:  # a query of stop words only still means something
            meaningful, dropped = [p for p in pieces if p.strip('"*')], []
        terms: dict[str, _Term] = {}
        for piece in meaningful:
            term = self._term(piece)
            if term is not None and term.expression not in terms:
                terms[term.expression] = term
        return sorted(terms.values(), key=lambda t: t.postings), tuple(dict.fromkeys(dropped))

    def _term(self, piece: str) -> _Term | None:
        if piece.startswith('"'):
            words = _WORD.findall(piece.strip('"'))
            if not words:
                return None
            stems = [s for w in words for s in self._stems(w.strip("*"))]
            counts = [self._postings(s) for s in stems]
            phrase = " ".join(w.strip("*") for w in words)
            return _Term(piece, f'"{phrase}"', min(counts) if counts else 0)
        prefix = piece.endswith("*")
        word = piece.rstrip("*")
        stems = self._stems(word)
        if not stems:
            return None
        if prefix:
            count = self._prefix_postings(stems[0])
            return _Term(word + "*", f'"{word}"*', count)
        return _Term(word, f'"{word}"', max(self._postings(s) for s in stems))

    def _stems(self, word: str) -> list[str]:
        """The index terms FTS5 makes of a word (the same tokenizer as the store)."""
        self._scratch.execute("INSERT INTO words (rowid, body) VALUES (1, ?)", (word,))
        try:
            rows = self._scratch.execute(
                "SELECT term FROM words_seen WHERE doc = 1 ORDER BY offset"
            ).fetchall()
        finally:
            self._scratch.execute("DELETE FROM words WHERE rowid = 1")
        return [r[0] for r in rows]

    def _postings(self, stem: str) -> int:
        row = self.store.conn.execute(
            "SELECT doc FROM temp.turns_vocab WHERE term = ?", (stem,)
        ).fetchone()
        return int(row[0]) if row else 0

    def _prefix_postings(self, stem: str) -> int:
        rows = self.store.conn.execute(
            "SELECT doc FROM temp.turns_vocab WHERE term >= ? AND term < ? LIMIT 500",
            (stem, stem + "\U0010ffff"),
        ).fetchall()
        return sum(int(r[0]) for r in rows)

    def _within_budget(self, terms: list[_Term], total: int) -> tuple[list[_Term], list[_Term]]:
        """Keep the rarest terms whose postings fit the budget; always one."""
        present = [t for t in terms if t.postings > 0]
        if not present:
            return [], []
        if total >= self.tuning.common_min_turns:
            informative = [t for t in present if t.postings <= total * self.tuning.common_share]
        else:
            informative = present
        kept, left = [], []
        spent = 0
        for term in informative or present[:1]:
            if kept and spent + term.postings > self.tuning.max_postings:
                left.append(term)
                continue
            kept.append(term)
            spent += term.postings
        left.extend(t for t in present if t not in kept and t not in left)
        return kept, left

    def _budget_start(self, expression: str, low: int, high: int) -> int:
        """The lowest ID of the newest `max_postings` turns matching `expression`."""
        row = self.store.conn.execute(
            "SELECT MIN(rowid) FROM (SELECT rowid FROM turns_fts WHERE turns_fts MATCH ?"
            " AND rowid BETWEEN ? AND ? ORDER BY rowid DESC LIMIT ?)",
            (expression, low, high, self.tuning.max_postings),
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else low

    def _id_range(self, since: float | None, until: float | None) -> tuple[int, int]:
        # IDs follow time (the store refuses a turn dated before its
        # predecessor), so a time window is an ID range the index can seek.
        db = self.store.conn
        low, high = 1, self.store.last_id()
        if since is not None:
            row = db.execute("SELECT id FROM turns WHERE ts >= ? ORDER BY ts LIMIT 1", (since,)).fetchone()
            low = int(row[0]) if row else high + 1
        if until is not None:
            row = db.execute(
                "SELECT id FROM turns WHERE ts <= ? ORDER BY ts DESC LIMIT 1", (until,)
            ).fetchone()
            high = int(row[0]) if row else 0
        return low, high

    def _candidates(
        self, expression: str, low: int, high: int, kinds: frozenset[str] | None
    ) -> dict[int, float]:
        """BM25 winners. With a kind filter, the best of the wanted kinds join the
        best overall (which stay, to lend their scores to their neighbours)."""
        count = self.tuning.candidates
        ranked = (
            "SELECT rowid, bm25(turns_fts) AS s FROM turns_fts WHERE turns_fts MATCH ?"
            " AND rowid BETWEEN ? AND ? ORDER BY s LIMIT ?"
        )
        try:
            if kinds is None:
                rows = self.store.conn.execute(ranked, (expression, low, high, count)).fetchall()
            else:
                wide = self.store.conn.execute(
                    f"SELECT f.rowid, f.s, t.kind FROM ({ranked}) f JOIN turns t ON t.id = f.rowid"
                    " ORDER BY f.s",
                    (expression, low, high, count * self.tuning.filter_widening),
                ).fetchall()
                wanted = [r for r in wide if r[2] in kinds][:count]
                rows = wide[:count] + wanted
        except sqlite3.OperationalError as exc:
            raise StoreError(f"cannot search for {expression!r}: {exc}") from exc
        # SQLite's bm25 is negative, more negative is better; flip it.
        return {int(r[0]): -float(r[1]) for r in rows}

    # -- ranking -----------------------------------------------------------

    def _refine(self, scored: dict[int, float], query: str) -> list[tuple[int, float, _Meta]]:
        """Candidates and their neighbours, rescored with the conversational signals."""
        if not scored:
            return []
        tuning = self.tuning
        reach = tuning.neighbour_reach
        meta = self._meta({i + d for i in scored for d in range(-reach, reach + 1)})
        # Each scoring turn lends its score to the turns around it; a turn
        # keeps, for each distance, the best loan it received.
        loans: dict[int, list[float]] = {}
        for lender, score in scored.items():
            source = meta.get(lender)
            if source is None or source.recall:
                continue
            for step in range(1, reach + 1):
                for borrower in (lender - step, lender + step):
                    target = meta.get(borrower)
                    if target is None or abs(target.ts - source.ts) > tuning.stretch_gap_s:
                        continue
                    slots = loans.setdefault(borrower, [0.0] * (reach + 1))
                    if score > slots[step]:
                        slots[step] = score
        named = names_in(query)
        spans = date_spans(query, self.zone)
        ranked = []
        for turn_id in scored.keys() | loans.keys():
            info = meta.get(turn_id)
            if info is None or info.recall:
                continue
            total = scored.get(turn_id, 0.0)
            slots = loans.get(turn_id)
            if slots:
                total += sum(tuning.neighbour_decay**step * slots[step] for step in range(1, reach + 1))
            if total <= 0:
                continue
            if named and info.sender and info.sender.casefold() in named:
                total *= 1 + tuning.speaker_boost
            if spans and any(start <= info.ts < end for start, end in spans):
                total *= 1 + tuning.date_boost
            ranked.append((turn_id, total, info))
        ranked.sort(key=lambda entry: (-entry[1], -entry[0]))
        return ranked

    def _meta(self, ids: Iterable[int]) -> dict[int, _Meta]:
        wanted = json.dumps(sorted(i for i in ids if i > 0))
        rows = self.store.conn.execute(
            "SELECT id, ts, kind, sender, tool_name FROM turns"
            " WHERE id IN (SELECT value FROM json_each(?))",
            (wanted,),
        ).fetchall()
        return {
            tid: _Meta(ts, kind, sender, tool_name in RECALL_TOOLS and kind in _RECALL_KINDS)
            for tid, ts, kind, sender, tool_name in rows
        }

    @staticmethod
    def _filter(
        ranked: Sequence[tuple[int, float, _Meta]],
        kinds: frozenset[str] | None,
        since: float | None,
        until: float | None,
        limit: int,
    ) -> list[tuple[int, float]]:
        chosen = []
        for turn_id, score, info in ranked:
            if kinds is not None and info.kind not in kinds:
                continue
            if since is not None and info.ts < since:
                continue
            if until is not None and info.ts > until:
                continue
            chosen.append((turn_id, score))
            if len(chosen) == limit:
                break
        return chosen

    def _snippets(self, expression: str, turns: Sequence[Turn]) -> dict[int, str]:
        if not turns:
            return {}
        db = self._scratch
        db.executemany(
            "INSERT INTO hits (rowid, body) VALUES (?, ?)",
            [(t.id, own_text(t)) for t in turns],
        )
        try:
            rows = db.execute(
                "SELECT rowid, snippet(hits, 0, '«', '»', '…', 24) FROM hits WHERE hits MATCH ?",
                (expression,),
            ).fetchall()
        finally:
            db.execute("DELETE FROM hits")
        found = {int(r[0]): " ".join(str(r[1]).split()) for r in rows}
        for turn in turns:  # a hit found through its neighbours matched no word itself
            if turn.id not in found:
                found[turn.id] = excerpt(own_text(turn))
        return found


def _kinds_for(roles: Collection[str] | None) -> frozenset[str] | None:
    if not roles:
        return None
    unknown = sorted(set(roles) - set(ROLE_KINDS))
    if unknown:
        raise ValueError(
            f"unknown role(s) {', '.join(unknown)}; use any of {', '.join(ROLE_KINDS)}"
        )
    return frozenset(k.value for r in roles for k in ROLE_KINDS[r])


def plain_expression(query: str) -> str:
    """The baseline: every word of the query, OR-ed, for plain BM25."""
    words = re.findall(r"[^\W_]+", query)
    return " OR ".join(f'"{w}"' for w in words) or '""'
