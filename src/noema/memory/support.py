"""Does the cited turn say what the sentence says? The support check of citations.

A save point's citation `{cite:ID}` ends a clause: the words since the
previous citation, or since the sentence began. Each (clause, cited turn)
pair is judged on three signals, all cheap and deterministic:

- **words**: the share of the clause's content words, as stems (the Snowball
  stemmer of the save point's language), found in the turn, each weighed by
  its rarity in the *pool* (the turns the save point may cite and was shown:
  the block and the older cited turns), so that a name or a rare noun counts
  more than a word every turn has;
- **meaning**: the cosine of the clause's embedding and the turn's, when both
  vectors are at hand (the turns' are usually in the store already; the
  clauses' are embedded by the caller, in one batch);
- **who**: whether the clause names the turn's speaker, or only someone else
  of the pool.

The words count as they are and as a margin over the best *other* turn of
the pool; the meaning counts as that margin only. The margin is what tells a
right turn from a wrong one in the same block (a clause about a trip scores
well against every turn about that trip; the turn that says it scores best).
A turn that shares no word with the clause supports it only when the meaning
is close (`COSINE_FLOOR`), so a clause close to nothing is never merely weak.
A short reply ("yes", "sure, I will") is read with the turn it answers, and
the speakers' names are left to the speaker signal, not counted as words.

The signals are weighed into one score (a logistic model fitted on LoCoMo's
observations and their evidence turns, `bench/citation_support.py`) and the
score is read in three bands: supported, weak, unsupported. Without vectors
(no embedding model, or a turn not embedded yet) a second set of weights
decides on words and speaker alone, and the report says so.

No model is called here and nothing is read from disk: the caller brings
the turns' text and whatever vectors it has.
"""

from __future__ import annotations

import enum
import math
import re
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import Stemmer

from .embeddings import PackedVectors, dot_products
from .queries import STOP_WORDS
from .stemming import fold
from .store import own_text
from .turns import Turn, TurnKind

Vector = Sequence[float]
Int8 = tuple[float, array]  # a vector as the store keeps it: (scale, int8 values)

# Citations as the validator reads them (kept in step with `validator.CITATION`).
_ID = r"[1-9][0-9]{0,17}"
_CITATION = re.compile(rf"\{{cite:[ \t]*({_ID}(?:[ \t]*,[ \t]*{_ID})*)[ \t]*\}}")
_MARKER = re.compile(rf"[ \t]*{_CITATION.pattern}")  # with the space before it
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Where a sentence ends: a full stop, a question or exclamation mark or an
# ellipsis followed by a space, or a line break (a heading, a paragraph).
_SENTENCE_BREAK = re.compile(r"(?:[.!?…][\"'”»)\]]*\s+|\n)")
_SNOWBALL = {"en": "english", "es": "spanish"}

# A clause with fewer content words than this is read back to its sentence's
# start: "... and she agreed {cite:4}" says little without its subject.
MIN_CLAUSE_WORDS = 3
# Of a turn, what its words are read from: a whole book in a tool's result
# would cost more than it tells (its embedding read its first 2,000 anyway).
SOURCE_CHARS = 50_000
# A turn with at most this many content words is a short reply, read with
# the turn before it ("yes", "sure, I will").
SHORT_REPLY_WORDS = 3


class Support(enum.StrEnum):
    SUPPORTED = "supported"
    WEAK = "weak"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True, slots=True)
class Weights:
    """One logistic model: the score is the weighed sum of the signals plus
    `bias`; at or above `supported` a citation is supported, below `weak`
    unsupported, weak in between."""

    words: float
    words_margin: float
    other_named: float  # the clause names only someone else of the pool
    bias: float
    supported: float
    weak: float
    cosine_margin: float = 0.0


# Fitted by `bench/citation_support.py --fit` on three LoCoMo conversations
# (conv-26, conv-30, conv-41), blocks of 16 turns; the two bands are the
# scores that keep 90 % and 98 % of the correct citations there. On the two
# held out (conv-42, conv-43) the check accepts 97.9 % of correct citations
# and rejects 87.8 % of those to another turn of the block (words alone:
# 97.2 % and 90.1 %); the cosine alone at 0.4 did 95.1 % and 73.0 %. The raw
# cosine, the cosine's rank in the block and naming the right speaker were
# left out: they changed nothing once the margins were in. So was the rarity
# of words in the whole conversation (what the store's index would give):
# their rarity among the block's turns did as well or better.
WITH_MEANING = Weights(
    words=4.5, words_margin=4.88, other_named=-3.21, cosine_margin=5.69, bias=1.06,
    supported=1.18, weak=-1.69,
)
WORDS_ONLY = Weights(
    words=5.84, words_margin=5.85, other_named=-3.6, bias=0.29,
    supported=1.08, weak=-1.75,
)

