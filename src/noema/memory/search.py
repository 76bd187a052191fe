"""Ranked search over every turn ever stored.

A natural-language query becomes index terms (porter stemming for English,
Snowball's rules in a language's own index otherwise, `stemming.py`;
diacritics folded; stop words go). The query plan then finds candidate turns with work
bounded whatever the size of the store, scores them with every word of the
query, and refines the ranking with what a conversation knows and a bag of
words does not. Each choice, and why:

- **Rare words are listed, not ranked.** Turn IDs are read for the rarest
  words first, up to a budget of postings (`listed_postings`). Reading bare
  IDs costs a fraction of what FTS5's own BM25 costs per match (its `bm25()`
  walks every posting of every term to count documents), so the budget
  reaches much further down the vocabulary than a ranked OR query could.
- **Common words are joined to the rare ones, never dropped for being
  common.** A word over the budget is searched conjunctively with the listed
  words (`common AND (rare1 OR rare2 ...)`): FTS5 seeks the common word's
  postings only where a rare word is, so the cost follows the rare words.
  In a store of a million turns, "Jon's dance studio" still needs "dance"
  and "studio"; a plan that kept only the cheapest words kept "Jon" and
  found every turn he ever sent.
- **Names are filters and boosts, not the cheapest term.** A capitalised
  word that names someone anchors the conjunctions above, but scores no
  more than a quarter of the least telling content word of the query, and a
  turn sent by a named person is favoured in the final ranking. As a store
  grows, a name becomes the rarest term of most questions about that
  person; ranked by its weight alone, it fills the results with turns that
  match only the speaker. Even capped at a content word's weight, a name
  says whose turn, not what about, and is counted again by the speaker
  boost: two named people then outweigh the one content word that tells
  the answer apart. (At a quarter rather than a whole content word,
  LoCoMo recall@10 for categories 1-4 is unchanged with no other history
  and gains 0.3 and 1.7 points after 100k and 1M turns.)
- **A common name is searched where it is dense.** A name over the
  listing budget (up to `wide_postings` turns) is not dropped to a boost:
  its turns are read, and those among `name_stretch_turns` others holding
  it within twice `company_reach` turns become candidates with the name.
  Where a person talks, their name is in nearly every turn (as sender or
  as the one addressed); where it is only mentioned, it stands alone. An
  answer often shares no word with its question but the person's name
  ("What martial arts has John done?", answered by John's "I'm doing
  kickboxing"): with no other history the name is listed and such turns
  reach the ranking through their neighbours and the company they keep;
  after a million turns holding "John" 23,600 times, without this they
  were never candidates. The dense turns of each name are kept between
  searches and only newer turns read again (turns are only added, so a
  dense stretch stays dense): reading a name in twenty thousand turns
  costs more than the rest of a query. (LoCoMo's five development
  conversations after 1M turns: recall@10, categories 1-4, by keywords
  59.0 to 67.2 %, +8.2 points, interval +6.5 to +10.0, with the meaning
  rerank 60.8 to 69.6 %, +8.7, +7.0 to +10.5; the two conversations whose
  names are common in the history from 39 and 51 % to 63 and 68 %, the
  other three unchanged; nothing changes with no other history, where
  names are listed. 3, 5, 12 and 16 others rather than 8: +6.3, +7.2,
  +8.2 and +8.2; every fold of the study below keeps 8.)
- **When no word fits the budget, the rarest is listed all the same** if it
  is in at most `wide_postings` turns, and the others are joined to it: the
  whole history is searched. At a million turns of everyday words, most
  words of a question about a person sit in 6,000 to 30,000 turns; searched
  together in the newest turns only, as below, a question needed every word
  in one turn and never reached an older conversation. (LoCoMo's five
  development conversations after 1M turns: the scope narrowed for 88 of
  997 questions, none with this; recall@10, categories 1-4, +0.8 points,
  95 % paired bootstrap interval +0.1 to +1.6; CPU p95 29 to 32 ms. Joining
  more words to such a listing, with a budget of two or four times its
  postings, gained nothing more.)
- **When every word is common, the scope widens by time buckets instead of
  being cut.** The words are searched together (AND) from the newest turns
  back, one bucket of about a budget's worth of postings at a time, until
  enough turns are found or the buckets allowed are spent; only then is the
  rest left unsearched, and the result says from when the search covered.
- **Candidates are chosen with the words beside them.** Of the
  `candidates` turns refined below, half are the best by their own words;
  the other `window_candidates` are the best by their own words plus the
  words found in the turns within `window_reach` of them that they lack
  themselves (each word once, at its full weight). The plan already knows
  which words found each turn, so this costs one pass over the candidate
  IDs and no read. A question's words are spread over a few turns of the
  conversation that answers it (the question in one, the answer in the
  next, the place named two turns before); in a large store, many turns
  elsewhere hold one or two of the words by chance, alone, and tie with
  or beat the answer by its own words. The words beside a turn only choose
  it: its score stays its own, and the neighbours' share is added later by
  the refinement (which respects gaps in time). Chosen by the window alone,
  with no places kept for their own words, a turn holding every word of the
  query lost its place to many turns each holding one word beside another,
  and with no other history, recall@10 fell 4 points; keeping half the
  places for the best by their own words, LoCoMo recall@10 (categories 1-4)
  gains 0.8 points with no other history, 4.7 after 100k turns and 3.1
  after 1M. Beside a turn, a name counts at its full weight, not capped as
  in the turn's own score: there it says which conversation the turn is
  in, the one with the person the question is about, which is what a
  filter on names is for; a turn elsewhere holding one content word by
  chance has no such company. (With the stretch below in place: recall@10
  unchanged with no other history, +1.2 and +0.6 points after 100k and 1M
  turns; recall@5 -0.5 and -2.5.)
- **A name says which conversation a turn is in.** A candidate among other
  candidates that hold a name of the query (`company_turns` of them within
  `company_reach` turns earn the whole favour, fewer a share, one alone
  none) is favoured up to `company_boost` times more, both when candidates
  are chosen and in its score. Where a person talks, their name is in
  nearly every turn (as sender or as the one addressed); in a large store,
  the turns that hold a word of the query and the name by chance stand
  alone. It comes from the word sets the plan already holds, by IDs only:
  nothing is read, and the counting follows the pairs of name-holding turns
  close together, not the thousands of lone matches. (On LoCoMo's five
  development conversations after 1M turns, cross-validated: without it
  recall@10 is 4.9 points lower, interval -6.7 to -3.4; no effect alone.)
  Within the person's conversation, each content word once weighed by its
  rarity among that conversation's turns rather than the whole store's;
  chosen on one conversation, where it gained 7 points after 1M turns, it
  moved nothing significant on the five (-0.6 points without it, -1.7 to
  +0.4) and is gone.
- **Every candidate is scored with every word it was found with, once.**
  The plan records which words found a turn (a set, not a running sum: the
  same word reaching a turn through two lists, the time bucket and the
  newest stretch for instance, must not count twice). Each word adds its
  inverse document frequency (from the store's own counts), and the sum is
  saturated by the turn's length as
  BM25 does, from the length the store already keeps: no text is read (the
  best `scored` candidates cost one row lookup each), and a long tool result
  holding every word of the dictionary does not crowd out a short answer.
- **Honest limits.** What could not be searched is returned with the
  result (words joined to others, words left out, words in no turn, the
  period and the number of turns covered), and each hit says which words of
  the query it holds, so the model can search again more narrowly, or for
  the person or place a first hit named (a question whose answer shares no
  word with it is found in two steps, not one).
- **Meaning reranks what the words found.** With a `Meaning` (see
  `embeddings.py`), the best `RERANK_DEPTH` candidates after the refinement
  below are reordered by 0.7 times their normalised score and 0.3 times the
  normalised cosine of their embedding to the query's. Cross-validated on
  LoCoMo's five development conversations with no other history: keyword
  shares of 0.8, 0.7, 0.6 and 0.5 gain +1.0, +1.7, +1.7 and +2.1 points (intervals
  above zero); choosing the share by leaving one conversation out gives
  +1.2 (-0.1 to +2.6), folds picking 0.7 or 0.5, so the 0.7 measured on
  other data stays. After 1M turns, with common names searched where they
  are dense: 0.7 gains +2.3 (+1.2 to +3.6), the share chosen by leaving one
  out +2.7 (+1.3 to +4.2), every fold picking 0.6; 0.6 against 0.7 is +0.4
  (-0.4 to +1.2) there and 0 with no other history, so 0.7 stays. With
  the places for meaning below: 0.7 gains +4.3 (+2.7 to +6.0), the share
  chosen by leaving one out +3.9 (+2.3 to +5.7), four folds picking 0.7
  and one 0.6. Min-max
  normalisation against others, against 0.7 with no other history:
  z-scores -0.8 to +0.7 at shares 0.8 to 0.5 (the best -0.3 to +1.7),
  reciprocal ranks -4.6 to +0.1, the log of the keyword score -1.2 and
  -0.6; a deeper pool (200 or 300 candidates reranked) -0.3 to +0.4. None
  is kept.
- **Where a common name is dense, meaning chooses among its person's
  turns.** With a `Meaning`, the last `meant_hits` places of the hits go
  to the turns of the common names' dense stretches (above) closest in
  meaning to the query, of those the rerank did not place higher. There
  words cannot choose: each of the person's turns holds the name, most
  hold nothing else of the question, and they weigh alike; the rerank
  reorders only the hundred best by words, which such a turn rarely is.
  The few hundred stored vectors are scored at once, with the query's
  embedding the rerank made; they are read once and kept packed
  (`PackedVectors`) for the next questions about the same people: at a
  million turns, about a millisecond a query. (LoCoMo's five
  development conversations after 1M turns, with the rerank at 0.7:
  recall@10, categories 1-4, 69.6 to 71.5 %, +2.0, interval +0.8 to +3.2;
  the two conversations whose names are common in the history from 63.4
  and 67.7 to 70.7 and 69.9 %, the other three unchanged; nothing changes
  with no other history, where names are listed. 1 and 2 places: +0.8 and
  +1.5; chosen by leaving one conversation out among 0 to 3, +1.4, +0.3 to
  +2.6, four folds picking 3 and one 2; 3 rather than 2 or 4 places is
  +0.5 and +0.2 points, intervals across zero.)

The ranking is then refined:

- a turn is read in its neighbourhood: an answer rarely repeats the words
  of the question it answers, so each turn inherits a decaying share of the
  best-scoring neighbours within the same stretch of conversation;
- a turn is read in its stretch of conversation: its score is multiplied
  by one plus the share of the query's weight (`stretch_boost`) found
  within `stretch_reach` turns of it, itself included. The answers to a
  question sit where a conversation dwelt on its subject, often in several
  turns a few exchanges apart (what multi-hop questions need); chance
  matches in a large store sit among turns about other things. Names count
  in full here too, for the reason given above. Measured
  by IDs only, from what the plan already gathered, so it reads nothing; a
  stretch that crosses a long pause in time is rare at this reach. (LoCoMo
  recall@10, categories 1-4: +0.8, +0.5 and 0 points with no history, after
  100k and 1M turns; multi-hop questions +6.1 and +7.6 points with no
  history and after 100k turns, unchanged after 1M. Over 50 turns rather
  than 20, it gained nothing after 100k or 1M turns.)
- a name in the query that is the sender of a turn favours that turn;
- a date in the query favours turns written on that day or in that month.

Cross-validated (`bench/locomo_retrieval.py --study`, `bench/locomo_at_scale.py
--study`: each constant's value chosen on four of LoCoMo's five development
conversations and measured on the fifth, every way round; recall@10 for
categories 1-4, keyword ranking, with no other history / after 1M turns,
when the signal is switched off, with 95 % paired bootstrap intervals):
the neighbours' loans -8.8 / -9.8, the speaker boost -2.8 / -2.6, BM25's
length saturation (b = 0) +0.1 / -2.2, the date boost -1.1 / -1.1, the
stretch -1.0 / -1.4, the company favour 0 / -10.6, the words beside
-0.5 / -1.9 (the first interval reaches +0.1), the common names' dense
stretches 0 / -8.2. No fold switched a signal off; some chose a speaker or
date boost of 1 rather than 0.5, worth under half a point (intervals
across zero), so the values stay. The name cap is the one constant the two
scales pull apart: without it +0.6 with no history (+0.0 to +1.3) and -1.8
after 1M turns (-3.3 to -0.2); it stays.

Snippets come from FTS5 itself, run over the few hits in a scratch
in-memory index, so they highlight exactly what the search matched. The
store is read through a memory map while searching: candidates' rows and
index pages then come straight from the page cache instead of being copied
into SQLite's own, about a sixth of a query's CPU time at a million turns.

Where a query's time goes at a million turns (LoCoMo's questions, CPU time,
best of five runs: about 14 ms at the median, 22 ms at p95): about a fifth
to FTS5 reading turn IDs, a fifth to the lengths of the `scored` best
candidates (one row lookup each), a tenth to counting the turns of words
not counted before, and most of the rest to passes in Python over the
candidate IDs. What keeps each part cheap is said where it is done.

Measured and left out (LoCoMo placed after 0, 100k and 1M turns of
distractor history; `bench/locomo_at_scale.py`): demoting a hit next to
one already chosen, so that ten hits cover more moments, found a little
more for questions spread over several turns but lost more on single
answers, which usually sit right after the turn that shares the question's
words. Lending less to the turn before a match than to the one after it,
and weighting a word by its rarity among the candidates as well as in the
store, moved recall by about one question either way. Refining 200 or 300
candidates instead of 100 found more single answers at a million turns but
fewer multi-hop ones, and cost a third more time. None is kept: none is a
clear gain. Also measured and left out, with the window above in place:
searching the words not listed everywhere again around the ten or
twenty best candidates (the conversation that holds them), searching them on
the days a query names, and searching neighbouring words of the query as
pairs (AND or NEAR) so that two common words together are cheap enough to
list: none moved recall after 100k or 1M turns, and each cost time.
Multiplying the weight of a turn that holds a name of the query (so that of
two turns with the same content words, the one about the person asked
after comes first) moved recall@10 by -0.8, +1.7 and -1.9 points with no
history, after 100k and after 1M turns: a name already counts through the
speaker boost.

Measured with the company favour in place (recall@10, categories 1-4, then
multi-hop, with no history / after 100k / after 1M turns; the favour alone
gave 83.1 / 77.1 / 73.4 % and 43.8 / 36.2 / 31.7 %) and left out, for
questions whose answers share few words with them: searching again with the
words of the best hits (pseudo-relevance feedback: the five rarest words of
the three best hits, found in at most 3,000 turns, at half their weight,
and everything ranked again) found more multi-hop answers after 1M turns
(42.6 %) but drifted from single answers, 77.6 / 73.5 / 71.8 %, and doubled
a query's time at a million turns (counting the candidate words costs up to
milliseconds each). Kept cheaper (those words searched only within 500 turns
of the best hits, the turns they find given the last two places of ten), it
still lost: 81.5 / 75.3 / 74.1 % and 40.8 / 31.7 / 36.2 %, for about 10 ms
more. Spreading the ten hits over moments (each hit's score taken 0.8 times
for every better hit already chosen within six hours of it) lost everywhere,
multi-hop questions too: 76.5 / 72.1 / 70.6 % and 36.2 / 26.4 / 28.9 %; the
answers a question needs sit together more often than apart. Favouring a
turn sent by a named person when the candidates are chosen, not only in the
final ranking, lost a question with no history and after 100k turns and
changed nothing after 1M. Weighing words by the conversation's counts only
for the turns inside it, and by the store's for the rest, ranked exactly as
weighing every candidate by the conversation's, so the simpler is kept. The
favour's constants are not knife-edged: 3 or 8 turns for the whole favour,
a reach of 10 or 40 turns, 50 turns for a conversation, or a favour of 4
rather than 2 gave the same figures at every scale; a favour of 1 gave 1.9
and 2.3 points less after 100k and 1M turns.

Measured with no other history and left out, against the meaning rerank at
0.7 (recall@10, categories 1-4, 76.9 % on the five development
conversations; differences in points with 95 % paired bootstrap intervals).
Of the 379 evidence turns missed there, 240 share nothing with their
question but a person's name, which nearly every turn holds as sender, 119
share a content word, 14 only a form the stemmer did not join and 6 nothing;
181 end below the hundred the rerank reads, 182 between 11 and 100, 16 in
the keyword top ten pushed out by the rerank (`bench/locomo_retrieval.py
--misses`). Query words: the other forms of an irregular verb searched with
it ("win", "won") 0.0 (-0.5 to +0.5); "won" no longer a stop word -0.1;
the words that frame a question ("many", "kind", "type", "sort") dropped as
stop words +0.3 (-0.0 to +0.8), chosen by leaving one conversation out +0.2
(-0.3 to +0.7); the word a "what" or "which" question asks for at half or a
quarter of its weight -0.2 and -1.3. Ranking: a turn holding no content
word of the query at 0.5, 0.75 or 1.5 times its score -2.3, -1.3 and +0.4
(-0.6 to +1.5); the nearest neighbour lending 0.6 or 0.75 of its score
rather than 0.5 +0.1 and -0.3, loans reaching 1 or 3 turns -1.8 and -0.1. Meaning: a turn's
cosine plus a quarter or half of its neighbours' 0.0 to +0.2 (intervals
across zero); a turn embedded with the one before it -0.6, averaged with
its own vector -0.1 to +0.2; turns embedded without their sender's name
-0.8 (-1.7 to +0.1); the query embedded without its stop words -1.0 (-1.7
to -0.4); the query's vector moved towards its best hits' (one to five
hits, at 0.3 to 1.0) -0.5 to 0.0; 20 to 70 candidates reranked rather than
100, -0.4 to 0.0; a share for time words in the answers to "when" and for
numbers in those to "how many" -0.1 to +0.2; the last one to three places
given to the named person's turns closest in meaning -0.2 to -1.4. Fusion:
the 5 to 100 turns closest in meaning of the whole store reranked with the
keyword candidates (their keyword score their own, or the pool's lowest)
-0.1 to 0.0 at 0.7, +0.3 (-0.4 to +1.0) at 0.6; the keyword share lowered
to 0.3, 0.5 or 0.6 for a question whose candidates' keyword scores are
nearly flat +0.2 to -0.1; a logistic ranker over eight features of both
signals (normalised and raw scores, ranks, rank in the whole store, their
product), fitted on four conversations and measured on the fifth, -0.3
(-1.0 to +0.4). The rerank's fusion is at its ceiling for this model;
what the misses need is a signal neither ranking carries.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import add, mul, sub
from typing import TYPE_CHECKING, NamedTuple
from zoneinfo import ZoneInfo

from .queries import STOP_WORDS, date_spans, names_in
from .recall import RECALL_TOOLS, excerpt
from .stemming import WordStemmer, fold, index_table, stemmer_for
from .store import StoreError, TurnStore, own_text
from .turns import Turn, TurnKind

if TYPE_CHECKING:
    from .embeddings import Meaning

TOKENIZER = "porter unicode61 remove_diacritics 2"

ROLE_KINDS: dict[str, frozenset[TurnKind]] = {
    "user": frozenset({TurnKind.USER}),
    "assistant": frozenset({TurnKind.ASSISTANT}),
    "tool": frozenset({TurnKind.TOOL_CALL, TurnKind.TOOL_RESULT}),
    "event": frozenset({TurnKind.EVENT}),
    "note": frozenset({TurnKind.NOTE}),
}

COUNT_STALENESS = 0.01  # a kept document count serves until the store grows by this share
MAX_KEPT_COUNTS = 20_000  # stems whose counts are kept; past this, start afresh
MAX_KEPT_STRETCHES = 64  # names whose dense stretches are kept; past this, start afresh
MMAP_BYTES = 1 << 30  # of the store, read through memory mapping when searching
PASSAGE_CHARS = 4_000  # of a long turn, the stretch a snippet is looked for in

_WORD = re.compile(r"[^\W_]+(?:\*)?|\"[^\"]+\"", re.UNICODE)


@dataclass(frozen=True, slots=True)
class SearchTuning:
    """The few constants of the plan and the ranking. Those of the ranking are
    kept only where cross-validation on LoCoMo says they help on conversations
    they were not chosen on (`bench/locomo_cv.py`; see the module docstring)."""

    listed_postings: int = 6_000  # turn IDs read for the rarest words of one query
    wide_postings: int = 30_000  # when no word fits that, the rarest is listed all the same up to this
    joined_postings: int = 30_000  # seeks spent joining the common words to the listed ones
    bucket_postings: int = 6_000  # a time bucket holds about this many postings of the words
    buckets: int = 4  # buckets searched, newest first, when every word is common
    scored: int = 1_000  # best candidates by their words, whose lengths are read for BM25
    candidates: int = 100  # best scored turns refined by the conversational signals
    filter_widening: int = 10  # with a kind filter, look this many times deeper for the kinds wanted
    neighbour_reach: int = 2  # turns either side that lend their score
    neighbour_decay: float = 0.5  # share lent by the nearest neighbour, halved per step
    stretch_gap_s: float = 6 * 3600  # turns further apart in time are not neighbours
    speaker_boost: float = 0.5  # a turn sent by someone the query names
    name_weight: float = 0.25  # a name weighs at most this share of the least telling content word
    date_boost: float = 0.5  # a turn written on a date the query names
    common_share: float = 0.5  # a term in more than this share of turns tells nothing...
    common_min_turns: int = 1_000  # ...once there are enough turns for shares to mean something
    k1: float = 1.2  # BM25's usual constants, as FTS5 uses them
    b: float = 0.75
    window_reach: int = 2  # turns either side whose words count towards choosing a candidate
    window_share: float = 1.0  # of the weight of the words beside a turn that it lacks itself
    window_candidates: int = 50  # of the candidates, how many are chosen with the words beside them
    stretch_reach: int = 20  # turns either side that make the stretch of conversation around a turn
    stretch_boost: float = 1.0  # a candidate whose stretch holds every word of the query: twice its score
    company_boost: float = 2.0  # a turn among many that hold a name of the query: up to this much more
    company_reach: int = 20  # turns either side where those turns are counted
    company_turns: int = 5  # other turns holding a name there for the whole boost
    name_stretch_turns: int = 8  # a common name's turn is a candidate with this many more close by; 0: never
    meant_hits: int = 3  # of the hits, places for the dense stretches' turns closest in meaning; 0: none


@dataclass(frozen=True, slots=True)
class Found:
    """One search result with the passage that matched."""

    turn: Turn
    score: float  # higher is better
    snippet: str
    matched: tuple[str, ...] = ()  # the query's words this turn holds; none: lifted by its neighbours


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Ranked hits, how the query was read, and what it could not cover."""

    hits: tuple[Found, ...]
    terms: tuple[str, ...]  # what was searched
    dropped: tuple[str, ...] = ()  # left out: no meaning, or in most turns
    joined: tuple[str, ...] = ()  # too common to search alone: found only beside `anchors`
    anchors: tuple[str, ...] = ()  # the rarer words the joined ones were searched with
    unsearched: tuple[str, ...] = ()  # too common to search at all within the budget
    searched_from: float | None = None  # the words alone were searched only from this time on
    recent_only: int | None = None  # ...that is, in only this many of the latest turns
    covered: int = 0  # turns the search ranged over (all, or those within since/until)
    absent: tuple[str, ...] = ()  # words no turn holds
    unmeant: str | None = None  # why meaning did not rerank the hits, when it was meant to
    language: str = "en"  # whose rules read the words


