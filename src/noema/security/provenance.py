"""Whose words a context holds, and whose words a call carries.

A stranger's mail, a web page, a tool server's answer or an event from an
unauthorised sender can carry instructions, and a model may follow them
whatever its prompt says. What must hold is about actions, not beliefs: a
tool with side effects waits for the person's yes (see
`approvals.ApprovalGate`) whenever

- **outside words lead** the conversation (`leading`): something holding
  outside words that the person has not yet taken up; or
- **its arguments carry what only outside words said** (`ArgumentCheck`):
  an address, a URL, a path, a run of words, or a whole value (a short
  command, a line) that appears in the outside text of the context and in
  none of the person's own, whoever spoke last.

"Taken up" is decided by time, not by position in the history: outside
words lose their lead only to a message the person *wrote after the agent
had answered them* (an assistant text that still stands; a cycle that was
cancelled answered nothing). A person's message typed while a stranger's
mail waited in the queue, or while the model was still thinking about it,
lends it no authority, whatever order the history shows them in.

Provenance is a property of the data (`Turn.sources`, set when a turn is
written): an event delivery from an unauthorised sender, a tool result the
tool did not vouch for, a read of stored text that shows outside words (see
`tools.registry`: fail closed). What lives in the prompt rather than in the
turns, pinned notes and the save point's sentences, comes in as
`OutsideItem`s with the time of the words they rest on.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..memory.turns import Flag, Source, SourceKind, Turn, TurnKind, sources_of, sources_union
from ..perception.untrusted import plain_words

_NAMED = 3  # sources named in a sentence; the rest are counted

# What kind of words each source kind is, for the person's question.
_KIND_WORDS: dict[SourceKind, tuple[str, str]] = {  # (one, several)
    SourceKind.MAIL: ("a stranger's mail", "strangers' mails"),
    SourceKind.TELEGRAM: ("a Telegram message from someone else",
                          "Telegram messages from others"),
    SourceKind.WEB: ("a web page", "web pages"),
    SourceKind.WEBHOOK: ("a webhook call from someone without your token",
                         "webhook calls from others"),
    SourceKind.LOG: ("a log line", "log lines"),
    SourceKind.FOLDER: ("a change in a watched folder", "changes in watched folders"),
    SourceKind.EVENT: ("an event from someone who is not you", "events from others"),
    SourceKind.SERVER: ("a tool server's answer", "tool servers' answers"),
    SourceKind.TOOL: ("what a tool read", "what tools read"),
    SourceKind.FILE: ("a file that holds outside words", "files that hold outside words"),
}


def describe(sources: Iterable[Source]) -> str:
    """Outside sources in the person's words: "a stranger's mail
    (mallory@example.net)", "web pages (https://a.example/, https://b.example/)
    and a log line (/var/log/app.log)"."""
    by_kind: dict[SourceKind, list[str]] = {}
    for source in sources_union(sources):
        by_kind.setdefault(source.kind, [])
        if source.who:
            by_kind[source.kind].append(source.who)
    parts = []
    for kind in sorted(by_kind, key=list(SourceKind).index):
        names = by_kind[kind]
        one, several = _KIND_WORDS[kind]
        words = several if len(names) > 1 else one
        if names:
            shown = ", ".join(names[:_NAMED])
            more = len(names) - _NAMED
            words += f" ({shown}{f' and {more} more' if more > 0 else ''})"
        parts.append(words)
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


# -- what leads -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutsideItem:
    """Something in the context holding outside words that is not a turn of
    the session: a pinned note, a sentence of the save point. `ts` is when
    the words it rests on were written."""

    ts: float
    sources: tuple[Source, ...]


def _holds_outside(turn: Turn) -> bool:
    # The model's own turns may carry sources (written while outside words
    # led); they are read back as such, but what leads is the data itself.
    return (turn.has(Flag.OUTSIDE) and not turn.has(Flag.DISCARDED)
            and turn.kind in (TurnKind.TOOL_RESULT, TurnKind.EVENT, TurnKind.NOTE))


def _is_answer(turn: Turn) -> bool:
    return (turn.kind is TurnKind.ASSISTANT and not turn.has(Flag.DISCARDED)
            and bool(turn.content.strip()))


def is_person(turn: Turn) -> bool:
    """A message the person wrote (not a note of ours, not a discarded one)."""
    return (turn.kind is TurnKind.USER and not turn.has(Flag.SYNTHETIC)
            and not turn.has(Flag.DISCARDED))


def leading(turns: Sequence[Turn], extra: Iterable[OutsideItem] = ()) -> tuple[Source, ...]:
    """The sources of the outside words that lead: those the person has not
    taken up by writing after the agent answered them."""
    answers = sorted(t.ts for t in turns if _is_answer(t))
    last_person = max((t.ts for t in turns if is_person(t)), default=None)

    def taken_up(ts: float) -> bool:
        if last_person is None:
            return False
        answer = next((a for a in answers if a > ts), None)
        return answer is not None and last_person > answer

    found: list[Source] = []
    for turn in turns:
        if _holds_outside(turn) and not taken_up(turn.ts):
            found.extend(sources_of(turn))
    for item in extra:
        if not taken_up(item.ts):
            found.extend(item.sources)
    return sources_union(found)


# -- what a call's arguments carry ------------------------------------------------

# A run of this many words shared with outside text is a sentence of its own,
# not a chance phrase ("let me know if you have any" is eight words; common
# phrases of that length are rare in a person's request and a stranger's mail
# at once, and the cost of a miss is one question).
RUN_WORDS = 8
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.UNICODE)
_URL = re.compile(r"\b(?:[a-z][a-z0-9+.-]*://|www\.)[^\s<>\"'`)\]]+", re.IGNORECASE)
_HOST = re.compile(r"\b(?:[a-z0-9-]+\.)+(?:[a-z]{2,24})\b", re.IGNORECASE)
_PATHLIKE = re.compile(r"(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*|\b[\w-]+\.[a-z0-9]{1,8}\b",
                       re.IGNORECASE)