# A citation needs evidence of its own, whatever its margins: a turn that
# shares no content word with the clause supports it only if the meaning is
# close. On LoCoMo's five conversations the correct citations that share no
# word with their turn (13 of 1,214) all had a cosine of 0.31 or more; a
# clause close to no turn at all ("16 turns, IDs 1-40 {cite:3}") would
# otherwise be merely weak, its margins being nil.
COSINE_FLOOR = 0.3

# A save point is rejected when more than this share of its judged citations
# is unsupported (one unsupported citation of one is rejected too). On the
# held-out blocks, 15 % refused 2.4 % of the good save points and 50 % let
# 3.7 % of the shuffled ones through; at 25 % neither happened.
MAX_UNSUPPORTED_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class Source:
    """A turn a save point may cite, as the check reads it.

    `names` are the ways a sentence may refer to its speaker ("Ana", "the
    person"); `context` is the turn it answers when it is a short reply
    (`with_context` fills it)."""

    id: int
    text: str
    names: tuple[str, ...] = ()
    vector: Int8 | None = None
    context: str = ""
    context_vector: Int8 | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """One citation of one turn: the clause its marker ends, and where."""

    turn_id: int
    clause: str
    sentence: str  # the whole sentence, to name it in a failure
    marker: tuple[int, ...]  # every ID of the marker (co-cited turns do not compete)
    start: int  # of the marker in the text
    end: int


@dataclass(frozen=True, slots=True)
class Judgement:
    """What the check found of one claim."""

    claim: Claim
    support: Support
    score: float
    words: float  # the weighed share of the clause's words the turn holds
    words_margin: float  # over the best other turn of the pool
    named: int  # 1: names the speaker; -1: names only another; 0: neither
    cosine: float | None = None  # None: judged without vectors
    cosine_margin: float | None = None


@dataclass(frozen=True, slots=True)
class SupportReport:
    """Every citation judged, and what could not be."""

    judgements: tuple[Judgement, ...]
    unchecked: tuple[int, ...] = ()  # cited IDs with no source (not among the turns given)
    words_only: int = 0  # judgements made without vectors
    notes: tuple[str, ...] = field(default=())

    def count(self, support: Support) -> int:
        return sum(1 for j in self.judgements if j.support is support)

    @property
    def share(self) -> float | None:
        """Supported citations over judged ones (None when none was judged)."""
        if not self.judgements:
            return None
        return self.count(Support.SUPPORTED) / len(self.judgements)

    @property
    def unsupported_share(self) -> float:
        return self.count(Support.UNSUPPORTED) / len(self.judgements) if self.judgements else 0.0

    @property
    def rejects(self) -> bool:
        """Whether too many citations are unsupported for the save point to stand."""
        return self.unsupported_share > MAX_UNSUPPORTED_SHARE

    def unsupported(self) -> list[Judgement]:
        return [j for j in self.judgements if j.support is Support.UNSUPPORTED]


# -- reading the text ------------------------------------------------------


def claims(text: str) -> list[Claim]:
    """Every (clause, cited turn) pair of a text, in order."""
    found: list[Claim] = []
    breaks = [b.end() for b in _SENTENCE_BREAK.finditer(text)]
    previous_end = 0
    previous_clause = ""
    for match in _CITATION.finditer(text):
        ids = tuple(dict.fromkeys(int(n) for n in re.split(r"[ \t]*,[ \t]*", match.group(1).strip())))
        at = bisect_right(breaks, match.start())
        start = breaks[at - 1] if at else 0
        end = next((b for b in breaks[at:] if b > match.end()), len(text))
        clause = _MARKER.sub("", text[max(start, previous_end): match.start()])
        if not _content_words(clause):
            # Markers side by side share the clause before the first of them.
            clause = previous_clause if previous_end > start else clause
        if len(_content_words(clause)) < MIN_CLAUSE_WORDS:
            clause = _MARKER.sub("", text[start: match.start()])
        clause = " ".join(clause.split()).lstrip(" ,;:–—-")
        sentence = " ".join(_MARKER.sub("", text[start:end]).split())
        for turn_id in ids:
            found.append(Claim(turn_id, clause, sentence, ids, match.start(), match.end()))
        previous_end, previous_clause = match.end(), clause
    return found


