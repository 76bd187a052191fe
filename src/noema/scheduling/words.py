"""The words both time grammars share, in English and Spanish: weekdays,
months, times of day and the parts of a day.

Text is compared after `normalise`: lower case, accents dropped ("mañana"
and "manana" are one word, as people type them both), spaces collapsed.
Each `take_*` function finds one piece in the text and returns what it
read together with the text left once the piece is cut out, so a grammar
can check at the end that no word was skipped unread.

The parts of a day stand for these hours when no time is given (and turn
"5" into 17:00 when they follow it, as in "a las 5 de la tarde"):

| words | hour |
|---|---|
| morning, "por la mañana", "de la mañana" | 09:00 |
| noon, "mediodía" | 12:00 |
| afternoon, "por la tarde", "de la tarde" | 16:00 |
| evening | 19:00 |
| night, tonight, "por la noche", "esta noche" | 21:00 |
| midnight, "medianoche" | 00:00 |
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Python's weekday numbers: Monday 0 ... Sunday 6.
WEEKDAYS: dict[str, int] = {
    "monday": 0, "mon": 0, "lunes": 0,
    "tuesday": 1, "tue": 1, "tues": 1, "martes": 1,
    "wednesday": 2, "wed": 2, "miercoles": 2,
    "thursday": 3, "thu": 3, "thurs": 3, "jueves": 3,
    "friday": 4, "fri": 4, "viernes": 4,
    "saturday": 5, "sat": 5, "sabado": 5,
    "sunday": 6, "sun": 6, "domingo": 6,
}
MONTHS: dict[str, int] = {
    "january": 1, "jan": 1, "enero": 1,
    "february": 2, "feb": 2, "febrero": 2,
    "march": 3, "mar": 3, "marzo": 3,
    "april": 4, "apr": 4, "abril": 4,
    "may": 5, "mayo": 5,
    "june": 6, "jun": 6, "junio": 6,
    "july": 7, "jul": 7, "julio": 7,
    "august": 8, "aug": 8, "agosto": 8,
    "september": 9, "sep": 9, "sept": 9, "septiembre": 9, "setiembre": 9,
    "october": 10, "oct": 10, "octubre": 10,
    "november": 11, "nov": 11, "noviembre": 11,
    "december": 12, "dec": 12, "diciembre": 12,
}
WEEKDAY_WORD = "|".join(sorted(WEEKDAYS, key=len, reverse=True))
MONTH_WORD = "|".join(sorted(MONTHS, key=len, reverse=True))

# The hour each part of the day stands for, and whether it is after noon
# (so that "5 in the afternoon" is 17:00 but "5 in the morning" 05:00). The
# night runs past midnight: "2 at night", "las 2 de la noche" are 02:00, not
# 14:00, while "10 at night" is 22:00 and "las 12 de la noche" midnight.
PART_HOURS: dict[str, int] = {
    "morning": 9, "afternoon": 16, "evening": 19, "night": 21,
    "noon": 12, "midnight": 0, "early": 5,
}
_AFTER_NOON = {"afternoon", "evening", "night"}
_NIGHT_AFTER_MIDNIGHT = range(1, 6)  # "1" to "5 at night" are the small hours


def _in_part(hour: int, part: str | None) -> int:
    """The 24-hour clock hour that `hour`, said with a part of the day, means."""
    if part == "night" and hour == 12:
        return 0
    if part == "night" and hour in _NIGHT_AFTER_MIDNIGHT:
        return hour
    if part in _AFTER_NOON and 1 <= hour < 12:
        return hour + 12
    return hour

_PART_WORDS: dict[str, str] = {
    "manana": "morning", "morning": "morning",
    "tarde": "afternoon", "afternoon": "afternoon",
    "evening": "evening",
    "noche": "night", "night": "night",
    "madrugada": "early",
}

# Filler words a phrase may hold around the pieces the grammars read.
FILLER = frozenset({
    "on", "the", "at", "of", "and", "el", "la", "las", "los", "a", "al", "de", "del", "y",
    "para", "for", "this", "este", "esta",
})


class PhraseError(ValueError):
    """Text that the time grammars cannot read; the message says what to write instead."""


@dataclass(frozen=True, slots=True)
class TimeOfDay:
    """A wall-clock time read from words; `part` is the part of the day named, if any."""

    hour: int
    minute: int = 0
    part: str | None = None

    def __post_init__(self) -> None:
        if not (0 <= self.hour <= 23 and 0 <= self.minute <= 59):
            raise PhraseError(f"{self.hour}:{self.minute:02d} is not a time of day")


# Numbers written as words, read as digits ("a las nueve", "in two hours",
# "cada diez minutos", "a la una"). Spanish "once" (11) only after "las":
# in English "at once" is no time.
NUMBER_WORDS: dict[str, int] = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty five": 45,
    "un": 1, "uno": 1, "una": 1, "dos": 2, "tres": 3, "cuatro": 4, "cinco": 5, "seis": 6,
    "siete": 7, "ocho": 8, "nueve": 9, "diez": 10, "doce": 12, "quince": 15,
    "veinte": 20, "treinta": 30, "cuarenta y cinco": 45,
}
_NUMBER_WORD = re.compile(
    r"\b(" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")\b")


def normalise(text: str) -> str:
    """Lower case, accents dropped, number words as digits, punctuation other
    than ':' '-' '/' '*' ',' as spaces."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text.lower())
                    if not unicodedata.combining(c))
    plain = re.sub(r"[^\w:\-/*,.+]", " ", plain)
    plain = re.sub(r"(?<=\w)[.,](?=\s|$)", " ", plain)  # a sentence's commas and full stop
    plain = re.sub(r"\blas\s+once\b", "las 11", " ".join(plain.split()))
    return _NUMBER_WORD.sub(lambda m: str(NUMBER_WORDS[m.group(1)]), plain)


