"""Whether a cycle's tool calls still make progress, judged without the model.

A small model stuck in a loop rarely repeats itself to the letter: it calls
`file_write` with a counter in the file name, `get_current_time` whose result
changes every second, the same note with a new timestamp. Two calls are
*alike* when they name the same tool and their arguments differ only in
noise: runs of digits and long hexadecimal runs (counters, times, IDs), or,
for long arguments, a few characters out of many (a junk name over the same
content). A call that is alike several calls of the cycle whose results were
alike too changes nothing the model can use: the cycle refuses it, and ends
if the model makes it again (`cycle.py`).

Short arguments must match exactly once the noise is gone: `{"path": "a.py"}`
and `{"path": "b.py"}` are two reads, not one read twice. Results are judged
the same way, so paging through a file (offsets change, and so does the text)
is progress.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

# Digits (counters, times, sizes) and hexadecimal runs of eight or more with a
# digit in them (hashes, versions, random IDs) say nothing about what a call does.
_NOISE = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b|\d+", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
# Below this many characters (noise removed) two texts are alike only when equal.
LONG_TEXT = 120
# Two long texts are alike from this similarity on (difflib's ratio).
SIMILAR = 0.9
# Only this much of a long text is compared: its head and its tail.
_HEAD, _TAIL = 1_500, 500

# Calls alike this many earlier calls of the cycle whose results were alike
# too are refused: the model is told, and the cycle ends if it calls again.
ALIKE_RUN = 4


def noise_free(text: str) -> str:
    """`text` with its noise replaced by `#` and its spaces folded."""
    return _SPACE.sub(" ", _NOISE.sub("#", text)).strip()


def _canonical(arguments: str) -> str:
    """Arguments in one spelling when they are JSON."""
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True, ensure_ascii=False)
    except (ValueError, RecursionError):
        return arguments


def _clipped(text: str) -> str:
    return text if len(text) <= _HEAD + _TAIL else text[:_HEAD] + text[-_TAIL:]


def alike(first: str, second: str) -> bool:
    """Whether two noise-free texts say the same thing: equal, or long and
    nearly equal."""
    if first == second:
        return True
    if min(len(first), len(second)) < LONG_TEXT:
        return False
    matcher = difflib.SequenceMatcher(None, _clipped(first), _clipped(second), autojunk=False)
    return matcher.real_quick_ratio() >= SIMILAR and matcher.quick_ratio() >= SIMILAR \
        and matcher.ratio() >= SIMILAR


@dataclass(frozen=True, slots=True)
class SeenCall:
    """A call the cycle ran, noise removed: its tool, arguments and result."""

    tool: str
    arguments: str
    result: str


def seen_call(tool: str, arguments: str, result: str) -> SeenCall:
    """The record of a call that ran, as `repeats` compares it."""
    return SeenCall(tool, noise_free(_canonical(arguments)), noise_free(result))


def repeats(history: Sequence[SeenCall], tool: str, arguments: str) -> int:
    """How many earlier calls a call about to run would only repeat: calls of
    the same tool with alike arguments whose results were alike the newest
    such call's result (0 when the calls so far moved on)."""
    wanted = noise_free(_canonical(arguments))
    same = [c for c in history if c.tool == tool and alike(c.arguments, wanted)]
    if not same:
        return 0
    newest = same[-1].result
    return sum(1 for c in same if alike(c.result, newest))