@dataclass(frozen=True, slots=True)
class Term:
    """A query word as the index knows it."""

    text: str  # as the person typed it
    expression: str  # as FTS5 receives it
    postings: int  # turns containing it
    stems: tuple[str, ...]  # the index terms it stands for
    prefix: bool = False  # stems[0] is a prefix
    name: bool = False  # names someone


@dataclass(frozen=True, slots=True)
class Plan:
    """How a query is searched (see the module docstring)."""

    listed: tuple[Term, ...]  # turn IDs read for each
    joined: tuple[Term, ...]  # each searched with the listed words
    together: tuple[Term, ...]  # every word common: searched all at once, by time bucket
    unsearched: tuple[Term, ...]  # over every budget
    boosts: tuple[Term, ...]  # common names: searched where dense (`dense_stretches`), or only boosts


def plan_query(terms: Sequence[Term], tuning: SearchTuning) -> Plan:
    """Which words are listed, joined, searched together or left out."""
    ordered = sorted((t for t in terms if t.postings > 0), key=lambda t: t.postings)
    listed: list[Term] = []
    spent = 0
    for term in ordered:
        if spent + term.postings > tuning.listed_postings:
            break
        listed.append(term)
        spent += term.postings
    if not listed and ordered and ordered[0].postings <= tuning.wide_postings:
        # Every word over the budget, but the rarest still cheap to list: its
        # IDs are read and the others joined to it, over the whole history,
        # rather than all of them searched together in the newest turns only.
        listed.append(ordered[0])
        spent = ordered[0].postings
    rest = [t for t in ordered if t not in listed]
    boosts = tuple(t for t in rest if t.name)
    rest = [t for t in rest if not t.name]
    if not listed:  # a query of nothing but a common name still searches for it
        return Plan((), (), tuple(rest) or boosts, (), boosts if rest else ())
    joined: list[Term] = []
    unsearched: list[Term] = []
    seeks = 0
    for term in rest:  # each join seeks about once per listed posting
        if seeks + spent > tuning.joined_postings:
            unsearched.append(term)
            continue
        joined.append(term)
        seeks += spent
    return Plan(tuple(listed), tuple(joined), (), tuple(unsearched), boosts)