def cut(text: str, match: re.Match[str]) -> str:
    """`text` without the matched piece."""
    return " ".join((text[:match.start()] + " " + text[match.end():]).split())


def leftover(text: str) -> list[str]:
    """The words of `text` that are not filler: what a grammar failed to read."""
    return [w for w in text.replace(",", " ").split() if w not in FILLER]


_MERIDIEM = r"(?P<ampm>a\.?m\.?|p\.?m\.?)"
_CLOCK = r"(?P<h>\d{1,2})(?:[:.h](?P<m>\d{2}))?"
_SPANISH_FRACTION = r"(?:\s+y\s+(?P<frac>media|cuarto)|\s+menos\s+cuarto(?P<less>))?"
_PART_AFTER = r"(?:\s+(?:de\s+la|in\s+the|at)\s+(?P<part>manana|tarde|noche|madrugada|morning|afternoon|evening|night))?"

_TIME_PATTERNS: tuple[re.Pattern[str], ...] = (
    # "a las 8:30", "a la 1", "a las 5 y media de la tarde", "a las 9 menos cuarto"
    re.compile(r"\ba\s+las?\s+" + _CLOCK + _SPANISH_FRACTION + r"(?:\s*h\b)?" + _PART_AFTER
               + r"\b"),
    # "at 5pm", "5 p.m.", "at 9:30 am"
    re.compile(r"\b(?:at\s+)?" + _CLOCK + r"\s*" + _MERIDIEM + r"(?!\w)"),
    # "at 9", "at 17:00", "at 5 in the afternoon"
    re.compile(r"\bat\s+" + _CLOCK + _PART_AFTER + r"\b"),
    # a bare "17:30"
    re.compile(r"(?<![\d/-])(?P<h>\d{1,2}):(?P<m>\d{2})(?![\d:])" + _PART_AFTER),
)
_NOON = re.compile(r"\b(?:at\s+|a\s+)?(?P<word>noon|midday|mediodia|midnight|medianoche)\b")
_PART_ALONE = re.compile(
    r"\b(?:(?:in\s+the|por\s+la|de\s+la|en\s+la|this|esta)\s+)?"
    r"(?P<part>morning|afternoon|evening|night|tonight|manana|tarde|noche|madrugada)\b"
)
# Only these forms of "mañana" are the morning; a bare "mañana" is tomorrow.
_MANANA_AS_MORNING = re.compile(r"\b(?:por|de|en)\s+la\s+manana\b|\besta\s+manana\b")


def take_time(text: str) -> tuple[TimeOfDay | None, str]:
    """A time of day named in `text` (with its part of the day), and the rest of the text."""
    for pattern in _TIME_PATTERNS:
        match = pattern.search(text)
        if match:
            return _clock_time(match), cut(text, match)
    match = _NOON.search(text)
    if match:
        word = match.group("word")
        part = "midnight" if word in ("midnight", "medianoche") else "noon"
        return TimeOfDay(PART_HOURS[part], 0, part), cut(text, match)
    return None, text


def take_part_of_day(text: str) -> tuple[str | None, bool, str]:
    """A part of the day named alone ("por la tarde", "tonight", "this morning"):
    the part, whether it also names today ("tonight", "esta tarde"), and the rest."""
    for match in _PART_ALONE.finditer(text):
        word = match.group("part")
        whole = match.group(0)
        if word == "manana" and not _MANANA_AS_MORNING.fullmatch(whole):
            continue  # a bare "mañana" is tomorrow, read by the day grammar
        today = word == "tonight" or whole.startswith(("this ", "esta "))
        part = "night" if word == "tonight" else _PART_WORDS[word]
        return part, today, cut(text, match)
    return None, False, text


def with_part(time: TimeOfDay | None, part: str | None) -> TimeOfDay | None:
    """The time a phrase means once its part of the day is known: the part's own
    hour when no time was given, the afternoon hour for "5" with "de la tarde"."""
    if part is None:
        return time
    if time is None:
        return TimeOfDay(PART_HOURS[part], 0, part)
    if time.part is None and part in _AFTER_NOON:
        return TimeOfDay(_in_part(time.hour, part), time.minute, part)
    return time


def _clock_time(match: re.Match[str]) -> TimeOfDay:
    groups = match.groupdict()
    hour, minute = int(groups["h"]), int(groups.get("m") or 0)
    if groups.get("frac") == "media":
        minute = 30
    elif groups.get("frac") == "cuarto":
        minute = 15
    elif groups.get("less") is not None:
        hour, minute = (hour - 1) % 24, 45
    ampm = (groups.get("ampm") or "").replace(".", "")
    if ampm:
        if not 1 <= hour <= 12:
            raise PhraseError(f"{hour} {ampm} is not a time: use 1 to 12 with am/pm, or 0 to 23")
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    part_word = groups.get("part")
    part = _PART_WORDS[part_word] if part_word else None
    if hour > 23 or minute > 59:
        raise PhraseError(f"{hour}:{minute:02d} is not a time of day")
    return TimeOfDay(_in_part(hour, part), minute, part)
