"""Each citation is judged against the turn it cites: supported, weak or unsupported."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noema.memory.support import (
    COSINE_FLOOR,
    WORDS_ONLY,
    Evidence,
    Source,
    Support,
    claims,
    judge,
    quantized,
    sources_of,
    with_context,
)
from noema.memory.turns import ROLE_OF_KIND, Turn, TurnKind
from noema.memory.validator import Citable, validate

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
U, A = TurnKind.USER, TurnKind.ASSISTANT

SAID = [(U, "I want to take the night train to Lisbon next Friday."),
        (A, "The night train leaves Madrid at 21:40 and reaches Lisbon at 7:20."),
        (U, "Book a sleeper cabin for two, please."),
        (A, "Done: cabin 12 on the Friday train, two berths, 180 euros."),
        (U, "Also remind me to water the tomatoes before I leave."),
        (A, "Shall I remind you on Friday at 18:00 to water the tomatoes?"),
        (U, "yes, please"),
        (A, "Reminder set for Friday at 18:00.")]
TURNS = [Turn(n, 1.7e9 + n, kind, ROLE_OF_KIND[kind], text) for n, (kind, text) in enumerate(SAID, 1)]
GOOD = ("The person wanted to take the night train to Lisbon {cite:1}. The agent found that it "
        "leaves Madrid at 21:40 {cite:2}, and the person asked for a sleeper cabin for two {cite:3}, "
        "which the agent booked for 180 euros {cite:4}. Before leaving, the person wanted the "
        "tomatoes watered {cite:5}; the agent offered a reminder on Friday evening {cite:6} and "
        "the person agreed {cite:7}.")


def rotated(text: str, by: int) -> str:
    """The same sentences with their citations moved `by` places along: each cites another turn."""
    ids = re.findall(r"\{cite:(\d+)\}", text)
    moved = iter(ids[by:] + ids[:by])
    return re.sub(r"\{cite:\d+\}", lambda _: f"{{cite:{next(moved)}}}", text)


def verdicts(text: str, sources=None, **options) -> dict[int, Support]:
    report = judge(text, sources if sources is not None else sources_of(TURNS), **options)
    return {j.claim.turn_id: j.support for j in report.judgements}


# -- the clause a marker ends ------------------------------------------------------


def test_each_marker_ends_the_words_since_the_previous_marker_or_the_sentence_start():
    text = ("Earlier things. The person bought an old wooden boat {cite:1} and then asked the "
            "agent for a name fit for a sailor {cite:2}. Both {cite:3, 4}. It sank {cite:5} {cite:6}.")
    found = {c.turn_id: c for c in claims(text)}
    assert found[1].clause == "The person bought an old wooden boat"
    assert found[2].clause == "and then asked the agent for a name fit for a sailor"
    assert found[2].sentence.startswith("The person bought") and "{cite" not in found[2].sentence
    # too few words of their own: read back to the sentence's start
    assert found[3].clause == found[4].clause == "Both"
    assert found[3].marker == (3, 4)
    # markers side by side share the clause before the first
    assert found[5].clause == found[6].clause == "It sank"


# -- the decision -------------------------------------------------------------------


def test_sentences_that_retell_their_turns_are_supported_and_moved_citations_are_not():
    good = judge(GOOD, sources_of(TURNS))
    assert all(j.support is not Support.UNSUPPORTED for j in good.judgements)
    assert good.count(Support.SUPPORTED) >= 5 and not good.rejects
    assert good.words_only == 7 and "judged on words alone" in good.notes[0]
    moved = judge(rotated(GOOD, 3), sources_of(TURNS))
    assert moved.count(Support.UNSUPPORTED) >= 5 and moved.rejects
    # the sentence about the train now cites the cabin's booking
    first = moved.judgements[0]
    assert (first.claim.turn_id, first.support) == (4, Support.UNSUPPORTED)


def test_a_clause_mostly_about_another_turn_is_weak_and_still_accepted():
    mixed = "The person asked about the tomatoes and the sleeper cabin {cite:5}."
    report = judge(mixed, sources_of(TURNS))
    judgement = report.judgements[0]
    assert judgement.support is Support.WEAK
    assert 0 < judgement.words and judgement.words_margin < 0  # turn 3 says more of it
    assert report.count(Support.WEAK) == 1 and report.share == 0.0 and not report.rejects


def test_a_clause_that_shares_nothing_with_its_turn_is_unsupported():
    nonsense = "16 turns, IDs 1-40 {cite:3}. The journey continued {cite:5}."
    assert set(verdicts(nonsense).values()) == {Support.UNSUPPORTED}
    # with vectors, a meaning this far from the turn's does not save it either
    far = [0.0, 1.0, 0.0, 0.0]
    sources = [Source(t.id, t.content, vector=quantized([1.0, 0.0, 0.0, 0.0])) for t in TURNS]
    clause_vectors = {c.clause: far for c in claims(nonsense)}
    assert set(verdicts(nonsense, sources, clause_vectors=clause_vectors).values()) == {
        Support.UNSUPPORTED}


def unit(axis: int, dims: int = 8) -> list[float]:
    return [1.0 if n == axis else 0.0 for n in range(dims)]


def test_meaning_decides_where_no_word_is_shared_and_the_report_says_how_it_judged():
    paraphrase = "The person longed for an overnight rail journey to Portugal's capital {cite:1}."
    sources = [Source(t.id, t.content, vector=quantized(unit(t.id))) for t in TURNS]
    clause = claims(paraphrase)[0].clause
    close = judge(paraphrase, sources, clause_vectors={clause: unit(1)})
    assert close.judgements[0].support is Support.SUPPORTED
    assert close.judgements[0].cosine is not None and close.judgements[0].cosine > COSINE_FLOOR
    assert close.words_only == 0 and close.notes == ()
    alone = judge(paraphrase, sources)  # no model: the words decide, and say so
    assert alone.judgements[0].support is Support.UNSUPPORTED
    assert alone.words_only == 1 and "no embedding model" in alone.notes[0]
    # a vector pointing at another turn of the pool: the margin tells them apart
    elsewhere = judge(paraphrase, sources, clause_vectors={clause: unit(4)})
    assert elsewhere.judgements[0].support is Support.UNSUPPORTED


def test_a_short_reply_is_read_with_the_turn_it_answers():
    agreed = "The person agreed to be reminded to water the tomatoes {cite:7}."
    assert verdicts(agreed)[7] is Support.SUPPORTED
    bare = [Source(t.id, t.content) for t in TURNS]  # "yes, please" read alone
    assert verdicts(agreed, bare)[7] is Support.UNSUPPORTED
    assert with_context(bare)[6].context == SAID[5][1]


def test_a_clause_naming_only_someone_else_weighs_less():
    ana = Turn(1, 1.7e9, U, ROLE_OF_KIND[U], "I booked the Lisbon train for Friday", sender="Ana",
               channel="telegram")
    luis = Turn(2, 1.7e9 + 1, U, ROLE_OF_KIND[U], "I booked the Lisbon train for Friday",
                sender="Luis", channel="telegram")
    sources = sources_of([ana, luis])
    right = judge("Ana booked the Lisbon train for Friday {cite:1}.", sources).judgements[0]
    wrong = judge("Ana booked the Lisbon train for Friday {cite:2}.", sources).judgements[0]
    assert (right.named, wrong.named) == (1, -1)
    assert wrong.score == right.score + WORDS_ONLY.other_named


def test_spanish_words_meet_by_their_stems():
    dichos = [(U, "Quiero reservar una mesa para cuatro personas en el restaurante del puerto."),
              (A, "Las entradas del concierto cuestan cuarenta euros cada una.")]
    turns = [Turn(n, 1.7e9 + n, k, ROLE_OF_KIND[k], t) for n, (k, t) in enumerate(dichos, 1)]
    text = "La persona quería reservar mesas para cuatro en el restaurante {cite:1}."
    assert verdicts(text, sources_of(turns, language="es"), language="es")[1] is Support.SUPPORTED
    moved = "La persona quería reservar mesas para cuatro en el restaurante {cite:2}."
    assert verdicts(moved, sources_of(turns, language="es"), language="es")[2] is Support.UNSUPPORTED


def test_cited_turns_that_are_not_given_are_left_unchecked():
    report = judge("The person wanted the night train to Lisbon {cite:1} {cite:99}.", sources_of(TURNS))
    assert report.unchecked == (99,) and [j.claim.turn_id for j in report.judgements] == [1]


# -- properties -----------------------------------------------------------------------

# Made-up words (no function word among them), a few per turn.
WORDS = st.text(alphabet="bcdfghjklmnpqrstvwxz", min_size=4, max_size=9)
TEXTS = st.lists(WORDS, min_size=1, max_size=8).map(" ".join)


@FAST
@given(texts=st.lists(TEXTS, min_size=2, max_size=12), data=st.data(), meaning=st.booleans())
def test_citing_the_very_turn_whose_words_are_the_clause_is_supported(texts, data, meaning):
    vectors = [unit(n % 16, 16) for n in range(len(texts))]
    sources = [Source(n, text, ("person",), quantized(v) if meaning else None)
               for n, (text, v) in enumerate(zip(texts, vectors, strict=True), 1)]
    cited = data.draw(st.integers(1, len(texts)))
    text = f"{texts[cited - 1]} {{cite:{cited}}}."
    clause_vectors = {claims(text)[0].clause: vectors[cited - 1]} if meaning else None
    report = judge(text, sources, clause_vectors=clause_vectors)
    assert [j.support for j in report.judgements] == [Support.SUPPORTED]


@FAST
@given(texts=st.lists(TEXTS, min_size=2, max_size=10), data=st.data())
def test_verdicts_are_deterministic_and_independent_of_order(texts, data):
    sources = [Source(n, text, ("person",), quantized(unit(n % 16, 16)))
               for n, text in enumerate(texts, 1)]
    told = data.draw(st.lists(st.tuples(st.integers(1, len(texts)), st.integers(1, len(texts))),
                              min_size=1, max_size=8))
    # each sentence retells one turn and cites one (the same or another)
    sentences = [f"{texts[said - 1]} {{cite:{cited}}}." for said, cited in told]
    order = data.draw(st.permutations(range(len(sentences))))
    shuffled_sources = data.draw(st.permutations(sources))

    def outcome(parts, pool):
        text = " ".join(parts)
        vectors = {c.clause: unit(sum(map(ord, c.clause)) % 16, 16) for c in claims(text)}
        report = judge(text, pool, clause_vectors=vectors)
        return sorted((j.claim.turn_id, j.claim.clause, j.support.value, round(j.score, 9))
                      for j in report.judgements)

    first = outcome(sentences, sources)
    assert outcome(sentences, sources) == first
    assert outcome([sentences[i] for i in order], shuffled_sources) == first


# -- in the validator ------------------------------------------------------------------

ALLOWED = Citable(frozenset(), frozenset(t.id for t in TURNS), frozenset())


def save_point(journey: str) -> str:
    return f"## State\nA night train to Lisbon is booked.\n\n## The Journey\n{journey}\n"


def test_the_validator_accepts_a_save_point_whose_citations_rest_on_their_turns():
    verdict = validate(save_point(GOOD), allowed=ALLOWED, block=TURNS, min_journey_words=20)
    assert verdict.ok, verdict.failures
    assert verdict.support is not None and verdict.support.share is not None
    assert len(verdict.support.judgements) == 7


def test_the_validator_rejects_moved_citations_naming_each_sentence_and_what_its_turn_says():
    verdict = validate(save_point(rotated(GOOD, 3)), allowed=ALLOWED, block=TURNS,
                       min_journey_words=20)
    assert [f.code for f in verdict.failures] == ["unsupported_citations"]
    message = verdict.failures[0].message
    assert re.match(r"[5-7] of its 7 citations do not rest on the turn they cite", message)
    # each named by the words its marker ends, "…" where the sentence began earlier
    assert ('- "The person wanted to take the night train to Lisbon {cite:4}": turn 4 says '
            '"Done: cabin 12 on the Friday train, two berths, 180 euros."') in message
    assert ('- "…which the agent booked for 180 euros {cite:7}": turn 7 says "yes, please"'
            in message)
    assert "Cite the turn that says what each of these sentences says" in message


def test_one_doubtful_citation_among_many_is_noted_not_rejected():
    one_off = GOOD.replace("sleeper cabin for two {cite:3}", "sleeper cabin for two {cite:8}")
    verdict = validate(save_point(one_off), allowed=ALLOWED, block=TURNS, min_journey_words=20)
    assert verdict.ok, verdict.failures
    assert any("may not rest on their turn" in note and "turn 8" in note for note in verdict.notes)


# -- gathering what a save point cites ----------------------------------------------


def test_evidence_reads_older_cited_turns_their_vectors_and_embeds_the_clauses_at_once():
    older = Turn(3, 1.6e9, U, ROLE_OF_KIND[U], "My sister Marta lives in Lisbon, near the river.")
    block = TURNS[3:]  # turns 4 to 8; turn 3 comes from the previous save point
    store = {t.id: t for t in [*TURNS, older]}
    asked: list[set[int]] = []
    batches: list[list[str]] = []

    def turns(ids):
        asked.append(set(ids))
        return [store[i] for i in ids if i in store]

    def embed(texts):
        batches.append(list(texts))
        return [unit(3 if "sister" in t else 4) for t in texts]

    evidence = Evidence(turns=turns, vectors=lambda ids: {i: quantized(unit(i)) for i in ids},
                        embed=embed)
    text = ("The person's sister Marta lives in Lisbon {cite:3}, and the agent booked cabin 12 "
            "for 180 euros {cite:4}.")
    gathered = evidence.gather(text, block)
    assert asked == [{3}]  # only what the block does not hold
    assert len(batches) == 1 and len(batches[0]) == 2  # one batch, every clause
    report = judge(text, gathered.sources, clause_vectors=gathered.clause_vectors)
    assert report.words_only == 0 and report.notes == ()
    assert {j.claim.turn_id: j.support for j in report.judgements} == {
        3: Support.SUPPORTED, 4: Support.SUPPORTED}


def test_a_failing_model_leaves_the_words_to_decide_and_says_why():
    def broken(texts):
        raise RuntimeError("the model's process exited")

    gathered = Evidence(turns=lambda ids: [], embed=broken).gather(GOOD, TURNS)
    assert gathered.clause_vectors is None and "process exited" in (gathered.note or "")
    report = judge(GOOD, gathered.sources)
    assert report.words_only == 7 and not report.rejects