class _Meta(NamedTuple):
    """What ranking reads of a turn. A tuple, not a frozen dataclass: hundreds are
    made per query, and a tuple is made in one step, not a field at a time."""

    ts: float
    kind: str  # a TurnKind value
    sender: str | None
    recall: bool


_RECALL_KINDS = (TurnKind.TOOL_CALL.value, TurnKind.TOOL_RESULT.value)


@dataclass
class _Gathered:
    """Candidate turns, each with the set of words it was found with (a bit per term)."""

    terms: Sequence[Term]
    found: dict[int, int] = field(default_factory=dict)  # turn ID -> bits of its terms
    searched_from: int | None = None  # lowest ID the words alone reached, when narrowed

    def __post_init__(self) -> None:
        self._bit = {t.expression: 1 << n for n, t in enumerate(self.terms)}
        self._sorted: tuple[list[int], list[int]] | None = None

    def add(self, turn_ids: Iterable[int], *terms: Term) -> None:
        mask = 0
        for term in terms:
            mask |= self._bit[term.expression]
        found = self.found
        for turn_id in turn_ids:
            found[turn_id] = found.get(turn_id, 0) | mask
        self._sorted = None

    def weights(self, per_term: Sequence[float]) -> dict[int, float]:
        """Each candidate's summed term weight."""
        by_mask: dict[int, float] = {}
        for mask in set(self.found.values()):
            by_mask[mask] = _weight_of(mask, per_term)
        return {turn_id: by_mask[mask] for turn_id, mask in self.found.items()}

    def beside(self, per_term: Sequence[float], reach: int) -> dict[int, float]:
        """For each candidate with other candidates within `reach` turns, the
        weight of the words they were found with and it was not."""
        ids, masks = self._ordered()
        count = len(ids)
        by_mask: dict[int, float] = {}
        out: dict[int, float] = {}
        # Most candidates in a large store are lone matches with no other
        # candidate within reach: only the turns of a close pair are visited.
        close = [at for at, gap in enumerate(map(sub, ids[1:], ids)) if gap <= reach]
        for at in sorted({*close, *(k + 1 for k in close)}):
            turn_id = ids[at]
            around = 0
            near = at - 1
            while near >= 0 and turn_id - ids[near] <= reach:
                around |= masks[near]
                near -= 1
            near = at + 1
            while near < count and ids[near] - turn_id <= reach:
                around |= masks[near]
                near += 1
            extra = around & ~masks[at]
            if not extra:
                continue
            weight = by_mask.get(extra)
            if weight is None:
                weight = by_mask[extra] = _weight_of(extra, per_term)
            out[turn_id] = weight
        return out

    def covered(self, per_term: Sequence[float], reach: int, wanted: Iterable[int]) -> dict[int, float]:
        """For each wanted turn, the share of the query's weight found within
        `reach` turns of it, itself included."""
        ids, masks = self._ordered()
        total = sum(per_term) or 1.0
        out: dict[int, float] = {}
        for turn_id in wanted:
            union = 0
            for mask in masks[bisect_left(ids, turn_id - reach) : bisect_right(ids, turn_id + reach)]:
                union |= mask
            out[turn_id] = _weight_of(union, per_term) / total
        return out

    def company(self, bits: int, reach: int) -> dict[int, int]:
        """For each candidate with company, how many other candidates within
        `reach` turns of it were found with any of the words in `bits`; one
        such candidate alone is no company, and is left out."""
        ids, masks = self._ordered()
        holders = [turn_id for turn_id, mask in zip(ids, masks, strict=True) if mask & bits]
        # Two others within reach of a turn are at most 2 * reach apart: only
        # the stretches around such pairs are counted, so the cost follows the
        # conversations, not the thousands of lone matches around them.
        span = 2 * reach
        pairs = compress(range(len(holders)), map(span.__ge__, map(sub, holders[1:], holders)))
        stretches: list[list[int]] = []  # [first, last) in `ids`, merged
        for k in pairs:
            first = bisect_left(ids, holders[k + 1] - reach)
            last = bisect_right(ids, holders[k] + reach)
            if stretches and first <= stretches[-1][1]:
                stretches[-1][1] = max(stretches[-1][1], last)
            else:
                stretches.append([first, last])
        out: dict[int, int] = {}
        # Counted a stretch at a time by maps in C: a conversation's stretch
        # holds hundreds of candidates, each needing two bisections.
        for first, last in stretches:
            turns = ids[first:last]
            high = map(bisect_right, repeat(holders), map(add, turns, repeat(reach)))
            low = map(bisect_left, repeat(holders), map(sub, turns, repeat(reach)))
            itself = map(bool, map(bits.__and__, masks[first:last]))
            near = list(map(sub, map(sub, high, low), itself))
            kept = list(map((1).__lt__, near))
            out.update(zip(compress(turns, kept), compress(near, kept)))
        return out

    def _ordered(self) -> tuple[list[int], list[int]]:
        """The candidates' IDs in order, and their masks (computed once per query)."""
        if self._sorted is None:
            ids = sorted(self.found)
            self._sorted = (ids, [self.found[i] for i in ids])
        return self._sorted