# A name in the home folder, a hidden file: ~/Documents, .bashrc (apart: a
# pattern that starts with its literal is found fast).
_HOMELIKE = re.compile(r"~/[\w.-]+|(?<![\w./~-])\.[a-z_][\w.-]{2,}", re.IGNORECASE)
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.])")
# A key, a token, an encoded payload (`echo … | base64 -d | sh`): one long run
# of letters and digits together is as particular as an address.
_TOKEN = re.compile(r"[\w+/=-]{24,}")  # and holding a digit and a letter (see _marks)
# An address or a host written out so that no pattern sees it, which a model
# writes back plainly: "mallory at evil dot example", "evil dot example".
_SPELT_HOST = re.compile(r"\b([a-z0-9-]+(?:\s+dot\s+[a-z0-9-]+)+)\b", re.IGNORECASE)
_SPELT_ADDRESS = re.compile(r"([\w.+-]+)\s+at\s+([a-z0-9-]+(?:\s+dot\s+[a-z0-9-]+)+)\b",
                            re.IGNORECASE)
_WORD = re.compile(r"\w+", re.UNICODE)
# Names every conversation holds: never taken as what only a stranger said.
_TRIVIAL = frozenset({"/", "./", "../", "~/"})

# Letters of other scripts that look like Latin ones, which a model may write
# back as the Latin letter ("evіl.example" with a Cyrillic і): both sides are
# compared in Latin letters.
_LOOKALIKES = str.maketrans(
    "аеорсухіјѕԁһӏԛԝАВЕКМНОРСТХІЈЅУ"  # Cyrillic
    "οαρνκτιυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",  # Greek
    "aeopcyxijsdhlqwABEKMHOPCTXIJSY"
    "oapvktiuxABEZHIKMNOPTYX")
# What hides a name from a pattern: invisible characters (and their visible
# form, as a display shows them), and the "defanged" spellings of a dot and an
# at sign ("evil[.]example", "hxxp://").
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180e"
                        "\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufe00-\ufe0f\ufeff]"
                        "|[⟨<]U\\+[0-9A-F]{4,6}[⟩>]")
_DEFANGED = re.compile(r"[\[({](?:(\.|dot)|(@|at))[\])}]|\b(h)xx(ps?)\b", re.IGNORECASE)


def _fold(text: str) -> str:
    """A text as its names would be written plainly: compatibility forms
    (a fullwidth ＠), lookalike letters, hidden characters and defanged
    dots and at signs folded, so that the two sides of a comparison agree."""
    if not text.isascii():
        text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text).translate(_LOOKALIKES))
    elif "U+" in text:  # an invisible character as a display showed it
        text = _INVISIBLE.sub("", text)
    return _DEFANGED.sub(_undefang, text)


