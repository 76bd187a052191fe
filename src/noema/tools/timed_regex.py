"""Regular expressions with a time limit, for the searches the model asks for.

Python's `re` backtracks without bound (`(a|aa)+$` against a long line runs
for hours) and holds the GIL while it does, so even a worker thread freezes
the event loop and no cancellation reaches it. The `regex` package speaks the
same dialect (`VERSION0` is `re`'s syntax: groups, backreferences,
lookaround, `\\d` and friends), takes a `timeout`, and with `concurrent=True`
releases the GIL while it matches. google-re2 would run in linear time but
refuses backreferences and lookaround, which the tool description promises;
a bounded backtracking engine keeps the promised syntax and bounds the cost.

A `Budget` is one call's allowance: a deadline for the whole call, a cap on
any single match, and the caller's stop event, looked at before each match.
Each match first runs holding the GIL for at most `HOLD_SECONDS` (nearly all
finish in microseconds), and only a slow one is run again releasing it:
giving the GIL back and taking it again on every line costs milliseconds
as soon as another thread wants it.
"""

from __future__ import annotations

import re
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, TypeAlias

from .errors import ToolError, quoted

CALL_SECONDS = 20.0  # all the matching one tool call may do
MATCH_SECONDS = 1.0  # one line, one path or one file's first pass: far beyond a sane pattern
HOLD_SECONDS = 0.02  # how long a match may hold the GIL (the event loop waits that long)

if TYPE_CHECKING:
    import regex

# For annotations only: the `regex` package is loaded by the first search.
Pattern: TypeAlias = "regex.Pattern[str]"

# Constructs that see past the end of a line, that one line's text matches
# differently once the line sits inside a file, or that make a search return
# other than the leftmost match: with any of them, a pass over the whole file
# could miss a line that matches on its own, so the search goes line by line.
_LINE_BOUND = re.compile(
    r"""\\[AZzG]                   # start and end of the text itself, start of the search
    | \(\?(?:<?!|\(|>|-)           # negative lookaround, conditions, atomic groups,
                                   # a flag (MULTILINE) switched off
    | \(\*                         # backtracking verbs: (*SKIP), (*FAIL)...
    | [*+?}]\+                     # possessive repetition: no backtracking
    | \(\?[a-zA-Z]*[bepr]          # best, enhanced, POSIX or reverse matching
    | \{[^}]*[deis][^}]*\}         # fuzzy matching
    """,
    re.VERBOSE,
)


class SearchStopped(ToolError):
    """The caller was cancelled; the worker ends without a result."""


@dataclass(frozen=True, slots=True)
class Query:
    """A model's regular expression, to be matched against each line.

    `whole` is the same pattern with MULTILINE (`^` and `$` at each line), to
    search a whole file at once and jump from one matching line to the next:
    a few calls per file instead of one per line. It is None when the pattern
    holds something for which that could miss a matching line (see
    `_LINE_BOUND`). `spans_tell` says that a match of `whole` lying within
    one line proves that line matches (no lookaround sees the next line).
    """

    exact: Pattern
    whole: Pattern | None
    spans_tell: bool


def compile_query(query: str) -> Query:
    """A model's regular expression, in Python's syntax, or a ToolError saying
    what is wrong with it."""
    import regex  # loaded by the first search: an idle agent does not carry it

    try:
        exact = regex.compile(query, regex.VERSION0)
        bound = _LINE_BOUND.search(query) is not None
        whole = None if bound else regex.compile(query, regex.VERSION0 | regex.MULTILINE)
        looks_around = "(?=" in query or "(?<=" in query
    except (regex.error, OverflowError, RecursionError) as exc:
        raise ToolError(
            f"the query is not a valid regular expression ({exc}); escape special "
            "characters such as ( [ . * with a backslash"
        ) from None
    return Query(exact, whole, whole is not None and not looks_around)


def compile_internal(source: str) -> Pattern:
    """A pattern built by our own code (a glob turned into a regex)."""
    import regex  # loaded by the first search: an idle agent does not carry it

    return regex.compile(source, regex.VERSION0)