def dense_stretches(ids: Sequence[int], more: int, span: int) -> list[int]:
    """Of turn IDs in ascending order, those with at least `more` others
    within `span` turns on one side or around them: `more` + 1 of the IDs
    fit in `span` turns there. The stretches where a name is in most turns,
    not the turns that hold it here and there."""
    # Found by maps in C: a common name is in tens of thousands of turns.
    starts = compress(range(len(ids)), map(span.__ge__, map(sub, ids[more:], ids)))
    kept: set[int] = set()
    for k in starts:
        kept.update(ids[k : k + more + 1])
    return sorted(kept)


def _best(scores: dict[int, float], count: int) -> list[int]:
    """The `count` best turn IDs by score, the newer first on a tie."""
    return [turn_id for _, turn_id in sorted(zip(scores.values(), scores), reverse=True)[:count]]


def _words_of(mask: int, terms: Sequence[Term]) -> tuple[str, ...]:
    """The words of the terms whose bits are in `mask`, in the query's order."""
    return tuple(t.text for bit, t in enumerate(terms) if mask >> bit & 1)


def _weight_of(mask: int, per_term: Sequence[float]) -> float:
    return sum(w for bit, w in enumerate(per_term) if mask >> bit & 1)


def term_weights(terms: Sequence[Term], total: int, tuning: SearchTuning) -> list[float]:
    """Each word's inverse document frequency; a name weighs no more than
    `name_weight` times the least telling content word beside it."""
    weights = [_idf(total, t.postings) for t in terms]
    content = [w for t, w in zip(terms, weights, strict=True) if not t.name]
    if content:
        cap = min(content) * tuning.name_weight
        weights = [min(w, cap) if t.name else w for t, w in zip(terms, weights, strict=True)]
    return weights


