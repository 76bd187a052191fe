"""Aggregation keys of log lines: a line's shape with its variable parts replaced.

"connection error to 10.0.0.3 after 512 ms" and "connection error to
10.0.0.9 after 77 ms" have one key, so they are counted together.
"""

from __future__ import annotations

import re

from ..events import MAX_KEY

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
# Each pattern, its placeholder, and the strings of which the text must hold
# one for the pattern to match at all (a cheap test that spares a regex scan
# of most lines: keys are computed for every line read).
_PLACEHOLDERS: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
                r"(?:Z|[+-]\d{2}:?\d{2})?"), "<time>", (":",)),
    (re.compile(rf"\b{_MONTH}\s+\d{{1,2}}\s+\d{{1,2}}:\d{{2}}:\d{{2}}\b"), "<time>", (":",)),
    (re.compile(r"\b\d{1,2}/" + _MONTH + r"/\d{4}:\d{2}:\d{2}:\d{2}(?:\s[+-]\d{4})?"), "<time>",
     ("/",)),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>", (":",)),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
     "<uuid>", ("-",)),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b"), "<ip>", (".",)),
    (re.compile(r"(?<![\w:])(?=[0-9a-f:]*\d)(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?![\w:])",
                re.I), "<ip>", (":",)),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>", ("0x", "0X")),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\b", re.I), "<hex>", ()),
    (re.compile(r"\d+(?:[.,]\d+)*"), "<n>", ()),
)


def normalise_line(line: str) -> str:
    """The aggregation key of a log line: its shape with variable parts replaced."""
    key = line.strip()
    for pattern, placeholder, needs in _PLACEHOLDERS:
        if not needs or any(map(key.__contains__, needs)):
            key = pattern.sub(placeholder, key)
    key = " ".join(key.split())  # runs of whitespace as one space
    return key[:MAX_KEY]


