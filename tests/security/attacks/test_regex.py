"""Class 8: a regular expression must not freeze the agent.

A catastrophic pattern ends with a clear error while the event loop keeps
running; a cancelled search returns at once; ordinary patterns, in the
Python syntax the tool promises, still work.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from noema.tools.errors import ToolError
from noema.tools.timed_regex import Budget, SearchStopped, compile_query

from ..world import World

BOUND = 20  # seconds: generous; a frozen search would never end at all

# (pattern, a line that makes a backtracking engine explode on it)
CATASTROPHIC = [
    (r"(a|aa)+$", "a" * 5000 + "!"),
    (r"(x+x+)+y", "x" * 5000),
    (r"(.*?,){30}X", "a," * 400),
    (r"^(a|aa)+$", "a" * 3000 + "b"),
]


async def _grep_with_ticker(world: World, query: str) -> tuple[object, int]:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        result = await asyncio.wait_for(world.call("file_grep", query=query), BOUND)
    finally:
        task.cancel()
    return result, ticks


@pytest.mark.parametrize("query, line", CATASTROPHIC)
async def test_a_catastrophic_pattern_ends_with_advice_and_the_loop_runs(
    world: World, query: str, line: str
):
    (world.ws / "logs").mkdir()
    (world.ws / "logs" / "evil.txt").write_text("fine\n" + line + "\n")
    result, ticks = await _grep_with_ticker(world, query)
    assert result.is_error, result.content
    assert "took longer than" in result.content and "simplify it" in result.content
    assert "logs/evil.txt:2" in result.content
    assert ticks > 5  # the loop kept turning while the pattern ran (with `re`: none)


async def test_cancelling_a_catastrophic_grep_returns_promptly(world: World):
    (world.ws / "evil.txt").write_text("a" * 5000 + "!\n")
    task = asyncio.create_task(world.call("file_grep", query=r"(a|aa)+$"))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)


async def test_many_files_do_not_add_up_past_the_call_budget(world: World):
    for n in range(3):
        (world.ws / f"evil{n}.txt").write_text("a" * 3000 + "!\n")
    result = await asyncio.wait_for(world.call("file_grep", query=r"(a|aa)+$"), BOUND)
    assert result.is_error and "evil0.txt:1" in result.content


def test_a_set_stop_event_ends_the_search():
    stop = threading.Event()
    budget = Budget(stop)
    pattern = compile_query("x").exact
    assert budget.search(pattern, "xx", lambda: "f:1")
    stop.set()
    with pytest.raises(SearchStopped):
        budget.search(pattern, "xx", lambda: "f:2")


def test_the_whole_call_budget_is_reported_as_such():
    now = [0.0]
    budget = Budget(threading.Event(), seconds=5, clock=lambda: now[0])
    pattern = compile_query("x").exact
    assert not budget.search(pattern, "y", lambda: "a.txt:1")
    now[0] = 6.0
    with pytest.raises(ToolError, match=r"longer than 5 s in all and was stopped at b.txt:9"):
        budget.search(pattern, "x", lambda: "b.txt:9")


@pytest.mark.parametrize(
    "query, expected",
    [
        (r"(\w)\1", "book"),  # backreference
        (r"foo(?=bar)", "foobar"),  # lookahead
        (r"(?<=\$)\d+", "costs $42"),  # lookbehind
        (r"(?P<word>ab)(?P=word)", "abab"),  # named group
        (r"(?i)HELLO", "hello there"),  # inline flag
        (r"\bcat\b", "a cat sat"),  # word boundaries
        (r"^\s+return", "    return x"),  # anchors and classes
        (r"caf\w", "café au lait"),  # unicode word characters
        (r"a.*?b", "a then b"),  # lazy repetition
        (r"colou?r|grey", "a grey day"),  # alternation
        (r"x{2,3}", "xxx"),  # counted repetition
        (r"[^\x00-\x7f]", "naïve"),  # escapes in a class
    ],
)
async def test_ordinary_python_patterns_still_work(world: World, query: str, expected: str):
    (world.ws / "text.md").write_text("nothing here\n" + expected + "\n")
    result = await world.call("file_grep", query=query, file_pattern="*.md")
    assert not result.is_error, result.content
    assert result.content == f"text.md:2: {expected}"


@pytest.mark.parametrize("query", ["hello(", "[a-", "a{2,1}", "(?P<x>", "*a", "trailing\\"])
async def test_an_invalid_pattern_is_a_clear_error(world: World, query: str):
    result = await world.call("file_grep", query=query)
    assert result.is_error and "not a valid regular expression" in result.content


async def test_a_catastrophic_pattern_only_in_a_file_pattern_scope_is_not_run(world: World):
    (world.ws / "evil.txt").write_text("a" * 5000 + "!\n")
    (world.ws / "ok.md").write_text("aaa\n")
    result = await world.call("file_grep", query=r"(a|aa)+$", file_pattern="*.md")
    assert not result.is_error and result.content == "ok.md:1: aaa"


@pytest.mark.parametrize("pattern", ["[z-a].txt", "notes/[b-a]*"])
async def test_an_impossible_glob_is_a_clear_error(world: World, pattern: str):
    result = await world.call("file_find", pattern=pattern)
    assert result.is_error and "not a valid glob" in result.content
    assert "failed unexpectedly" not in result.content


async def test_a_glob_with_many_stars_still_finds(world: World):
    (world.ws / "deep" / "er").mkdir(parents=True)
    (world.ws / "deep" / "er" / ("a" * 200 + ".md")).write_text("x\n")
    result = await asyncio.wait_for(
        world.call("file_find", pattern="**/" + "*a" * 30 + "*.md"), BOUND
    )
    assert not result.is_error and result.content.endswith("a.md")
