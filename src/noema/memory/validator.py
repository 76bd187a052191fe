"""The validator of save points: deterministic, never skipped.

A save point may cite only turns the chronicler was shown: the ones cited by
the previous save point, the ones of the block it narrates, and the older
ones that recall tools brought back inside that block. A citation is
`{cite:ID}` (several IDs may share one marker: `{cite: 12, 14}`); anything
that looks like a citation but is not exactly that is rejected, because an
ID that is almost right is an altered ID.

It also checks what it can of the form: both sections present, a Journey in
prose (not a list), citations placed inline rather than piled at the end of
a paragraph or on a line of their own, and not so short as to be terse.

And it checks that each citation rests on its turn (`memory.support`): the
clause a marker ends against the turn it cites. A save point with more than
a quarter of its citations unsupported is rejected, the failure naming each
such sentence and what its turn says instead, so that the retry can fix them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from . import support as checking
from .recall import surfaced_ids
from .render import compact_ranges
from .tokens import estimate_tokens
from .turns import Turn, TurnKind

# IDs start at 1 and are written plainly: a leading zero, a sign, a letter or
# a decimal point makes a different string, so it is not the ID.
_ID = r"[1-9][0-9]{0,17}"
CITATION = re.compile(rf"\{{cite:[ \t]*({_ID}(?:[ \t]*,[ \t]*{_ID})*)[ \t]*\}}")
# Anything a model might mean as a citation, well formed or not.
_CITATION_LIKE = re.compile(
    r"(?:[{\[][ \t]*cite\b|\([ \t]*cite[ \t]*:)[^}\])\n]{0,60}[}\])]?", re.IGNORECASE
)
_HEADING = re.compile(r"^[ \t]{0,3}(?:#{1,6}[ \t]*(.+?)[ \t#]*|\*\*(.+?)\*\*:?)[ \t]*$", re.MULTILINE)
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*•+‣▪–]|\d{1,3}[.)])[ \t]+\S", re.MULTILINE)
_FENCE = re.compile(r"^\s*```[\w-]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)
_SENTENCE_END = re.compile(r"[.!?…][\"'”»)\]]*[ \t]*$")

STATE_NAMES = frozenset({"state", "current state", "estado", "estado actual"})
JOURNEY_NAMES = frozenset({"journey", "the journey", "el viaje", "viaje"})
# More IDs than this side by side are a pile, not a citation at its place.
MAX_IDS_TOGETHER = 3
COVERABLE_KINDS = frozenset({TurnKind.USER, TurnKind.ASSISTANT})


@dataclass(frozen=True, slots=True)
class Failure:
    """One reason a save point was rejected, written for the chronicler and the person."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Citable:
    """The IDs a save point may cite, by where they come from."""

    previous: frozenset[int]  # cited by the previous save point
    block: frozenset[int]  # the turns being compacted
    recalled: frozenset[int]  # older turns that recall tools surfaced inside the block

    @property
    def all(self) -> frozenset[int]:
        return self.previous | self.block | self.recalled


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the validator found in one attempt."""

    text: str  # the save point as it would enter the context (fences and preamble removed)
    failures: tuple[Failure, ...]
    cited: tuple[int, ...]  # sorted, distinct
    covered: int  # user and assistant turns of the block that are cited
    coverable: int  # user and assistant turns in the block
    seconds: float
    notes: tuple[str, ...] = field(default=())
    support: checking.SupportReport | None = None  # each citation against its turn

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def coverage(self) -> float:
        return self.covered / self.coverable if self.coverable else 1.0

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


@dataclass(frozen=True, slots=True)
class Citation:
    ids: tuple[int, ...]
    start: int
    end: int


def citations(text: str) -> list[Citation]:
    """The well-formed citations of a text, in order."""
    return [
        Citation(tuple(int(n) for n in re.split(r"[ \t]*,[ \t]*", m.group(1).strip())), m.start(), m.end())
        for m in CITATION.finditer(text)
    ]


def cited_ids(text: str) -> frozenset[int]:
    """Every ID a text cites with a well-formed citation."""
    return frozenset(n for c in citations(text) for n in c.ids)


def citable(
    previous_text: str | None,
    block: Sequence[Turn],
    existing: Callable[[Iterable[int]], Iterable[int]] | None = None,
) -> Citable:
    """The allowed IDs for a save point over `block` after `previous_text`.

    `existing` filters recalled IDs down to turns that really exist (the
    store's `get_many`, as IDs); a recall result quoting text that looks
    like a header must not make an unknown number citable.
    """
    recalled: set[int] = set()
    for turn in block:
        recalled |= surfaced_ids(turn)
    if existing is not None and recalled:
        recalled = set(existing(recalled))
    return Citable(
        previous=cited_ids(previous_text or ""),
        block=frozenset(t.id for t in block),
        recalled=frozenset(recalled),
    )


def validate(
    raw: str,
    *,
    allowed: Citable,
    block: Sequence[Turn],
    min_journey_words: int = 40,
    min_coverage: float = 0.0,
    sources: Sequence[checking.Source] | None = None,
    clause_vectors: Mapping[str, checking.Vector] | None = None,
    language: str = "en",
) -> Verdict:
    """Check a save point; the verdict lists every failure found, not just the first.

    `sources` are the turns its citations are checked against (by default the
    block's, on words alone: `support.Evidence` gathers the older cited turns
    and the vectors); `clause_vectors` the clauses' embeddings, if any."""
    started = time.perf_counter()
    text, notes = _normalise(raw)
    failures: list[Failure] = []
    found = citations(text)
    cited = sorted({n for c in found for n in c.ids})

    failures.extend(_malformed(text))
    permitted = allowed.all
    invented = [n for n in cited if n not in permitted]
    if invented:
        failures.append(Failure(
            "invented_id",
            f"it cites {_listing(invented)}, which {'is' if len(invented) == 1 else 'are'} not "
            f"among the turns you were given; the citable IDs are {compact_ranges(permitted)}. "
            "Cite only those, exactly as written.",
        ))

    state, journey, extra = _sections(text)
    if state is None:
        failures.append(Failure("missing_state", "the State section is missing."))
    if journey is None:
        failures.append(Failure("missing_journey", "the Journey section is missing."))
    elif not journey.strip():
        failures.append(Failure("missing_journey", "the Journey section is empty."))
    for heading in extra:
        failures.append(Failure(
            "extra_section",
            f"it has a section {heading!r}; a save point has only the State and the Journey.",
        ))

    journey_text = journey or ""
    words = len(CITATION.sub(" ", journey_text).split())
    if journey is not None:
        failures.extend(_form(journey_text, words, min_journey_words))

    coverable = {t.id for t in block if t.kind in COVERABLE_KINDS}
    covered = coverable & set(cited)
    if journey is not None and coverable:
        new_in_journey = cited_ids(journey_text) & allowed.block
        if not new_in_journey:
            failures.append(Failure(
                "no_new_citations",
                "the Journey cites none of the new turns; cite the turns each part of the "
                "story comes from.",
            ))
    if coverable and len(covered) / len(coverable) < min_coverage:
        failures.append(Failure(
            "low_coverage",
            f"it cites {len(covered)} of the {len(coverable)} messages of the person and the "
            f"agent in the block; at least {min_coverage:.0%} should be cited where they matter.",
        ))
    if sources is None:
        sources = checking.sources_of(block, language=language)
    permitted_sources = [s for s in sources if s.id in permitted]
    support = checking.judge(text, permitted_sources, clause_vectors=clause_vectors,
                             language=language)
    failures.extend(_unsupported(support, permitted_sources))
    notes.extend(support.notes)
    doubtful = support.unsupported()
    if doubtful and not support.rejects:
        notes.append(f"{len(doubtful)} citation(s) may not rest on their turn, too few to reject: "
                     + "; ".join(f"turn {j.claim.turn_id} for \"{j.claim.sentence}\""
                                 for j in doubtful[:SHOWN_UNSUPPORTED]))
    return Verdict(
        text=text,
        failures=tuple(failures),
        cited=tuple(cited),
        covered=len(covered),
        coverable=len(coverable),
        seconds=time.perf_counter() - started,
        notes=tuple(notes),
        support=support,
    )


def _normalise(raw: str) -> tuple[str, list[str]]:
    """Drop a code fence around the whole text and any preamble before the first section."""
    notes = []
    text = raw.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
        notes.append("a code fence around the save point was removed")
    for match in _HEADING.finditer(text):
        if _kind_of(match.group(1) or match.group(2)) is not None:
            if match.start() > 0 and text[: match.start()].strip():
                notes.append("text before the first section was removed")
            text = text[match.start():].strip()
            break
    return text, notes


def _kind_of(heading: str) -> str | None:
    name = re.sub(r"[^\w\s]", " ", heading.casefold())
    name = " ".join(name.split())
    if name in STATE_NAMES:
        return "state"
    if name in JOURNEY_NAMES:
        return "journey"
    return None


def _sections(text: str) -> tuple[str | None, str | None, list[str]]:
    """State, Journey and unexpected top headings. Headings inside the Journey are part of it."""
    marks = [(m.start(), m.end(), _kind_of(m.group(1) or m.group(2)), m.group(1) or m.group(2))
             for m in _HEADING.finditer(text)]
    state = journey = None
    extra: list[str] = []
    current: str | None = None
    bounds: dict[str, list[int]] = {}
    for start, end, kind, heading in marks:
        if kind is not None and kind not in bounds:
            if current is not None:
                bounds[current].append(start)
            bounds[kind] = [end]
            current = kind
        elif kind is None and current != "journey":
            extra.append(heading.strip())
    if current is not None:
        bounds[current].append(len(text))
    if "state" in bounds:
        a, b = bounds["state"]
        state = text[a:b].strip()
    if "journey" in bounds:
        a, b = bounds["journey"]
        journey = text[a:b].strip()
    return state, journey, extra


def _malformed(text: str) -> list[Failure]:
    # Both patterns start at the opening brace, so a well-formed citation and
    # its loose reading share their first character.
    good = {m.start() for m in CITATION.finditer(text)}
    bad = [m.group(0) for m in _CITATION_LIKE.finditer(text) if m.start() not in good]
    if not bad:
        return []
    shown = ", ".join(repr(b) for b in dict.fromkeys(bad))
    return [Failure(
        "malformed_citation",
        f"these citations are not well formed: {shown}. Write each as {{cite:ID}} with the ID "
        "exactly as given (digits only), e.g. {cite:42} or {cite: 42, 57}.",
    )]


def _form(journey: str, words: int, min_words: int) -> list[Failure]:
    failures = []
    items = _LIST_ITEM.findall(journey)
    if len(items) >= 2:
        failures.append(Failure(
            "bullet_list",
            f"the Journey has {len(items)} list items; it must be a narrative in prose "
            "paragraphs, not a list of points.",
        ))
    lonely = [
        line.strip() for line in journey.splitlines()
        if CITATION.search(line) and not re.sub(r"[\W_]", "", CITATION.sub("", line))
    ]
    if lonely:
        failures.append(Failure(
            "citation_only_line",
            f"{len(lonely)} line(s) hold only citations (e.g. {lonely[0]!r}); put each citation "
            "inside the sentence it supports.",
        ))
    trailing = 0
    for line in journey.splitlines():
        body = line.strip()
        if not body or not CITATION.search(body):
            continue
        tail = re.search(rf"(?:[ \t,;]*{CITATION.pattern})+[ \t.,;]*$", body)
        before = body[: tail.start()] if tail else ""
        if tail and _SENTENCE_END.search(before) and CITATION.sub("", before).strip():
            trailing += 1
    if trailing:
        failures.append(Failure(
            "trailing_citations",
            f"{trailing} line(s) end with citations after the last sentence; place each "
            "citation right after the words that come from that turn, before the full stop.",
        ))
    piles = _piles(journey)
    if piles:
        failures.append(Failure(
            "citation_pile",
            f"{piles} place(s) pile up more than {MAX_IDS_TOGETHER} IDs together; cite each "
            "idea where it appears in the story.",
        ))
    if words < min_words:
        failures.append(Failure(
            "terse",
            f"the Journey has {words} words; it is too terse to be a chronicle (at least "
            f"{min_words}). Narrate what happened, why, and how it turned.",
        ))
    return failures


def _piles(journey: str) -> int:
    found = citations(journey)
    piles, run = 0, 0
    previous_end = None
    for citation in found:
        adjacent = previous_end is not None and not re.sub(
            r"[\s,;]", "", journey[previous_end:citation.start]
        )
        run = run + len(citation.ids) if adjacent else len(citation.ids)
        if run > MAX_IDS_TOGETHER and (not adjacent or run - len(citation.ids) <= MAX_IDS_TOGETHER):
            piles += 1
        previous_end = citation.end
    return piles


SHOWN_UNSUPPORTED = 6  # sentences named in the failure; the retry fixes these first
_QUOTE_CHARS = 90


def _unsupported(report: checking.SupportReport, sources: Sequence[checking.Source]) -> list[Failure]:
    """The failure of a save point whose citations too often do not rest on their turns."""
    if not report.rejects:
        return []
    said = {s.id: s.text for s in sources}
    wrong = report.unsupported()
    lines = []
    for judgement in wrong[:SHOWN_UNSUPPORTED]:
        claim = judgement.claim
        quote = " ".join(said.get(claim.turn_id, "").split())
        if len(quote) > _QUOTE_CHARS:
            quote = quote[:_QUOTE_CHARS].rstrip() + "…"
        # The clause the marker ends, where the chronicler wrote it ("…" when
        # the sentence began earlier): it names the place to fix.
        shown = claim.clause if claim.sentence.startswith(claim.clause) else f"…{claim.clause}"
        lines.append(f'- "{shown} {{cite:{claim.turn_id}}}": turn {claim.turn_id} says "{quote}"')
    more = len(wrong) - SHOWN_UNSUPPORTED
    if more > 0:
        lines.append(f"- and {more} more")
    return [Failure(
        "unsupported_citations",
        f"{len(wrong)} of its {len(report.judgements)} citations do not rest on the turn they "
        f"cite (at most {checking.MAX_UNSUPPORTED_SHARE:.0%} may be doubtful):\n" + "\n".join(lines)
        + "\nCite the turn that says what each of these sentences says, or tell only what the "
        "cited turn says.",
    )]


def _listing(ids: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in ids[:12])
    more = f" and {len(ids) - 12} more" if len(ids) > 12 else ""
    return f"ID{'s' if len(ids) > 1 else ''} {shown}{more}"