def _content_words(text: str) -> list[str]:
    return [w for w in (x.casefold() for x in _WORD.findall(text)) if w not in STOP_WORDS]


@lru_cache(maxsize=4)
def _stemmer(language: str) -> Stemmer.Stemmer:
    return Stemmer.Stemmer(_SNOWBALL.get(language, "english"))


@lru_cache(maxsize=50_000)
def _stem(word: str, language: str) -> str:
    return fold(_stemmer(language).stemWord(word))


def stems(text: str, language: str = "en") -> frozenset[str]:
    """The content words of `text` as stems, without the function words."""
    return frozenset(_stem(w, language) for w in _content_words(text))


def quantized(vector: Vector) -> Int8:
    """A unit vector as the store keeps it (as `embeddings.to_int8` makes it)."""
    peak = max(map(abs, vector), default=0.0)
    scale = peak / 127.0 if peak > 0 else 1.0
    return scale, array("b", map(round, map((1.0 / scale).__mul__, vector)))


def with_context(sources: Sequence[Source], language: str = "en",
                 before: Iterable[Source] = ()) -> list[Source]:
    """The sources with each short reply given the turn just before it (the
    source whose ID is one less, among them or in `before`) as its context."""
    known = {s.id: s for s in before}
    known.update((s.id, s) for s in sources)
    out = []
    for source in sources:
        prior = known.get(source.id - 1)
        if (prior is not None and not source.context
                and len(stems(source.text, language)) <= SHORT_REPLY_WORDS):
            source = Source(source.id, source.text, source.names, source.vector,
                            prior.text, prior.vector)
        out.append(source)
    return out


# -- judging ---------------------------------------------------------------


class _Pool:
    """The sources of one save point, read once: their stems (with an index
    from each stem to the sources holding it), their speakers' names and
    their vectors (packed, to score a clause against all at once)."""

    def __init__(self, sources: Iterable[Source], language: str) -> None:
        self.language = language
        self.sources = {s.id: s for s in sorted(sources, key=lambda s: s.id)}
        self.names = {i: frozenset(fold(n) for n in s.names if n.strip())
                      for i, s in self.sources.items()}
        held: dict[str, list[int]] = {}
        for i, s in self.sources.items():
            for stem in stems(f"{s.text} {s.context}", language):
                held.setdefault(stem, []).append(i)
        self.held = held
        self.owners: dict[str, set[int]] = {}
        for i, names in self.names.items():
            for name in names:
                self.owners.setdefault(name, set()).add(i)
        # Who spoke is the speaker signal's to weigh: "the person", "the agent"
        # or a name in the clause are not words a turn says of itself.
        self.speakers = stems(" ".join(self.owners), language)
        self.rows: list[tuple[int, float]] = []  # (source, its vector's scale), in packed order
        values = []
        for i, s in self.sources.items():
            for vector in (s.vector, s.context_vector):
                if vector is not None:
                    self.rows.append((i, vector[0]))
                    values.append(vector[1])
        self.packed = (PackedVectors(values) if values and len({len(v) for v in values}) == 1
                       else None)
        self._values = values

    def rarity(self, stem: str) -> float:
        """Inverse document frequency over the pool, as BM25 smooths it (a word
        in no source weighs most, one in all of them least, never zero)."""
        count, n = len(self.sources), len(self.held.get(stem, ()))
        return math.log(1.0 + (count - n + 0.5) / (n + 0.5))

    def words(self, clause: str) -> dict[int, float]:
        """Each source's weighed share of the clause's words (those holding none left out)."""
        # In a fixed order: sums of floats taken in a set's order could differ
        # in their last bit from one process to the next.
        found = sorted(stems(clause, self.language) - self.speakers)
        weights = {s: self.rarity(s) for s in found}
        total = sum(weights.values())
        shares: dict[int, float] = {}
        if total:
            for stem, weight in weights.items():
                for i in self.held.get(stem, ()):
                    shares[i] = shares.get(i, 0.0) + weight / total
        return shares

    def cosines(self, vector: Vector) -> dict[int, float]:
        """The clause's cosine with each source that has a vector of its size
        (a short reply's is the better of its own and its context's)."""
        scale, query = quantized(vector)
        if self.packed is not None and self.packed.dims == len(query):
            rows, dots = self.rows, self.packed.dot(query)
        else:  # vectors of other sizes (another model's) are left out
            kept = [k for k, v in enumerate(self._values) if len(v) == len(query)]
            rows = [self.rows[k] for k in kept]
            dots = dot_products([self._values[k] for k in kept], query)
        found: dict[int, float] = {}
        for (i, own), dot in zip(rows, dots, strict=True):
            cosine = dot * own * scale
            found[i] = max(cosine, found.get(i, cosine))
        return found

    def mentioned(self, clause: str) -> frozenset[str]:
        """The speakers' names the clause uses."""
        folded = fold(clause)
        said = set(_WORD.findall(folded))
        return frozenset(n for n in self.owners if _mentions(folded, said, n))