def _undefang(match: re.Match[str]) -> str:
    if match.group(1):
        return "."
    if match.group(2):
        return "@"
    return match.group(3) + "tt" + match.group(4)


@dataclass(frozen=True, slots=True)
class Carried:
    """What a call's arguments carry that only outside words said."""

    sources: tuple[Source, ...]
    samples: tuple[str, ...]  # what was found, shortened, for the question


def _strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Each string in the arguments, with the name of the argument it is in."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _strings(item, str(name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item, key)


# A command is repeated whole, or one of its steps: `cd x && rm -rf drafts`.
_COMMAND_ARGUMENTS = frozenset({"command", "cmd", "script"})
# When something happens is said in common phrases ("tomorrow at 9") that any
# mail may hold, and carries nothing of a stranger's on its own.
_TIME_ARGUMENTS = frozenset({"when", "rule", "duration", "since", "until", "timezone",
                             "urgency", "timeout"})
_STEPS = re.compile(r"&&|\|\||[;|\n]")
# A value this long is a sentence of the stranger's when it is theirs whole,
# however few words it has ("rm -rf drafts", "pwned by a stranger").
PHRASE_TOKENS = 3
_SPACES = re.compile(r"\s+")


def shorten_phrase(phrase: str, most: int = 60) -> str:
    """A phrase as the person's question quotes it."""
    return phrase if len(phrase) <= most else phrase[:most - 1] + "…"


def _flat(text: str) -> str:
    """A (folded) text as one line of lowercase words, to find a phrase in."""
    return _SPACES.sub(" ", text).strip().lower()


def _phrases(key: str, value: str) -> set[str]:
    """The phrases of an argument to look for whole in outside text: the
    value, and each step of a command."""
    if key in _TIME_ARGUMENTS:
        return set()
    parts = [value, *(_STEPS.split(value) if key in _COMMAND_ARGUMENTS else ())]
    found = set()
    for part in parts:
        flat = _flat(part)
        if len(flat.split(" ")) >= PHRASE_TOKENS:
            found.add(flat)
    return found


def _marks(text: str) -> set[str]:
    """Addresses, URLs, host names, path-like names (and the last name of
    each path), IP addresses and long tokens in a (folded) text, lowercased."""
    found: set[str] = set()
    for pattern in (_ADDRESS, _URL, _HOST, _PATHLIKE, _HOMELIKE, _TOKEN):
        for match in pattern.finditer(text):
            mark = match.group(0).rstrip(".,;:!?").lower()
            if pattern is _TOKEN and not any(c.isdigit() for c in mark):
                continue  # a long word or identifier, not a key
            if len(mark) >= 4 and mark not in _TRIVIAL and any(c.isalpha() for c in mark):
                found.add(mark)
                if pattern in (_PATHLIKE, _HOMELIKE) and "/" in mark.rstrip("/"):
                    # "~/.bashrc" and "/home/ana/.bashrc" name one file.
                    last = mark.rstrip("/").rsplit("/", 1)[1]
                    if len(last) >= 4 and any(c.isalpha() for c in last):
                        found.add(last)
    found.update(match.group(0) for match in _IPV4.finditer(text))
    if " dot " in text.lower():
        for match in _SPELT_HOST.finditer(text):
            found.add(re.sub(r"\s+dot\s+", ".", match.group(1)).lower())
        for match in _SPELT_ADDRESS.finditer(text):
            host = re.sub(r"\s+dot\s+", ".", match.group(2))
            found.add(f"{match.group(1)}@{host}".lower())
    return found


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _runs(words: Sequence[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + RUN_WORDS]) for i in range(len(words) - RUN_WORDS + 1)}


@dataclass(slots=True)
class _Texts:
    marks: set[str]
    runs: set[tuple[str, ...]]
    flat: str = ""  # the words in one line, to find a phrase in


def _texts(texts: Iterable[str]) -> _Texts:
    marks: set[str] = set()
    runs: set[tuple[str, ...]] = set()
    flats: list[str] = []
    for text in texts:
        plain = _fold(plain_words(text))
        marks |= _marks(plain)
        runs |= _runs(_words(plain))
        flats.append(_flat(plain))
    return _Texts(marks, runs, "\n".join(flats))