class Budget:
    """The time one call may spend matching, and its stop event."""

    def __init__(
        self,
        stop: threading.Event,
        seconds: float = CALL_SECONDS,
        per_match: float = MATCH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stop = stop
        self.seconds = seconds
        self.per_match = per_match
        self._clock = clock
        self._deadline = clock() + seconds

    def check(self, where: Callable[[], str]) -> float:
        """The seconds left for the next match; raises when stopped or spent."""
        if self.stop.is_set():
            raise SearchStopped("the search was cancelled")
        left = self._deadline - self._clock()
        if left <= 0:
            raise ToolError(
                f"the search took longer than {self.seconds:g} s in all and was stopped at "
                f"{where()}; narrow it with a file pattern (e.g. 'src/**/*.py') or a more "
                "specific query"
            )
        return left

    def lines(self, query: Query, text: str, name: str) -> Iterator[tuple[int, str]]:
        """The numbered lines of `text` (as `str.splitlines` cuts them, like
        file_read) that `query` matches; `name` is the file, for refusals."""
        lines = text.splitlines()
        first = 0  # the first line not yet decided
        if query.whole is not None:
            joined = "\n".join(lines)
            starts = list(accumulate((len(line) + 1 for line in lines), initial=0))
            while first < len(lines):
                try:
                    found = self._next(query.whole, joined, starts[first], name)
                except TimeoutError:
                    break  # the line-by-line pass below names the line at fault
                if found is None:
                    return
                # The leftmost match: no line before the one it starts in can match.
                index = bisect_right(starts, found.start()) - 1
                line = lines[index]
                proven = query.spans_tell and "\n" not in found.group()
                if proven or self.search(query.exact, line, lambda: f"{name}:{index + 1}"):
                    yield index + 1, line
                first = index + 1
        for index in range(first, len(lines)):
            if self.search(query.exact, lines[index], lambda: f"{name}:{index + 1}"):
                yield index + 1, lines[index]

    def _next(self, pattern: Pattern, text: str, pos: int, name: str) -> regex.Match[str] | None:
        """The leftmost match of the MULTILINE twin from `pos` on.

        It gets a quarter of a match's time: a sane pattern needs milliseconds
        for a whole file, and a slow one is better caught line by line, where
        the refusal can name the line."""
        limit = min(self.check(lambda: name), self.per_match / 4)
        return _timed(pattern.search, text, limit, pos=pos)

    def search(self, pattern: Pattern, text: str, where: Callable[[], str]) -> bool:
        """Whether `pattern` occurs in `text`, within the budget.

        `where` names the text (a path and line) for the refusal, lazily, since
        it is needed only when the time runs out.
        """
        limit = min(self.check(where), self.per_match)
        try:
            return _timed(pattern.search, text, limit) is not None
        except TimeoutError:
            if limit < self.per_match:
                self.check(where)  # the whole call's time ran out: say so
            raise ToolError(
                f"the pattern took longer than {limit:g} s on {where()}; simplify it "
                "(avoid nested or overlapping repetition such as (a+)+ or (a|aa)+) or "
                "narrow the search with a file pattern"
            ) from None

    def match(self, pattern: Pattern, text: str) -> bool:
        """Whether `pattern` matches at the start of `text`, within the budget."""
        where = lambda: quoted(text)  # noqa: E731 - built only on failure
        limit = min(self.check(where), self.per_match)
        try:
            return _timed(pattern.match, text, limit) is not None
        except TimeoutError:
            raise ToolError(
                f"the pattern took longer than {limit:g} s on the name {where()}; use fewer "
                "'**' and '*' in a row"
            ) from None


def _timed(
    find: Callable[..., regex.Match[str] | None], text: str, limit: float, **where: int
) -> regex.Match[str] | None:
    """`find` (a pattern's search or match) on `text` within `limit` seconds:
    briefly holding the GIL, then, if that was not enough, from the start
    again without it. Raises TimeoutError past the limit."""
    try:
        return find(text, timeout=min(limit, HOLD_SECONDS), **where)
    except TimeoutError:
        if limit <= HOLD_SECONDS:
            raise
    return find(text, timeout=limit - HOLD_SECONDS, concurrent=True, **where)