def judge(
    text: str,
    sources: Iterable[Source],
    *,
    clause_vectors: Mapping[str, Vector] | None = None,
    language: str = "en",
    with_meaning: Weights = WITH_MEANING,
    words_only: Weights = WORDS_ONLY,
) -> SupportReport:
    """Judge every citation of `text` against the sources it cites.

    `clause_vectors` maps each clause (`clauses(text)`) to its unit vector;
    without it, or for a source without a vector, the words alone decide.
    The verdict depends only on the text, the sources and the vectors, not
    on the order in which any of them come."""
    pool = _Pool(sources, language)
    judgements: list[Judgement] = []
    unchecked: set[int] = set()
    without = 0
    read: dict[str, tuple[dict[int, float], dict[int, float] | None, frozenset[str]]] = {}
    for claim in claims(text):
        if claim.turn_id not in pool.sources:
            unchecked.add(claim.turn_id)
            continue
        if claim.clause not in read:  # several IDs may share a clause
            vector = clause_vectors.get(claim.clause) if clause_vectors else None
            read[claim.clause] = (pool.words(claim.clause),
                                  pool.cosines(vector) if vector is not None else None,
                                  pool.mentioned(claim.clause))
        judgement = _judge_one(claim, pool, *read[claim.clause], with_meaning, words_only)
        without += judgement.cosine is None
        judgements.append(judgement)
    notes = []
    if judgements and without:
        why = ("no embedding model" if not clause_vectors
               else "some cited turns have no vector yet")
        notes.append(f"{without} of {len(judgements)} citations judged on words alone ({why})")
    return SupportReport(tuple(judgements), tuple(sorted(unchecked)), without, tuple(notes))


def clauses(text: str) -> list[str]:
    """The distinct clauses of a text's citations, to embed in one batch."""
    return list(dict.fromkeys(c.clause for c in claims(text)))


def signals(
    claim: Claim,
    pool: _Pool,
    words: Mapping[int, float],
    cosines: Mapping[int, float] | None,
    mentioned: frozenset[str],
) -> tuple[float, float, int, float | None, float | None]:
    """(words, words margin, who, cosine, cosine margin) of one claim, from its
    clause's reading (`_Pool.words`, `.cosines`, `.mentioned`); the cosines
    are None without a vector. Margins are over the best other source of the
    pool, those the same marker cites aside (they do not compete)."""
    mine = claim.turn_id
    share = words.get(mine, 0.0)
    share_margin = share - max((v for i, v in words.items() if i not in claim.marker), default=0.0)
    own = pool.names[mine]
    if mentioned & own:
        named = 1
    elif any(pool.owners[n] - set(claim.marker) for n in mentioned - own):
        named = -1
    else:
        named = 0
    cosine = margin = None
    if cosines is not None and mine in cosines:
        cosine = cosines[mine]
        margin = cosine - max((v for i, v in cosines.items() if i not in claim.marker), default=0.0)
    return share, share_margin, named, cosine, margin


def _mentions(folded: str, said: set[str], name: str) -> bool:
    # A one-word name is matched as a word ("Ana" is not in "banana"); a
    # longer one ("the person") as a phrase.
    return name in said if " " not in name else name in folded


def score(weights: Weights, words: float, words_margin: float, named: int,
          cosine_margin: float | None = None) -> float:
    """The weighed sum of the signals (the model's log-odds of support)."""
    total = (weights.bias + weights.words * words + weights.words_margin * words_margin
             + (weights.other_named if named < 0 else 0.0))
    if cosine_margin is not None:
        total += weights.cosine_margin * cosine_margin
    return total


def band(weights: Weights, value: float) -> Support:
    if value >= weights.supported:
        return Support.SUPPORTED
    if value >= weights.weak:
        return Support.WEAK
    return Support.UNSUPPORTED