@dataclass
class HistorySearch:
    """Search over all turns of one store."""

    store: TurnStore
    tuning: SearchTuning = field(default_factory=SearchTuning)
    zone: ZoneInfo | None = None  # how dates in a query are read; UTC when unset
    language: str | None = None  # whose stemming rules read words; the store's when unset
    meaning: Meaning | None = None  # the embeddings that rerank the keyword candidates, if any

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._vocab_ready = False
        self._stemmer: WordStemmer | None = None
        self._table = "turns_fts"
        self._vocab = "temp.turns_fts_vocab"
        self._counts: dict[str, tuple[int, int]] = {}  # stem -> (turns holding it, store size then)
        self._stem_cache: dict[str, tuple[str, ...]] = {}  # word -> its index terms
        # index and name -> (turns read up to, its dense turns, its last turns read)
        self._stretches: dict[str, tuple[int, list[int], list[int]]] = {}
        self._scratch = sqlite3.connect(":memory:", check_same_thread=False)
        self._scratch.executescript(
            f"CREATE VIRTUAL TABLE words USING fts5(body, tokenize='{TOKENIZER}');"
            "CREATE VIRTUAL TABLE words_seen USING fts5vocab(words, instance);"
            # The hits' text is kept apart from their index (external content):
            # such an index is emptied in one step after each query, where one
            # holding its own text tokenizes every row again to delete it.
            "CREATE TABLE hit_text (id INTEGER PRIMARY KEY, body TEXT);"
            "CREATE VIRTUAL TABLE hits USING fts5(body, content='hit_text', content_rowid='id',"
            f" tokenize='{TOKENIZER}');"
        )
        if str(self.store.path) != ":memory:":
            # Candidates' rows and index pages are read straight from the page
            # cache instead of copied into SQLite's own (measured at a million
            # turns: about a sixth of a query's CPU time).
            self.store.conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        self._use_index("en")

    def _use_index(self, language: str) -> None:
        """Read words with `language`'s rules, in its index (see memory.stemming)."""
        table = index_table(language)
        if table == self._table and self._vocab_ready:
            return
        vocab = f"temp.{table}_vocab"
        with self.store.transaction() as db:
            db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab} USING fts5vocab(main, {table}, row)")
        self._stemmer = stemmer_for(language) if language != "en" else None
        self._table, self._vocab, self._vocab_ready = table, vocab, True
        self._counts.clear()  # the counts of another index's terms

    def _choose_index(self) -> None:
        # A language's own index serves once it holds every turn; until the
        # store has built it, words are read by the English index's rules.
        wanted = self.language or self.store.search_language()
        if wanted != "en" and wanted not in self.store.indexed_languages():
            wanted = "en"
        self._use_index(wanted)

    def close(self) -> None:
        self._scratch.close()
        if self.meaning is not None:
            self.meaning.close()

    # -- the query ---------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        roles: Collection[str] | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> SearchResult:
        """The turns that best answer `query`, best first.

        `roles` keeps only some kinds of turn (keys of ROLE_KINDS); `since`
        and `until` are epoch seconds, inclusive. Calls to the recall tools
        and their results are never returned: they are copies of older turns.
        """
        kinds = _kinds_for(roles)
        with self._lock:
            if self.meaning is not None:
                self.meaning.expect(query)  # embedded while the words are searched
            self._choose_index()
            terms, dropped = self._read_query(query)
            absent = tuple(t.text for t in terms if t.postings == 0)
            total = max(self.store.last_id(), 1)
            terms, everywhere = self._informative(terms, total)
            dropped += tuple(t.text for t in everywhere)
            plan = plan_query(terms, self.tuning)
            stretched = self._stretched_names(plan)
            searched = (*plan.listed, *plan.joined, *plan.together, *stretched)
            if not searched:
                return SearchResult((), (), dropped, unsearched=tuple(t.text for t in plan.unsearched),
                                    absent=absent)
            low, high = self._id_range(since, until)
            gathered = self._gather(plan, low, high, searched)
            in_stretches: list[int] = []
            for term in stretched:
                dense = self._name_stretches(term)
                within = dense[bisect_left(dense, low) : bisect_right(dense, high)]
                gathered.add(reversed(within), term)
                in_stretches += within
            weights = term_weights(searched, total, self.tuning)
            favour = self._in_company(gathered, searched)
            # What surrounds a turn says which conversation it is in: there a
            # name counts in full, as the person the question is about.
            around = [_idf(total, t.postings) for t in searched]
            own = gathered.weights(weights)
            beside = gathered.beside(around, self.tuning.window_reach) if self.tuning.window_share else {}
            scored = self._score(own, beside, kinds, favour)
            if self.tuning.stretch_boost and scored:
                covered = gathered.covered(around, self.tuning.stretch_reach, scored)
                boost = self.tuning.stretch_boost
                scored = {i: score * (1 + boost * covered[i]) for i, score in scored.items()}
            ranked = self._refine(scored, query)
            unmeant = None
            if self.meaning is None:
                chosen = self._filter(ranked, kinds, since, until, limit)
            else:
                pool = self._filter(ranked, kinds, since, until, max(limit, self.meaning.depth))
                reranked = self.meaning.rerank(query, pool)
                chosen, unmeant = reranked.order[:limit], reranked.note
                if in_stretches and unmeant is None and self.tuning.meant_hits:
                    chosen = self._meant_in_stretches(query, reranked.order, in_stretches, kinds, limit)
            turns = {t.id: t for t in self.store.get_many(i for i, _ in chosen)}
            expression = " OR ".join(t.expression for t in searched)
            stems = [stem for t in searched for stem in t.stems]
            prefixes = [t.stems[0] for t in searched if t.prefix]
            snippets = self._snippets(
                expression, [turns[i] for i, _ in chosen if i in turns], stems, prefixes
            )
            start = gathered.searched_from
            start_ts = self._ts_of(start) if start is not None else None
            language = self._stemmer.language if self._stemmer else "en"
        hits = tuple(
            Found(turns[i], round(score, 4), snippets.get(i, ""),
                  _words_of(gathered.found.get(i, 0), searched))
            for i, score in chosen
            if i in turns
        )
        return SearchResult(
            hits,
            tuple(t.text for t in searched),
            dropped,
            joined=tuple(t.text for t in plan.joined),
            anchors=tuple(t.text for t in plan.listed) if plan.joined else (),
            unsearched=tuple(t.text for t in plan.unsearched),
            searched_from=start_ts,
            recent_only=high - start + 1 if start is not None else None,
            covered=max(high - low + 1, 0),
            language=language,
            absent=absent,
            unmeant=unmeant,
        )

    def _meant_in_stretches(
        self, query: str, order: Sequence[tuple[int, float]], stretches: Collection[int],
        kinds: frozenset[str] | None, limit: int,
    ) -> list[tuple[int, float]]:
        """The reranked hits with their last `meant_hits` places given to the
        turns of a common name's dense stretches closest in meaning to the
        query (see the module docstring); each such turn scores as the hit
        before it."""
        assert self.meaning is not None
        places = min(self.tuning.meant_hits, limit)
        kept = list(order[: limit - places])
        taken = {turn_id for turn_id, _ in kept}
        # All the stretches' turns, the same from one search to the next (scored
        # faster then); a few more than the places, some being of a kind not wanted.
        closest = [i for i in self.meaning.closest(query, stretches, len(kept) + 4 * places)
                   if i not in taken]
        meta = self._meta(closest)
        wanted = [i for i in closest if i in meta and not meta[i].recall
                  and (kinds is None or meta[i].kind in kinds)][:places]
        floor = kept[-1][1] if kept else 0.0
        chosen = kept + [(turn_id, floor) for turn_id in wanted]
        taken.update(wanted)
        chosen += [pair for pair in order if pair[0] not in taken][: limit - len(chosen)]
        return chosen

    def _in_company(self, gathered: _Gathered, searched: Sequence[Term]) -> dict[int, float]:
        """Each candidate's factor for the company it keeps: turns among many that
        hold a name of the query (see the module docstring); one when absent."""
        tuning = self.tuning
        bits = sum(1 << n for n, t in enumerate(searched) if t.name)
        if not tuning.company_boost or not bits:
            return {}
        near = gathered.company(bits, tuning.company_reach)
        boost, full = tuning.company_boost, max(tuning.company_turns, 1)
        return {i: 1 + boost * min(n, full) / full for i, n in near.items()}

    def _read_query(self, query: str) -> tuple[list[Term], tuple[str, ...]]:
        """Meaningful terms of the query with their document counts."""
        pieces = _WORD.findall(query)
        meaningful, dropped = [], []
        for piece in pieces:
            bare = piece.strip('"*').lower()
            if piece.startswith('"'):
                meaningful.append(piece)
            elif bare in STOP_WORDS or (len(bare) < 2 and not bare.isdigit()):
                dropped.append(bare)
            else:
                meaningful.append(piece)
        if not meaningful:  # a query of stop words only still means something
            meaningful, dropped = [p for p in pieces if p.strip('"*')], []
        named = names_in(query)
        terms: dict[str, Term] = {}
        for piece in meaningful:
            term = self._term(piece, piece.strip('"*').casefold() in named)
            if term is not None and term.expression not in terms:
                terms[term.expression] = term
        return sorted(terms.values(), key=lambda t: t.postings), tuple(dict.fromkeys(dropped))

    def _term(self, piece: str, name: bool) -> Term | None:
        # The porter index stems what MATCH receives; a language's own index
        # holds stems already made, so it is given the stems themselves.
        stemmed = self._stemmer is not None
        if piece.startswith('"'):
            words = _WORD.findall(piece.strip('"'))
            stems = tuple(s for w in words for s in self._stems(w.strip("*")))
            if not stems:
                return None
            phrase = " ".join(stems) if stemmed else " ".join(w.strip("*") for w in words)
            telling = [w for w in stems if w not in STOP_WORDS] or stems  # "the" costs most to count
            count = min(self._postings(w) for w in telling)
            return Term(piece, f'"{phrase}"', count, stems)
        word = piece.rstrip("*")
        stems = tuple(self._stems(word))
        if not stems:
            return None
        if piece.endswith("*"):
            start = fold(word) if stemmed else word
            prefix = fold(word) if stemmed else stems[0]
            return Term(word + "*", f'"{start}"*', self._prefix_postings(prefix), (prefix,), True)
        expression = f'"{" ".join(stems)}"' if stemmed else f'"{word}"'
        return Term(word, expression, max(self._postings(s) for s in stems), stems, name=name)

    def _stems(self, word: str) -> list[str]:
        """The index terms a word becomes: made by FTS5 with the store's own
        tokenizer for English, by the language's stemmer otherwise. Kept per
        word: names and the words of one's subjects recur across queries."""
        if self._stemmer is not None:
            return self._stemmer.words(word)
        kept = self._stem_cache.get(word)
        if kept is not None:
            return list(kept)
        self._scratch.execute("INSERT INTO words (rowid, body) VALUES (1, ?)", (word,))
        try:
            rows = self._scratch.execute(
                "SELECT term FROM words_seen WHERE doc = 1 ORDER BY offset"
            ).fetchall()
        finally:
            self._scratch.execute("DELETE FROM words WHERE rowid = 1")
        if len(self._stem_cache) >= MAX_KEPT_COUNTS:
            self._stem_cache.clear()
        self._stem_cache[word] = tuple(r[0] for r in rows)
        return [r[0] for r in rows]

    def _postings(self, stem: str) -> int:
        """Turns holding `stem`. FTS5 counts them by walking the term's postings,
        milliseconds for a common word in a large store, so a count is kept
        until the store has grown by COUNT_STALENESS since it was taken: the
        plan needs magnitudes, not exact figures."""
        size = self.store.last_id()
        kept = self._counts.get(stem)
        if kept is not None and size - kept[1] <= size * COUNT_STALENESS:
            return kept[0]
        row = self.store.conn.execute(
            f"SELECT doc FROM {self._vocab} WHERE term = ?", (stem,)
        ).fetchone()
        count = int(row[0]) if row else 0
        if len(self._counts) >= MAX_KEPT_COUNTS:
            self._counts.clear()
        self._counts[stem] = (count, size)
        return count

    def _prefix_postings(self, stem: str) -> int:
        rows = self.store.conn.execute(
            f"SELECT doc FROM {self._vocab} WHERE term >= ? AND term < ? LIMIT 500",
            (stem, stem + "\U0010ffff"),
        ).fetchall()
        return sum(int(r[0]) for r in rows)

    def _informative(self, terms: list[Term], total: int) -> tuple[list[Term], list[Term]]:
        """Terms that tell something, and those in most turns (which tell nothing)."""
        present = [t for t in terms if t.postings > 0]
        if total < self.tuning.common_min_turns:
            return present, []
        telling = [t for t in present if t.postings <= total * self.tuning.common_share]
        if not telling:
            return present[:1], present[1:]
        return telling, [t for t in present if t not in telling]

    def _id_range(self, since: float | None, until: float | None) -> tuple[int, int]:
        # IDs follow time (the store refuses a turn dated before its
        # predecessor), so a time window is an ID range the index can seek.
        db = self.store.conn
        low, high = 1, self.store.last_id()
        if since is not None:
            row = db.execute("SELECT id FROM turns WHERE ts >= ? ORDER BY ts LIMIT 1", (since,)).fetchone()
            low = int(row[0]) if row else high + 1
        if until is not None:
            row = db.execute(
                "SELECT id FROM turns WHERE ts <= ? ORDER BY ts DESC LIMIT 1", (until,)
            ).fetchone()
            high = int(row[0]) if row else 0
        return low, high

    def _ts_of(self, turn_id: int) -> float | None:
        row = self.store.conn.execute("SELECT ts FROM turns WHERE id = ?", (turn_id,)).fetchone()
        return float(row[0]) if row else None

    # -- candidates ----------------------------------------------------------

    def _ids(self, expression: str, low: int, high: int) -> list[int]:
        """Turn IDs matching an FTS5 expression in an ID range, newest first, unranked."""
        try:
            # One string of IDs instead of a row per ID: thousands of rows cost
            # more to hand over to Python than one string to split. No ORDER
            # BY: FTS5 walks postings backwards more slowly (a third to two
            # thirds more time for a phrase or a conjunction at a million
            # turns), so they are read in the index's own order and sorted here.
            (listed,) = self.store.conn.execute(
                f"SELECT group_concat(rowid) FROM {self._table}"
                f" WHERE {self._table} MATCH ? AND rowid BETWEEN ? AND ?",
                (expression, low, high),
            ).fetchone()
        except sqlite3.OperationalError as exc:
            raise StoreError(f"cannot search for {expression!r}: {exc}") from exc
        return sorted(map(int, listed.split(",")), reverse=True) if listed else []

    def _gather(self, plan: Plan, low: int, high: int, searched: Sequence[Term]) -> _Gathered:
        """Candidate turns, each with the words it was found with."""
        gathered = _Gathered(searched)
        for term in plan.listed:
            gathered.add(self._ids(term.expression, low, high), term)
        if plan.listed and plan.joined:
            anchor = " OR ".join(t.expression for t in plan.listed)
            for term in plan.joined:
                gathered.add(self._ids(f"{term.expression} AND ({anchor})", low, high), term)
        if plan.together:
            self._by_buckets(plan.together, low, high, gathered)
        return gathered

    def _stretched_names(self, plan: Plan) -> tuple[Term, ...]:
        """The common names searched where they are dense: those the plan
        keeps as boosts beside listed words, in at most `wide_postings` turns."""
        if not self.tuning.name_stretch_turns or not plan.listed:
            return ()
        return tuple(t for t in plan.boosts if t.postings <= self.tuning.wide_postings)

    def _name_stretches(self, term: Term) -> list[int]:
        """The turns, in ascending order, where a common name is dense (see
        `dense_stretches`). Reading a name in twenty thousand turns costs more
        than the rest of a query, and the people a person asks after recur:
        what was read is kept, and only turns newer than it are read again
        (turns are only ever added, so a dense stretch stays dense)."""
        key = f"{self._table} {term.expression}"
        read, dense, tail = self._stretches.get(key, (0, [], []))
        newest = self.store.last_id()
        if newest > read:
            span, more = 2 * self.tuning.company_reach, self.tuning.name_stretch_turns
            recent = tail + self._ids(term.expression, read + 1, newest)[::-1]
            added = dense_stretches(recent, more, span)
            if added:
                dense = sorted({*dense, *added})
            tail = recent[bisect_left(recent, newest - span) :]  # what newer turns may pair with
            if len(self._stretches) >= MAX_KEPT_STRETCHES:
                self._stretches.clear()
            self._stretches[key] = (newest, dense, tail)
        return dense

    def _by_buckets(self, terms: Sequence[Term], low: int, high: int, gathered: _Gathered) -> None:
        """Every word common: all of them together, newest bucket first, then each
        word alone in the newest bucket if that found too few."""
        tuning = self.tuning
        span = max(high - low + 1, 1)
        # Postings spread evenly enough over time for the rarest word to size a bucket.
        width = max(1, int(span * tuning.bucket_postings / max(terms[0].postings, 1)))
        together = " AND ".join(t.expression for t in terms)
        top = high
        for _ in range(tuning.buckets):
            if top < low:
                break
            bottom = max(low, top - width + 1)
            gathered.add(self._ids(together, bottom, top), *terms)
            top = bottom - 1
            if len(gathered.found) >= tuning.candidates:
                break
        if top >= low:
            gathered.searched_from = top + 1
        if len(terms) > 1 and len(gathered.found) < tuning.candidates:
            bottom = max(low, high - width + 1)
            for term in terms:
                gathered.add(self._ids(term.expression, bottom, high), term)

    # -- scoring -----------------------------------------------------------

    def _score(
        self,
        found: dict[int, float],
        beside: dict[int, float],
        kinds: frozenset[str] | None,
        favour: dict[int, float] | None = None,
    ) -> dict[int, float]:
        """BM25 over every searched word for the most promising candidates.

        A candidate's words are known from how it was found, so only its
        length is read (the store's token estimate); each word counts once,
        which for conversational turns is nearly always what it occurs.
        Candidates are chosen by their own words plus `window_share` of the
        words `beside` them; the score they keep is their own. Both are
        multiplied by the candidate's `favour` (the company it keeps), if any.
        """
        if not found:
            return {}
        tuning = self.tuning
        depth = tuning.scored * (tuning.filter_widening if kinds else 1)
        # Ties go to the newer turn: each list arrives newest first.
        share = tuning.window_share
        chosen_by = found
        if beside:
            chosen_by = found.copy()
            for i, w in beside.items():
                chosen_by[i] += share * w
        if favour:
            chosen_by = chosen_by.copy() if chosen_by is found else chosen_by
            for i, f in favour.items():
                chosen_by[i] *= f
        # sorted(...)[:n] is what heapq.nlargest promises to equal, ties
        # included; over a few thousand candidates, one sort in C is several
        # times cheaper than nlargest's heap kept in Python.
        rough = sorted(chosen_by, key=chosen_by.__getitem__, reverse=True)[:depth]
        sizes = self._lengths(rough, kinds)
        if kinds is not None:  # the best of the wanted kinds join the best overall
            wanted = [i for i in rough if i in sizes and sizes[i][1] in kinds]
            rough = list(dict.fromkeys(rough[: tuning.scored] + wanted[: tuning.scored]))
        lengths = sorted(tokens for tokens, _ in sizes.values())
        typical = max(lengths[len(lengths) // 2], 1) if lengths else 1  # a median: giants skew a mean
        k1, b = tuning.k1, tuning.b
        norm = k1 * b / typical
        base = k1 * (1 - b) + 1
        scores = {
            turn_id: (k1 + 1) / (base + norm * sizes[turn_id][0]) * found[turn_id]
            for turn_id in rough
            if turn_id in sizes
        }
        if favour:
            beside = beside.copy()
            for i in beside.keys() & favour.keys():
                beside[i] *= favour[i]
            for i in scores.keys() & favour.keys():
                scores[i] *= favour[i]
        best = _best(scores, tuning.candidates)
        if beside:  # the best by their own words stay; the window fills the other places
            kept = best[: max(tuning.candidates - tuning.window_candidates, 0)]
            pick = {i: score + share * beside.get(i, 0.0) for i, score in scores.items()}
            for i in kept:
                del pick[i]
            best = kept + _best(pick, tuning.window_candidates)
        return {i: scores[i] for i in best}

    def _lengths(self, ids: Sequence[int], kinds: frozenset[str] | None) -> dict[int, tuple[int, str]]:
        """Each turn's token estimate, and its kind when a filter needs it: the only
        columns scoring reads, for up to `scored` candidates per query."""
        column = "kind" if kinds is not None else "''"
        return {tid: (tokens, kind) for tid, tokens, kind in self._rows(f"tokens, {column}", ids)}

    # -- ranking -----------------------------------------------------------

    def _refine(self, scored: dict[int, float], query: str) -> list[tuple[int, float, _Meta]]:
        """Candidates and their neighbours, rescored with the conversational signals."""
        if not scored:
            return []
        tuning = self.tuning
        reach = tuning.neighbour_reach
        meta = self._meta({i + d for i in scored for d in range(-reach, reach + 1)})
        # Each scoring turn lends its score to the turns around it; a turn
        # keeps, for each distance, the best loan it received.
        loans: dict[int, list[float]] = {}
        gap = tuning.stretch_gap_s
        for lender, score in scored.items():
            source = meta.get(lender)
            if source is None or source.recall:
                continue
            for step in range(1, reach + 1):
                for borrower in (lender - step, lender + step):
                    target = meta.get(borrower)
                    if target is None or abs(target.ts - source.ts) > gap:
                        continue
                    slots = loans.get(borrower)
                    if slots is None:
                        slots = loans[borrower] = [0.0] * (reach + 1)
                    if score > slots[step]:
                        slots[step] = score
        decays = [tuning.neighbour_decay**step for step in range(1, reach + 1)]
        named = names_in(query)
        spans = date_spans(query, self.zone)
        ranked = []
        for turn_id in scored.keys() | loans.keys():
            info = meta.get(turn_id)
            if info is None or info.recall:
                continue
            total = scored.get(turn_id, 0.0)
            slots = loans.get(turn_id)
            if slots:
                total += sum(map(mul, decays, slots[1:]))
            if total <= 0:
                continue
            if named and info.sender and info.sender.casefold() in named:
                total *= 1 + tuning.speaker_boost
            if spans and any(start <= info.ts < end for start, end in spans):
                total *= 1 + tuning.date_boost
            ranked.append((turn_id, total, info))
        ranked.sort(key=lambda entry: (-entry[1], -entry[0]))
        return ranked

    def _meta(self, ids: Iterable[int]) -> dict[int, _Meta]:
        return {
            tid: _Meta(ts, kind, sender, tool_name in RECALL_TOOLS and kind in _RECALL_KINDS)
            for tid, ts, kind, sender, tool_name in self._rows("ts, kind, sender, tool_name", ids)
        }

    def _rows(self, columns: str, ids: Iterable[int]) -> list[tuple]:
        """`columns` of the turns with these IDs, each row led by its ID; unknown
        IDs are skipped."""
        return self.store.conn.execute(
            f"SELECT id, {columns} FROM turns WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(ids)),),
        ).fetchall()

    def _filter(
        self,
        ranked: Sequence[tuple[int, float, _Meta]],
        kinds: frozenset[str] | None,
        since: float | None,
        until: float | None,
        limit: int,
    ) -> list[tuple[int, float]]:
        wanted = [
            (turn_id, score, info.ts)
            for turn_id, score, info in ranked
            if (kinds is None or info.kind in kinds)
            and (since is None or info.ts >= since)
            and (until is None or info.ts <= until)
        ]
        return [(turn_id, score) for turn_id, score, _ in wanted[:limit]]

    def _snippets(
        self, expression: str, turns: Sequence[Turn], stems: Sequence[str], prefixes: Sequence[str] = ()
    ) -> dict[int, str]:
        if not turns:
            return {}
        if self._stemmer is not None:  # FTS5 cannot stem as this language does: marked here
            wanted = frozenset(stems)
            return {t.id: stemmed_snippet(own_text(t), wanted, self._stemmer, prefixes) for t in turns}
        db = self._scratch
        passages = [(t.id, _passage(own_text(t), stems)) for t in turns]
        try:
            db.executemany("INSERT INTO hit_text (id, body) VALUES (?, ?)", passages)
            db.executemany("INSERT INTO hits (rowid, body) VALUES (?, ?)", passages)
            rows = db.execute(
                "SELECT rowid, snippet(hits, 0, '«', '»', '…', 24) FROM hits WHERE hits MATCH ?",
                (expression,),
            ).fetchall()
        finally:
            db.execute("INSERT INTO hits (hits) VALUES ('delete-all')")
            db.execute("DELETE FROM hit_text")
        found = {int(r[0]): " ".join(str(r[1]).split()) for r in rows}
        for turn in turns:  # a hit found through its neighbours matched no word itself
            if turn.id not in found:
                found[turn.id] = excerpt(own_text(turn))
        return found


SNIPPET_WORDS = 24  # as many as FTS5's snippet() is asked for
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def stemmed_snippet(
    text: str, stems: frozenset[str], stemmer: WordStemmer, prefixes: Sequence[str] = ()
) -> str:
    """Up to SNIPPET_WORDS words of `text` around where most of its words have
    one of `stems` (or a stem starting with one of `prefixes`), those words
    marked «so», as FTS5's snippet() marks them; the start of the text when
    no word matches."""
    passage = _passage(text, sorted(stems))
    tokens = list(_TOKEN.finditer(passage))
    starts = tuple(prefixes)

    def wanted(word: str) -> bool:
        stem = stemmer.stem(word)
        return stem in stems or bool(starts) and stem.startswith(starts)

    hits = [n for n, m in enumerate(tokens) if wanted(m.group())]
    if not hits:
        return excerpt(text)
    lead = SNIPPET_WORDS // 6  # a few words of what comes before the first match
    windows = [max(0, n - lead) for n in hits]
    first = max(windows, key=lambda a: (sum(a <= n < a + SNIPPET_WORDS for n in hits), -a))
    last = min(len(tokens), first + SNIPPET_WORDS)
    marked = set(hits)
    pieces = []
    cursor = tokens[first].start()
    for n in range(first, last):
        token = tokens[n]
        pieces.append(passage[cursor : token.start()])
        pieces.append(f"«{token.group()}»" if n in marked else token.group())
        cursor = token.end()
    body = "".join(pieces)
    if last < len(tokens):
        body += "…"
    elif cursor < len(passage):
        body += passage[cursor:]
    if first > 0 or passage is not text and not text.startswith(passage):
        body = "…" + body
    return " ".join(body.split())


def _passage(text: str, stems: Sequence[str]) -> str:
    """The stretch of a long text where a snippet will come from: around the first
    place a query word seems to occur (a stem is most often a prefix of its
    words), so that a hit the size of a book is not tokenized whole for ten words."""
    if len(text) <= PASSAGE_CHARS:
        return text
    folded = text.casefold()
    places = [at for at in (folded.find(stem) for stem in stems) if at >= 0]
    start = max(0, min(places) - PASSAGE_CHARS // 4) if places else 0
    return text[start : start + PASSAGE_CHARS]


def _idf(total: int, postings: int) -> float:
    """BM25's inverse document frequency, as FTS5 computes it (never quite zero)."""
    return max(math.log((total - postings + 0.5) / (postings + 0.5)), 1e-6)


def _kinds_for(roles: Collection[str] | None) -> frozenset[str] | None:
    if not roles:
        return None
    unknown = sorted(set(roles) - set(ROLE_KINDS))
    if unknown:
        raise ValueError(
            f"unknown role(s) {', '.join(unknown)}; use any of {', '.join(ROLE_KINDS)}"
        )
    return frozenset(k.value for r in roles for k in ROLE_KINDS[r])


def plain_expression(query: str) -> str:
    """The baseline: every word of the query, OR-ed, for plain BM25."""
    words = re.findall(r"[^\W_]+", query)
    return " OR ".join(f'"{w}"' for w in words) or '""'
