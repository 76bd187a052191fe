"""Token estimates without a tokenizer download.

No model vocabulary can be fetched at run time, so the estimate is a
character heuristic calibrated on English and Spanish prose and on code:
about four characters a token for words, fewer for punctuation-heavy text.
It errs on the high side so the context never silently overflows.
"""

from __future__ import annotations

import re

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
