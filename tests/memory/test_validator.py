"""The validator rejects every citation it was not given, and only those."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from noema.memory.recall import turn_header
from noema.memory.turns import ROLE_OF_KIND, Flag, Turn, TurnKind
from noema.memory.validator import Citable, citable, cited_ids, validate

from .conftest import said_in, save_point_text

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def turn(turn_id: int, kind: TurnKind = TurnKind.USER, content: str | None = None, **extra) -> Turn:
    # Each turn says something of its own, so that a sentence can retell it.
    said = f"the crane {turn_id} needs oil" if content is None else content
    return Turn(turn_id, 1_700_000_000.0 + turn_id, kind, ROLE_OF_KIND[kind], said, **extra)


def block_of(first: int, count: int) -> list[Turn]:
    kinds = (TurnKind.USER, TurnKind.ASSISTANT)
    return [turn(first + n, kinds[n % 2]) for n in range(count)]


def allowed_for(block: list[Turn], previous: set[int] = frozenset(),
                recalled: set[int] = frozenset()) -> Citable:
    return Citable(frozenset(previous), frozenset(t.id for t in block), frozenset(recalled))


blocks = st.builds(block_of, st.integers(1, 5_000), st.integers(2, 30))


@FAST
@given(block=blocks, invented=st.integers(1, 10**12), data=st.data())
def test_any_invented_id_is_rejected(block, invented, data):
    previous = set(data.draw(st.sets(st.integers(1, block[0].id), max_size=5)))
    allowed = allowed_for(block, previous)
    assume(invented not in allowed.all)
    cited = data.draw(st.lists(st.sampled_from(sorted(allowed.block)), min_size=1, max_size=6))
    position = data.draw(st.integers(0, len(cited)))
    ids = cited[:position] + [invented] + cited[position:]
    verdict = validate(save_point_text(ids), allowed=allowed, block=block)
    assert not verdict.ok
    failure = next(f for f in verdict.failures if f.code == "invented_id")
    assert str(invented) in failure.message


ALTERATIONS = {
    "leading zero": lambda s: "0" + s,
    "sign": lambda s: "-" + s,
    "plus": lambda s: "+" + s,
    "letter": lambda s: s + "a",
    "decimal": lambda s: s + ".0",
    "thousands": lambda s: s[:1] + "," + s[1:] if len(s) > 1 else s + ",",
    "space inside": lambda s: s[:1] + " " + s[1:] if len(s) > 1 else s + " 0",
    "hash": lambda s: "#" + s,
    "word": lambda s: "turn " + s,
    "hex": lambda s: hex(int(s)),
    "digit added": lambda s: s + "7",
    "digit dropped": lambda s: s[:-1] or "0",
    "digit doubled": lambda s: s[0] + s,
    "off by one": lambda s: str(int(s) + 1),
}


@FAST
@given(block=blocks, how=st.sampled_from(sorted(ALTERATIONS)), data=st.data())
def test_any_altered_id_is_rejected(block, how, data):
    allowed = allowed_for(block)
    original = data.draw(st.sampled_from(sorted(allowed.block)))
    altered = ALTERATIONS[how](str(original))
    # An alteration that lands exactly on other IDs the chronicler was given
    # (one, or a list: "11" made "1,1" cites turn 1 twice) is indistinguishable
    # from citing those turns, and is not an invention.
    parts = [p.strip() for p in altered.split(",")]
    assume(not all(p.isdigit() and not p.startswith("0") and int(p) in allowed.all
                   for p in parts))
    text = save_point_text([t.id for t in block[:2]], extra=f" It ended there {{cite:{altered}}}.")
    verdict = validate(text, allowed=allowed, block=block)
    assert not verdict.ok
    assert {f.code for f in verdict.failures} & {"invented_id", "malformed_citation"}


@FAST
@given(block=blocks, beyond=st.integers(1, 10**6))
def test_ids_out_of_range_are_rejected(block, beyond):
    allowed = allowed_for(block)
    below = block[0].id - beyond
    for outside in (block[-1].id + beyond, below if below >= 1 else None):
        if outside is None or outside in allowed.all:
            continue
        verdict = validate(save_point_text([block[0].id, outside]), allowed=allowed, block=block)
        assert "invented_id" in {f.code for f in verdict.failures}
    zero = validate(save_point_text([block[0].id], extra=" Zero {cite:0}."), allowed=allowed, block=block)
    assert not zero.ok


@FAST
@given(
    block=blocks,
    recalled=st.sets(st.integers(1, 999), min_size=1, max_size=6),
    data=st.data(),
)
def test_ids_surfaced_by_recall_tools_are_accepted(block, recalled, data):
    first = block[0].id + 1000  # every recalled turn is older than the block
    shifted = [turn(first + n, t.kind) for n, t in enumerate(block)]
    result_id = shifted[-1].id + 1
    shown = "\n\n".join(f"{turn_header(turn(r))}\nold words {r}" for r in sorted(recalled))
    recall = turn(result_id, TurnKind.TOOL_RESULT, shown, tool_name="lookup_turn", call_id="c1")
    call = turn(result_id - 1, TurnKind.TOOL_CALL, "", tool_name="lookup_turn", call_id="c1")
    whole = shifted[:-1] + [call, recall]
    allowed = citable(None, whole)
    assert allowed.recalled == frozenset(recalled)
    chosen = data.draw(st.lists(st.sampled_from(sorted(recalled)), min_size=1, max_size=4))
    verdict = validate(save_point_text([whole[0].id, *chosen], said=said_in(whole)),
                       allowed=allowed, block=whole)
    assert verdict.ok, verdict.failures


@FAST
@given(block=blocks, data=st.data())
def test_citing_only_given_ids_is_accepted(block, data):
    previous = set(data.draw(st.sets(st.integers(1, block[0].id), max_size=4)))
    allowed = allowed_for(block, previous)
    ids = data.draw(st.lists(st.sampled_from(sorted(allowed.all)), min_size=1, max_size=8))
    ids.insert(0, block[0].id)
    verdict = validate(save_point_text(ids, said=said_in(block)), allowed=allowed, block=block)
    assert verdict.ok, verdict.failures
    assert set(verdict.cited) == set(ids)


def test_recalled_ids_must_exist_when_the_store_says_so():
    quoted = turn(50, TurnKind.TOOL_RESULT, "[turn 7 · user · x]\nhi\n[turn 9 · user · y]\n",
                  tool_name="search_full_history", call_id="c")
    allowed = citable(None, [quoted], existing=lambda ids: [i for i in ids if i != 9])
    assert allowed.recalled == {7}


def test_failed_recall_and_other_tools_surface_nothing():
    failed = turn(50, TurnKind.TOOL_RESULT, "[turn 7 · user · x]", tool_name="lookup_turn",
                  call_id="c", flags=Flag.ERROR)
    other = turn(51, TurnKind.TOOL_RESULT, "[turn 8 · user · x]", tool_name="read_file", call_id="d")
    future = turn(52, TurnKind.TOOL_RESULT, "[turn 90 · user · x]", tool_name="lookup_turn", call_id="e")
    assert citable(None, [failed, other, future]).recalled == frozenset()


def test_previous_save_point_citations_stay_citable():
    block = block_of(20, 4)
    previous = save_point_text([3, 5])
    allowed = citable(previous, block)
    assert allowed.previous == {3, 5}
    assert validate(save_point_text([20, 3, 5], said=said_in(block)), allowed=allowed, block=block).ok


# -- form ------------------------------------------------------------------------

BLOCK = block_of(10, 6)
ALLOWED = allowed_for(BLOCK)
SAID = said_in(BLOCK)


def codes(text: str, **options) -> set[str]:
    return {f.code for f in validate(text, allowed=ALLOWED, block=BLOCK, **options).failures}


def test_a_bullet_list_journey_is_rejected():
    text = save_point_text([10]) + "- first {cite:11}\n- second {cite:12}\n"
    assert "bullet_list" in codes(text)


def test_citations_after_the_last_sentence_are_rejected():
    assert "trailing_citations" in codes(save_point_text([10], extra=" It ended well. {cite:11}"))
    assert "trailing_citations" in codes(save_point_text([10], extra=" It ended. {cite:11} {cite:12}"))
    assert "trailing_citations" not in codes(save_point_text([10], extra=" It ended well {cite:11}."))


def test_a_line_of_citations_alone_is_rejected():
    assert "citation_only_line" in codes(save_point_text([10]) + "{cite:11}, {cite:12}.\n")


def test_piled_citations_are_rejected():
    assert "citation_pile" in codes(save_point_text([10], extra=" All of it {cite:11, 12, 13, 14}."))
    adjacent = " All {cite:11} {cite:12}, {cite:13} {cite:14}."
    assert "citation_pile" in codes(save_point_text([10], extra=adjacent))
    assert "citation_pile" not in codes(save_point_text([10], extra=" Both {cite:11, 12}."))


def test_sections_are_required_and_alone():
    journey_only = "## The Journey\n" + save_point_text([10]).split("## The Journey\n")[1]
    assert "missing_state" in codes(journey_only)
    assert "missing_journey" in codes("## State\nAll fine {cite:10}.\n")
    between = save_point_text([10]).replace("## The Journey", "## Open questions\nnone\n\n## The Journey")
    assert "extra_section" in codes(between)
    # what comes before the first section never reaches the context
    verdict = validate("## Summary\nx\n" + save_point_text([10], said=SAID), allowed=ALLOWED,
                       block=BLOCK)
    assert verdict.ok and verdict.text.startswith("## State") and verdict.notes


def test_terse_journeys_and_journeys_without_new_citations_are_rejected():
    assert "terse" in codes("## State\nok\n\n## The Journey\nThey talked {cite:10}.\n")
    assert "no_new_citations" in codes(save_point_text([], journey_words=60))


def test_spanish_headings_fences_and_preambles_are_understood():
    spanish = save_point_text([10, 11], said=SAID).replace("## State", "## Estado")
    spanish = spanish.replace("## The Journey", "## El Viaje")
    verdict = validate(f"Aquí está:\n```markdown\n{spanish}```", allowed=ALLOWED, block=BLOCK)
    assert verdict.ok, verdict.failures
    assert verdict.text.startswith("## Estado")


def test_coverage_is_reported_and_can_be_required():
    verdict = validate(save_point_text([10, 11, 12]), allowed=ALLOWED, block=BLOCK)
    assert (verdict.covered, verdict.coverable) == (3, 6)
    assert verdict.coverage == pytest.approx(0.5)
    assert "low_coverage" in codes(save_point_text([10, 11, 12]), min_coverage=0.8)


def test_cited_ids_reads_lists():
    assert cited_ids("a {cite: 3, 4} b {cite:5} c {cite:05}") == {3, 4, 5}