def _judge_one(
    claim: Claim, pool: _Pool, words: Mapping[int, float], cosines: Mapping[int, float] | None,
    mentioned: frozenset[str], with_meaning: Weights, words_only: Weights,
) -> Judgement:
    share, share_margin, named, cosine, margin = signals(claim, pool, words, cosines, mentioned)
    weights = with_meaning if cosine is not None else words_only
    value = score(weights, share, share_margin, named, margin)
    verdict = band(weights, value)
    if share == 0.0 and (cosine is None or cosine < COSINE_FLOOR):
        verdict = Support.UNSUPPORTED
    return Judgement(claim, verdict, value, share, share_margin, named, cosine, margin)


# -- the turns of a save point, from the store ------------------------------

_PERSON = {"en": ("person", "user"), "es": ("persona", "usuario")}
_AGENT = {"en": ("agent", "assistant"), "es": ("agente", "asistente")}


def speaker_names(turn: Turn, agent_name: str = "", language: str = "en") -> tuple[str, ...]:
    """How a chronicle may name a turn's speaker: the person (and the sender
    a channel gave), the agent (and its name), or who sent an event. A tool's
    result has no speaker: its words are what it found."""
    tongue = language if language in _PERSON else "en"
    if turn.kind is TurnKind.USER:
        return (*_PERSON[tongue], *((turn.sender,) if turn.sender else ()))
    if turn.kind in (TurnKind.ASSISTANT, TurnKind.TOOL_CALL):
        return (*_AGENT[tongue], *((agent_name,) if agent_name else ()))
    if turn.kind is TurnKind.EVENT and turn.sender:
        return (turn.sender,)
    return ()


def sources_of(
    turns: Iterable[Turn],
    *,
    vectors: Mapping[int, Int8] | None = None,
    agent_name: str = "",
    language: str = "en",
    before: Iterable[Turn] = (),
) -> list[Source]:
    """Turns as the check reads them (their own text, their speaker's names,
    their stored vectors), short replies with the turn before them (found
    among them or in `before`, which are not sources themselves)."""
    def source(t: Turn) -> Source:
        return Source(t.id, own_text(t)[:SOURCE_CHARS], speaker_names(t, agent_name, language),
                      (vectors or {}).get(t.id))

    made = [source(t) for t in {t.id: t for t in turns}.values()]
    return with_context(made, language, [source(t) for t in before])


@dataclass(frozen=True, slots=True)
class Gathered:
    """What the check needs for one attempt: the sources and the clauses' vectors."""

    sources: tuple[Source, ...]
    clause_vectors: Mapping[str, Vector] | None
    note: str | None = None  # why the clauses have no vectors when a model was there to make them
    seconds: float = 0.0  # reading the turns and vectors, embedding the clauses


@dataclass(frozen=True, slots=True)
class Evidence:
    """Where the support check finds what a save point cites, beyond its block:
    the turns (the store's `get_many`), their vectors (the embedding table's
    `get`) and the model that embeds the clauses. Without the last two the
    check decides on words alone."""

    turns: Callable[[Iterable[int]], Iterable[Turn]]
    vectors: Callable[[Iterable[int]], Mapping[int, Int8]] | None = None
    embed: Callable[[Sequence[str]], Sequence[Vector]] | None = None
    agent_name: str = ""
    language: str = "en"

    def gather(self, text: str, block: Sequence[Turn]) -> Gathered:
        """The sources of `text`'s citations (the block, the other cited turns
        and the turns before short ones) and its clauses embedded in one batch.
        Blocks on the store and the model: run it off the event loop."""
        started = time.perf_counter()
        have = {t.id: t for t in block}
        cited = {c.turn_id for c in claims(text)} - set(have)
        if cited:
            have.update((t.id, t) for t in self.turns(cited))
        wanted_before = {t.id - 1 for t in have.values() if t.id > 1 and t.id - 1 not in have
                         and len(stems(own_text(t), self.language)) <= SHORT_REPLY_WORDS}
        before = list(self.turns(wanted_before)) if wanted_before else []
        ids = [*have, *(t.id for t in before)]
        vectors = dict(self.vectors(ids)) if self.vectors is not None else {}
        sources = tuple(sources_of(have.values(), vectors=vectors, agent_name=self.agent_name,
                                   language=self.language, before=before))
        wanted = clauses(text)
        made: Mapping[str, Vector] | None = None
        note = None
        if self.embed is not None and wanted:
            try:
                made = dict(zip(wanted, self.embed(wanted), strict=True))
            except Exception as exc:  # a failing model leaves the words to decide, and says why
                note = f"the clauses could not be embedded ({exc})"
        return Gathered(sources, made, note, time.perf_counter() - started)
