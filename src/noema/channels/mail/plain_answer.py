"""Whether a reply to a question says a plain yes or a plain no.

A guess at what the person meant could run what they never meant, so only
an answer with nothing to interpret counts:

- What the person wrote is what stands above the text their client
  quoted: lines starting with `>` are left out, and so is everything from a
  signature separator (`--`) or from the line that introduces quoted text
  ("On Tue, Noema wrote:", "El mar, Noema escribió:", "-----Original
  Message-----", Outlook's "From: Noema …") down.
- The first line the person wrote decides. It counts only when it is one of
  the words below alone, in any case, with at most `.` or `!` after it (and
  the Spanish `¡` before it): "Yes", "NO.", "¡Sí!".
- Anything questioning, hedged or mixed is no answer: a first line with
  anything else ("Yes? What is this about?", "yes, but not today", "I say
  yes"), or another line the person wrote that asks ("?") or answers the
  other way ("Yes" then "No.").

Other lines the person wrote ("Thanks", "Sent from my phone") do not change
a plain answer. Pure: no I/O.
"""

from __future__ import annotations

import re

YES_WORDS = frozenset({"yes", "sí", "si"})
NO_WORDS = frozenset({"no"})
# What a question tells the person counts, in their words.
WHAT_COUNTS = ("a reply whose first line is YES or NO alone (SÍ or NO in Spanish; a full stop "
               "or an exclamation mark may follow it), with no question or other answer "
               "beside it")

_BLANK = " \t\u00a0"  # around a line; any other character (an invisible one) is kept, and counts
_PLAIN = re.compile(r"¡?(?P<word>\w+)[.!]*")
# The line a client writes above the text it quotes.
_QUOTE_HEADER = re.compile(
    r"^(on\b.*\bwrote:|el\b.*\bescribi[oó]:|-{2,}\s*(original message|mensaje original)\s*-{2,}"
    r"|_{10,}|(from|de):\s.*)$", re.IGNORECASE)  # the last: Outlook's header of what it quotes


def plain_answer(text: str) -> bool | None:
    """True for a plain yes, False for a plain no, None for anything else
    (see the module's docstring for the rule)."""
    own = own_lines(text)
    if not own:
        return None
    first = _word(own[0])
    if first is None:
        return None
    for line in own[1:]:
        if "?" in line or "¿" in line or _word(line) not in (None, first):
            return None  # questioning, or answering both ways
    return first


def own_lines(text: str) -> list[str]:
    """The non-empty lines the person wrote above what their client quoted
    and above their signature, stripped."""
    lines = [line.strip(_BLANK)
             for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    own: list[str] = []
    for at, line in enumerate(lines):
        if line == "--" or line.startswith("-- "):
            break  # a signature follows
        if _QUOTE_HEADER.match(line):
            break
        if line.endswith(":") and _quote_follows(lines, at):
            break  # "Ana <ana@example.org> a écrit :" and the like
        if line.startswith(">"):
            continue
        if line:
            own.append(line)
    return own


def _word(line: str) -> bool | None:
    """The answer a line is, when it is an answer word alone."""
    found = _PLAIN.fullmatch(line)
    if found is None:
        return None
    word = found.group("word").casefold()
    if word in YES_WORDS:
        return True
    if word in NO_WORDS:
        return False
    return None


def _quote_follows(lines: list[str], at: int) -> bool:
    for line in lines[at + 1:]:
        if line:
            return line.startswith(">")
    return False