class ArgumentCheck:
    """Finds what a call's arguments carry that only outside words said.

    Outside text: the turns of the context that hold outside words (and the
    outside notes and save-point sentences, as `extra` texts). The person's
    own: their messages, and what reads showed that holds no outside words
    (their files, their own turns). The model's own turns count for neither,
    nor do results that echo its calls (an error, a write's confirmation, a
    question's refusal): they are what may be laundering a stranger's words.
    `reads(tool)` tells a tool without side effects.
    """

    def __init__(self, turns: Sequence[Turn],
                 extra: Iterable[tuple[str, tuple[Source, ...]]] = (), *,
                 reads: Callable[[str], bool] = lambda tool: True,
                 cache: dict[int, _Texts] | None = None) -> None:
        # Read when first asked: most calls (every read) never are.
        self._reads = reads
        self._turns = list(turns)
        self._extra = list(extra)
        self._cache = cache if cache is not None else {}
        self._read: tuple[list[tuple[_Texts, tuple[Source, ...]]], _Texts] | None = None
        # The gate and the registry both ask about the call being run: once is enough.
        self._last: tuple[str, Carried | None] | None = None

    def _texts_of(self, turn: Turn) -> _Texts:
        found = self._cache.get(turn.id)
        if found is None:
            found = self._cache[turn.id] = _texts([turn.content])
        return found

    def _index(self) -> tuple[list[tuple[_Texts, tuple[Source, ...]]], _Texts]:
        if self._read is not None:
            return self._read
        outside: list[tuple[_Texts, tuple[Source, ...]]] = []
        own: list[_Texts] = []
        for turn in self._turns:
            if turn.has(Flag.DISCARDED):
                continue
            if _holds_outside(turn):
                outside.append((self._texts_of(turn), sources_of(turn)))
            elif is_person(turn) or self._shows_own(turn):
                own.append(self._texts_of(turn))
        outside += [(_texts([text]), sources) for text, sources in self._extra]
        mine = _Texts(set(), set())
        if outside:
            for texts in own:
                mine.marks |= texts.marks
                mine.runs |= texts.runs
            mine.flat = "\n".join(texts.flat for texts in own)
        self._read = (outside, mine)
        return self._read

    def _shows_own(self, turn: Turn) -> bool:
        """A read's result, or an event, that holds nobody's words but the person's."""
        if turn.sources or turn.has(Flag.ERROR):
            return False
        if turn.kind is TurnKind.EVENT:
            return True
        return turn.kind is TurnKind.TOOL_RESULT and self._reads(turn.tool_name or "")

    def carried(self, arguments: dict[str, Any] | str) -> Carried | None:
        """What the arguments carry that only outside words said, or None."""
        key = arguments if isinstance(arguments, str) else json.dumps(
            arguments, sort_keys=True, default=str)
        if self._last is None or self._last[0] != key:
            self._last = (key, self._carried(arguments))
        return self._last[1]

    def _carried(self, arguments: dict[str, Any] | str) -> Carried | None:
        outside, own = self._index()
        if not outside:
            return None
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError:
                arguments = {"": arguments}
        named = [(key, _fold(s)) for key, s in _strings(arguments)]
        strings = [s for _, s in named]
        marks = set().union(*(_marks(s) for s in strings)) - own.marks
        runs = set().union(*(_runs(_words(s)) for s in strings)) - own.runs
        phrases = {p for key, s in named for p in _phrases(key, s) if p not in own.flat}
        sources: list[Source] = []
        samples: list[str] = []
        for texts, from_ in outside:
            hit_marks = sorted(marks & texts.marks)
            hit_runs = runs & texts.runs
            hit_phrases = sorted(p for p in phrases if p in texts.flat)
            if not hit_marks and not hit_runs and not hit_phrases:
                continue
            sources.extend(from_)
            samples.extend(hit_marks)
            if hit_runs:
                samples.append(" ".join(min(hit_runs)) + " …")
            samples.extend(shorten_phrase(p) for p in hit_phrases)
        if not sources:
            return None
        return Carried(sources_union(sources), tuple(dict.fromkeys(samples))[:_NAMED])
