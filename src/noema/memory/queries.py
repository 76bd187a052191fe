"""What a search query says beyond its words: which words carry no meaning,
and the names and dates it mentions, in English and Spanish."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

# Function words of English and Spanish, plus the words people use to ask a
# question about the past; none of them says what the question is about.
STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing done down during
    each either else ever few for from further get got had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up upon us very was we were what
    when where which while who whom whose why will with would you your yours yourself
    yourselves ll re ve s t d m don didn doesn isn wasn aren weren won
    tell say said mention mentioned remember recall anything something thing things
    please again time times
    el la los las un una unos unas lo le les al del de en y o u que qué como cómo cuando
    cuándo donde dónde quien quién quienes cual cuál cuales por para con sin sobre entre
    hasta desde es son era eran fue fueron ser estar está están estaba he ha han había hay
    mi mis tu tus su sus nuestro nuestra nos se me te ya muy más pero si sí no ni este
    esta estos estas ese esa esos esas aquel aquella eso esto algo nada dijo dije decir
    recuerdas recuerdo
    """.split()
)

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan", "enero"), ("february", "feb", "febrero"),
            ("march", "mar", "marzo"), ("april", "apr", "abril"), ("may", "mayo"),
            ("june", "jun", "junio"), ("july", "jul", "julio"),
            ("august", "aug", "agosto"), ("september", "sep", "sept", "septiembre", "setiembre"),
            ("october", "oct", "octubre"), ("november", "nov", "noviembre"),
            ("december", "dec", "diciembre"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_DAY_FIRST = re.compile(
    rf"\b(\d{{1,2}}){_ORD}\s+(?:de\s+)?({_MONTH})\.?,?\s+(?:de\s+|del\s+)?(\d{{4}})\b", re.I
)
_MONTH_FIRST = re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}}){_ORD},?\s+(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,?\s+(?:de\s+|del\s+)?(\d{{4}})\b", re.I)
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def names_in(query: str) -> frozenset[str]:
    """Capitalised words past the first, read as names (folded for comparison)."""
    words = re.findall(r"[^\W\d_]+", query)
    return frozenset(
        w.casefold() for w in words[1:] if w[0].isupper() and w.casefold() not in STOP_WORDS
    )


def date_spans(query: str, zone: ZoneInfo | None = None) -> list[tuple[float, float]]:
    """Epoch intervals [start, end) of the days or months a query names."""
    tz = zone or timezone.utc
    spans: list[tuple[float, float]] = []

    def day(year: int, month: int, number: int) -> None:
        try:
            start = datetime(year, month, number, tzinfo=tz)
        except ValueError:
            return
        spans.append((start.timestamp(), (start + timedelta(days=1)).timestamp()))

    covered: list[tuple[int, int]] = []
    for match in _DAY_FIRST.finditer(query):
        day(int(match.group(3)), _MONTHS[match.group(2).lower()], int(match.group(1)))
        covered.append(match.span())
    for match in _MONTH_FIRST.finditer(query):
        day(int(match.group(3)), _MONTHS[match.group(1).lower()], int(match.group(2)))
        covered.append(match.span())
    for match in _ISO_DAY.finditer(query):
        day(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    for match in _MONTH_YEAR.finditer(query):
        if any(a <= match.start() < b for a, b in covered):
            continue
        year, month = int(match.group(2)), _MONTHS[match.group(1).lower()]
        start = datetime(year, month, 1, tzinfo=tz)
        end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=tz)
        spans.append((start.timestamp(), end.timestamp()))
    return spans
