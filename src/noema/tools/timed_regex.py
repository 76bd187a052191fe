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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import regex

from .errors import ToolError, quoted, shorten

CALL_SECONDS = 20.0  # all the matching one tool call may do
MATCH_SECONDS = 1.0  # one line (or one path): far beyond what a sane pattern needs

Pattern = regex.Pattern


class SearchStopped(ToolError):
    """The caller was cancelled; the worker ends without a result."""


def compile_query(query: str) -> Pattern:
    """A model's regular expression, in Python's syntax, or a ToolError saying
    what is wrong with it."""
    try:
        return regex.compile(query, regex.VERSION0)
    except (regex.error, OverflowError, RecursionError) as exc:
        raise ToolError(
            f"the query is not a valid regular expression ({exc}); escape special "
            "characters such as ( [ . * with a backslash"
        ) from None


def compile_internal(source: str) -> Pattern:
    """A pattern built by our own code (a glob turned into a regex)."""
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

    def search(self, pattern: Pattern, text: str, where: Callable[[], str]) -> bool:
        """Whether `pattern` occurs in `text`, within the budget.

        `where` names the text (a path and line) for the refusal, lazily, since
        it is needed only when the time runs out.
        """
        limit = min(self.check(where), self.per_match)
        try:
            return pattern.search(text, timeout=limit, concurrent=True) is not None
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
            return pattern.match(text, timeout=limit, concurrent=True) is not None
        except TimeoutError:
            raise ToolError(
                f"the pattern took longer than {limit:g} s on the name {where()}; use fewer "
                "'**' and '*' in a row"
            ) from None
