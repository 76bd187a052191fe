"""Token estimates without a tokenizer download.

No model vocabulary can be fetched at run time, so the estimate is a
character heuristic calibrated on English and Spanish prose and on code:
about four characters a token for words, fewer for punctuation-heavy text.
It errs on the high side so the context never silently overflows.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_WORDS = re.compile(r"\w+|[^\w\s]", re.UNICODE)

# Fixed cost of a message in chat formats (role markers, separators).
MESSAGE_OVERHEAD = 4


def estimate_tokens(text: str) -> int:
    """Estimated token count of a text."""
    if not text:
        return 0
    pieces = 0
    long_chars = 0
    for match in _WORDS.finditer(text):
        piece = match.group()
        pieces += 1
        if len(piece) > 6:
            long_chars += len(piece) - 6
    # Long words split into several tokens; roughly one extra per 4 characters.
    return pieces + long_chars // 4 + 1


# Characters a token takes in ordinary prose; only a first guess, checked below.
_CHARS_PER_TOKEN = 4
_ATTEMPTS = 6


class Fit(NamedTuple):
    """A piece of a text that fits a token budget."""

    chars: int  # characters taken
    tokens: int  # their estimate


def fitting_chars(text: str, budget: int, *, from_end: bool = False) -> Fit:
    """How many characters from the start of `text` (or from its end) fit in
    `budget` estimated tokens: the whole text, or a piece that fills at least
    nine tenths of the budget (for budgets of a hundred tokens and more; a few
    guesses at the text's density get there).

    Only a window of about `budget` tokens is ever measured, so this stays
    cheap on a text of megabytes.
    """
    if budget <= 0 or not text:
        return Fit(0, 0)
    best = Fit(0, 0)
    size = min(len(text), budget * _CHARS_PER_TOKEN)
    for _ in range(_ATTEMPTS):
        piece = text[len(text) - size :] if from_end else text[:size]
        cost = estimate_tokens(piece)
        if cost <= budget:
            best = Fit(size, cost)
            if size == len(text):
                break
            grown = min(len(text), size * budget // max(cost, 1))  # grow at this density
            if grown < len(text) and cost * 10 >= budget * 9:
                break  # full enough; but try the whole text when it may fit
            size = grown
        else:
            size = min(size - 1, size * budget // cost)  # shrink by the overshoot
        if size <= best.chars:
            break
    if best.chars:
        return best
    # A piece never costs more tokens than its length plus one, so this always fits.
    size = min(len(text), budget - 1)
    piece = text[len(text) - size :] if from_end else text[:size]
    return Fit(size, estimate_tokens(piece))
