"""Class 6 (tool arguments): numbers a model can send that no tool can use.

Python's JSON reader takes `NaN`, `Infinity` and `1e999`; pydantic turns the
string "nan" into a float. The registry refuses non-finite numbers for every
tool, naming the argument, and each tool refuses integers outside its range.
"""

from __future__ import annotations

import json

import pytest

from noema.providers.base import ToolCall
from noema.tools.registry import ToolContext, ToolRegistry, tool

from ..world import World

NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", '"nan"', '"inf"', '"-Infinity"']


async def _raw_call(world: World, name: str, arguments: str):
    """A call with the arguments exactly as a model's JSON text."""
    hands = world.hands or world.build()
    registry = ToolRegistry(hands.tools)
    ctx = ToolContext("raw-1", 900, 1)
    return await registry.call(ToolCall(ctx.call_id, name, arguments), ctx)


@pytest.mark.parametrize("literal", NON_FINITE)
async def test_a_shell_timeout_that_is_not_a_number(world: World, literal: str):
    command = json.dumps("touch ran.txt")
    arguments = f'{{"command": {command}, "timeout": {literal}}}'
    result = await _raw_call(world, "shell_execute", arguments)
    assert result.is_error and "timeout" in result.content, result.content
    assert "finite number" in result.content
    assert not (world.ws / "ran.txt").exists()  # refused before anything ran


@pytest.mark.parametrize("literal", NON_FINITE[:5])
@pytest.mark.parametrize("argument", ["offset", "limit"])
async def test_a_read_page_that_is_not_a_number(world: World, argument: str, literal: str):
    arguments = f'{{"path": "notes.txt", "{argument}": {literal}}}'
    result = await _raw_call(world, "file_read", arguments)
    assert result.is_error and argument in result.content and "finite" in result.content


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "1e999"])
async def test_a_history_limit_that_is_not_a_number(world: World, literal: str):
    result = await _raw_call(world, "file_history", f'{{"path": "notes.txt", "limit": {literal}}}')
    assert result.is_error and "limit" in result.content and "finite" in result.content


@pytest.mark.parametrize(
    "tool_name, arguments, words",
    [
        ("file_read", {"path": "notes.txt", "offset": 0}, "offset is a line number"),
        ("file_read", {"path": "notes.txt", "offset": -5}, "not -5"),
        ("file_read", {"path": "notes.txt", "limit": 0}, "limit must be at least 1"),
        ("file_read", {"path": "notes.txt", "limit": -1}, "not -1"),
        ("file_history", {"path": "notes.txt", "limit": 0}, "limit must be at least 1"),
        ("file_history", {"path": "notes.txt", "limit": -20}, "not -20"),
    ],
)
async def test_integers_below_the_range(world: World, tool_name: str, arguments: dict, words: str):
    result = await world.call(tool_name, **arguments)
    assert result.is_error and words in result.content, result.content


@pytest.mark.parametrize(
    "tool_name, argument",
    [("file_read", "offset"), ("file_read", "limit"), ("file_history", "limit")],
)
async def test_integers_beyond_64_bits(world: World, tool_name: str, argument: str):
    result = await _raw_call(world, tool_name, f'{{"path": "notes.txt", "{argument}": {10**30}}}')
    assert result.is_error and argument in result.content and "far too large" in result.content


@pytest.mark.parametrize("tool_name", ["file_read", "shell_execute"])
async def test_an_integer_of_thousands_of_digits(world: World, tool_name: str):
    digits = "9" * 5000
    result = await _raw_call(world, tool_name, f'{{"path": "notes.txt", "offset": {digits}}}')
    assert result.is_error and "too large to read" in result.content
    assert digits not in result.content


async def test_a_large_but_sane_value_is_accepted(world: World):
    far = await world.call("file_read", path="notes.txt", offset=1, limit=10**9)
    assert not far.is_error and "lines 1-2 of 2" in far.content
    past = await world.call("file_read", path="notes.txt", offset=10**12)
    assert past.is_error and "past its end" in past.content
    listed = await world.call("file_history", path="notes.txt", limit=10**9)
    assert not listed.is_error, listed.content


@tool(side_effects=False)
def measure(ctx: ToolContext, values: list[float], scale: dict[str, float] | None = None) -> str:
    """Add numbers.

    Args:
        values: The numbers.
        scale: Factors by name.
    """
    return str(sum(values))


@pytest.mark.parametrize(
    "arguments, named",
    [
        ('{"values": [1, NaN]}', "values"),
        ('{"values": [1], "scale": {"x": Infinity}}', "scale"),
        ('{"values": [1e999]}', "values"),
    ],
)
async def test_non_finite_numbers_nested_in_any_tool(arguments: str, named: str):
    registry = ToolRegistry([measure])
    result = await registry.call(ToolCall("c", "measure", arguments), ToolContext("c", 1, 1))
    assert result.is_error and f"{named} must be a finite number" in result.content


async def test_finite_numbers_pass():
    registry = ToolRegistry([measure])
    result = await registry.call(
        ToolCall("c", "measure", '{"values": [1.5, -2, 1e300], "scale": {"x": 0.5}}'),
        ToolContext("c", 1, 1),
    )
    assert not result.is_error and result.content == str(1.5 - 2 + 1e300)


async def test_arguments_nested_beyond_reason(world: World):
    deep = "[" * 100_000 + "]" * 100_000
    result = await _raw_call(world, "file_read", f'{{"path": {deep}}}')
    assert result.is_error and "nesting too large" in result.content
