"""Block selection never splits a tool call from its result and keeps recent turns raw."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noema.memory.selection import safe_cuts, select_block
from noema.memory.turns import ROLE_OF_KIND, Turn, TurnKind

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build(script: list[tuple[str, int]]) -> list[Turn]:
    """Turns from a script of (action, size); calls are answered later, in order."""
    turns: list[Turn] = []
    waiting: list[tuple[str, str, TurnKind]] = []
    for n, (action, size) in enumerate(script):
        tid = len(turns) + 1
        if action == "call":
            call_id = f"c{n}"
            turns.append(Turn(tid, tid, TurnKind.TOOL_CALL, ROLE_OF_KIND[TurnKind.TOOL_CALL], "",
                              tool_name="read_file", call_id=call_id, arguments="{}", tokens=size,
                              cycle_id=n // 5))
            waiting.append((call_id, "read_file", TurnKind.TOOL_RESULT))
        elif action == "event":
            call_id = f"e{n}"
            turns.append(Turn(tid, tid, TurnKind.TOOL_CALL, ROLE_OF_KIND[TurnKind.TOOL_CALL], "",
                              tool_name="pool_event", call_id=call_id, arguments="{}", tokens=size))
            waiting.append((call_id, "pool_event", TurnKind.EVENT))
        elif action == "answer" and waiting:
            call_id, name, kind = waiting.pop(0)
            turns.append(Turn(tid, tid, kind, ROLE_OF_KIND[kind], "x" * size, tool_name=name,
                              call_id=call_id, tokens=size, cycle_id=n // 5))
        else:
            kind = TurnKind.USER if action == "user" else TurnKind.ASSISTANT
            turns.append(Turn(tid, tid, kind, ROLE_OF_KIND[kind], "words", tokens=size,
                              cycle_id=None if kind is TurnKind.USER else n // 5))
    return turns


scripts = st.lists(
    st.tuples(st.sampled_from(["user", "assistant", "call", "event", "answer", "answer"]),
              st.integers(1, 400)),
    min_size=1, max_size=60,
)


def splits_a_pair(block_len: int, turns: list[Turn]) -> bool:
    inside = {t.call_id for t in turns[:block_len] if t.call_id}
    outside = {t.call_id for t in turns[block_len:] if t.call_id}
    return bool(inside & outside)


@FAST
@given(script=scripts)
def test_every_safe_cut_keeps_pairs_together(script):
    turns = build(script)
    cuts = safe_cuts(turns)
    assert cuts[0] and len(cuts) == len(turns) + 1
    for index, safe in enumerate(cuts):
        if safe:
            assert not splits_a_pair(index, turns)
        else:
            assert splits_a_pair(index, turns) or any(
                t.is_call and not any(r.call_id == t.call_id and r.is_result for r in turns)
                for t in turns[:index]
            )


@FAST
@given(script=scripts, keep=st.integers(2, 10), target=st.integers(0, 5000),
       room=st.integers(50, 20000), open_cycle=st.none() | st.integers(0, 12))
def test_the_chosen_block_is_old_whole_and_fits(script, keep, target, room, open_cycle):
    turns = build(script)
    block = select_block(turns, keep_recent=keep, target_tokens=target, max_tokens=room,
                         min_turns=1, max_turns=200,
                         open_cycles={open_cycle} if open_cycle is not None else ())
    if block is None:
        return
    size = len(block.turns)
    assert list(block.turns) == turns[:size]
    assert size <= len(turns) - keep
    assert not splits_a_pair(size, turns)
    assert sum(t.tokens for t in block.turns) <= room
    assert all(t.cycle_id != open_cycle for t in block.turns if open_cycle is not None)


def test_the_block_prefers_to_end_before_the_person_speaks():
    script = [("user", 10), ("assistant", 10)] * 10
    turns = build(script)
    block = select_block(turns, keep_recent=2, target_tokens=55, max_tokens=10**6,
                         min_turns=2, max_turns=100)
    assert block is not None
    assert turns[len(block.turns)].kind is TurnKind.USER


def test_an_unanswered_call_holds_everything_after_it():
    turns = build([("user", 5), ("assistant", 5), ("call", 5), ("user", 5), ("assistant", 5)] * 2)
    turns = [t for t in turns]  # the calls are never answered
    block = select_block(turns, keep_recent=1, target_tokens=10**6, max_tokens=10**6,
                         min_turns=1, max_turns=100)
    assert block is not None and block.last == 2
