"""Token estimates without a tokenizer download, and their calibration.

No model vocabulary can be fetched at run time, so the estimate is a
heuristic over the pieces byte-level BPE tokenizers split text into. It was
fitted on half of a corpus (the tool descriptions, the system prompt, the
chronicler's protocol and blocks, docs and source code) against SmolLM2's
tokenizer and checked on the other half: on the held-out half the tool
descriptions come out 5 % over their real count (the previous estimate was
26 % over), prose 0 to 4 % over, source code 3 % over and the chronicler's
rendered turns within 1 % (they were 3 to 5 % under). `bench/token_estimates.py`
repeats the comparison, kind by kind and half by half. Prose in languages the tokenizer knows less (Spanish with an
English vocabulary) costs more than estimated: a server that counts
(`calibrate`) corrects that.

Rules, in the tokenizers' own terms: a run of letters is one token plus one
per four letters past the fifth; a number is a token per two digits (small
models split numbers digit by digit, larger ones three at a time); an
underscore is a token; a run of punctuation merges about
three characters a token (JSON's `": "` and `"}` are single tokens); a line
break with its indentation, or a run of spaces, is one; a character outside
ASCII costs one more (its UTF-8 bytes rarely merge).

`calibrate` lets the composition root plug in a real counter (a provider's
`count_tokens`, the server's tokenizer): it measures sample texts both ways
and scales every later estimate by the ratio, bounded, falling back to the
plain estimate when the counter has nothing to say.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

log = logging.getLogger(__name__)

_PIECES = re.compile(r"[^\W\d_]+|\d+|_|[^\w\s]+|\n[ \t]*|[ \t]{2,}", re.UNICODE)

# Fixed cost of a message in chat formats (role markers, separators).
MESSAGE_OVERHEAD = 4

# Letters a token holds past the first few, and punctuation characters a token merges.
_SHORT_WORD = 5
_LETTERS_PER_TOKEN = 4
_PUNCTUATION_PER_TOKEN = 3

# A real counter may move the estimate this far at most: past it the counter
# is more likely wrong (counting something else) than the heuristic.
_SCALE_BOUNDS = (0.6, 2.0)
_scale = 1.0


def raw_estimate(text: str) -> int:
    """The heuristic count of a text, before any calibration."""
    if not text:
        return 0
    tokens = 0.0
    for match in _PIECES.finditer(text):
        piece = match.group()
        first = piece[0]
        if first.isalpha():
            tokens += 1 + max(0, len(piece) - _SHORT_WORD) / _LETTERS_PER_TOKEN
        elif first.isdigit():
            tokens += (len(piece) + 1) // 2
        elif first == "_" or first.isspace():
            tokens += 1
        else:
            tokens += max(1.0, len(piece) / _PUNCTUATION_PER_TOKEN)
        if not piece.isascii():
            tokens += sum(1 for char in piece if ord(char) > 127)
    return int(tokens) + 1


def estimate_tokens(text: str) -> int:
    """Estimated token count of a text (calibrated when a counter was plugged in)."""
    if not text:
        return 0
    raw = raw_estimate(text)
    return raw if _scale == 1.0 else int(raw * _scale) + 1


def scale() -> float:
    """The factor the estimates are multiplied by (1.0 until calibrated)."""
    return _scale


def set_scale(factor: float) -> float:
    """Scale every later estimate by `factor`, kept within sane bounds; returns it."""
    global _scale
    low, high = _SCALE_BOUNDS
    _scale = min(max(factor, low), high)
    return _scale


Counter = Callable[[Sequence[str]], Awaitable[list[int] | None]]


async def calibrate(count: Counter, samples: Sequence[str]) -> float | None:
    """Measure `samples` with a real counter and scale the estimates to match.

    Returns the new scale, or None (estimates unchanged) when the counter
    cannot count or answers something unusable.
    """
    texts = [t for t in samples if t]
    if not texts:
        return None
    try:
        real = await count(texts)
    except Exception as exc:  # a counter is an optional nicety: never fatal
        log.info("token counter failed, keeping the estimates: %s", exc)
        return None
    if not real or len(real) != len(texts) or any(n < 0 for n in real):
        return None
    estimated = sum(raw_estimate(t) for t in texts)
    if estimated <= 0 or sum(real) <= 0:
        return None
    factor = set_scale(sum(real) / estimated)
    log.info("token estimates scaled by %.3f after counting %d texts", factor, len(texts))
    return factor


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
