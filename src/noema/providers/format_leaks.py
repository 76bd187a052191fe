"""Tool calls a model wrote as words: the text of a tool-call format that the
server did not turn into a call, recognised and made a call again.

A server's chat format tells the model how to write a call; when the server
then fails to read it back (llama.cpp's Python server with
`chatml-function-calling` returns `functions.enable_tools:` as the answer's
text whenever its grammar forced a name after the model chose to speak), the
format's own words would reach the person as the answer. They never do: an
answer that is, from some point on, a call in one of the formats below is
turned into that call, and one that starts like a call but cannot be read as
one is a `FormatLeak`, a clear error, never shown as an answer.

Known formats (the markers that start them):

- `functions.NAME:` at the start of a line, then optionally the arguments as
  a JSON object (chatml-function-calling), several in a row;
- `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Hermes, Qwen);
- `[TOOL_CALLS] [{"name": …, "arguments": {…}}]` (Mistral);
- `<|python_tag|>{"name": …, "parameters": {…}}` (Llama 3).

Text before the marker streams as it comes; from a possible marker on, the
text is held until it is clearly not one or the answer ends.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

from .base import Finish, ProtocolViolation, StreamEvent, TextDelta, ToolCallDelta

__all__ = ["LeakedCall", "FormatLeak", "read_leak", "leak_start", "calls_from_leaks"]

_NAME = r"[A-Za-z_][A-Za-z0-9_.-]{0,63}"
_CHATML_CALL = re.compile(rf"functions\.({_NAME}):[ \t]*\n?")
_LINE_MARKER = "functions."  # only at the start of a line
_MARKERS = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>")


@dataclass(frozen=True, slots=True)
class LeakedCall:
    """A call read from the words: its name and its arguments as JSON text
    (None when the format wrote the name alone)."""

    name: str
    arguments: str | None


class FormatLeak(ProtocolViolation):
    """The model answered in the words of a tool-call format that could not
    be read as a call; those words are not an answer."""


_CHATML_PREFIX = re.compile(r"f(u(n(c(t(i(o(n(s(\.[A-Za-z0-9_.-]*)?)?)?)?)?)?)?)?)?")


def leak_start(text: str, *, at_line_start: bool = True) -> tuple[int, bool] | None:
    """Where a marker begins in `text` and whether it is whole (True) or may
    still become one as more text comes (False); None when none can.
    `at_line_start`: whether `text` begins a line."""
    found: list[tuple[int, bool]] = []
    for marker in _MARKERS:
        at = text.find(marker)
        if at >= 0:
            found.append((at, True))
        for size in range(min(len(marker) - 1, len(text)), 0, -1):
            if text.endswith(marker[:size]):
                found.append((len(text) - size, False))
                break
    for match in re.finditer(r"(?m)^[ \t]*", text):
        if match.start() == 0 and not at_line_start:
            continue
        rest = text[match.end():]
        if _CHATML_CALL.match(rest):
            found.append((match.start(), True))
            break
        if rest and _CHATML_PREFIX.fullmatch(rest):
            found.append((match.start(), False))
            break
    return min(found, key=lambda f: (f[0], not f[1])) if found else None


def read_leak(text: str) -> list[LeakedCall] | None:
    """The calls written in `text` (a leak from its first non-blank
    character), or None when it is not written in a known format. Raises
    FormatLeak when it starts like one but cannot be read."""
    body = text.strip()
    if body.startswith(_LINE_MARKER):
        return _chatml(body)
    for marker, read in (("<tool_call>", _hermes), ("[TOOL_CALLS]", _mistral),
                         ("<|python_tag|>", _llama)):
        if body.startswith(marker):
            return read(body[len(marker):])
    return None


def _chatml(body: str) -> list[LeakedCall]:
    calls: list[LeakedCall] = []
    at = 0
    decoder = json.JSONDecoder()
    while at < len(body):
        match = _CHATML_CALL.match(body, at)
        if match is None:
            raise FormatLeak(_cannot_read(body))
        at = match.end()
        rest = body[at:].lstrip()
        arguments = None
        if rest.startswith("{"):
            try:
                value, used = decoder.raw_decode(rest)
            except ValueError:
                raise FormatLeak(_cannot_read(body)) from None
            if not isinstance(value, dict):
                raise FormatLeak(_cannot_read(body))
            arguments = json.dumps(value)
            at = len(body) - len(rest) + used
        calls.append(LeakedCall(match.group(1), arguments))
        at = len(body) - len(body[at:].lstrip())
    return calls


def _object_call(value: object, body: str, arguments_key: str) -> LeakedCall:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) \
            or not re.fullmatch(_NAME, value["name"]):
        raise FormatLeak(_cannot_read(body))
    arguments = value.get(arguments_key, value.get("arguments", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            raise FormatLeak(_cannot_read(body)) from None
    if not isinstance(arguments, dict):
        raise FormatLeak(_cannot_read(body))
    return LeakedCall(value["name"], json.dumps(arguments))


def _hermes(rest: str) -> list[LeakedCall]:
    calls = []
    for chunk in ("<tool_call>" + rest).split("<tool_call>")[1:]:
        inner, _, after = chunk.partition("</tool_call>")
        if after.strip():
            raise FormatLeak(_cannot_read("<tool_call>" + rest))
        calls.append(_object_call(_json(inner, rest), rest, "arguments"))
    return calls


def _mistral(rest: str) -> list[LeakedCall]:
    value = _json(rest, rest)
    items = value if isinstance(value, list) else [value]
    return [_object_call(item, rest, "arguments") for item in items]


def _llama(rest: str) -> list[LeakedCall]:
    return [_object_call(_json(rest.removesuffix("<|eom_id|>"), rest), rest, "parameters")]


def _json(text: str, whole: str) -> object:
    try:
        return json.loads(text.strip())
    except ValueError:
        raise FormatLeak(_cannot_read(whole)) from None


def _cannot_read(body: str) -> str:
    shown = " ".join(body.split())
    shown = shown if len(shown) <= 80 else shown[:79] + "…"
    return (f"the model answered with a tool call written as text ({shown!r}) that could not "
            "be read as a call; it was not taken as an answer")


async def calls_from_leaks(
    events: AsyncGenerator[StreamEvent, None],
    arguments_for: Callable[[str], Awaitable[str | None]] | None = None,
) -> AsyncGenerator[StreamEvent, None]:
    """`events` with a call written as text turned into real call events.

    Text streams on until a marker may begin; from a whole marker on, it is
    held to the end of the answer. Held text in a known format becomes
    `ToolCallDelta`s (after any calls the server itself made) and the answer
    finishes as `tool_calls`; a call written with its name alone gets its
    arguments from `arguments_for(name)` (a server that can be asked for a
    named call), else `{}`. Text that turns out to begin no marker is let
    through as it was.
    """
    pending = ""  # text not passed on yet: a marker may begin at its start
    committed = False  # a whole marker began: everything from it waits for the end
    at_line_start = True  # whether `pending` begins a line
    calls = 0
    finish: Finish | None = None
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                pending += event.text
                if committed:
                    continue
                start = leak_start(pending, at_line_start=at_line_start)
                cut = len(pending) if start is None else start[0]
                if cut:
                    yield TextDelta(pending[:cut])
                    at_line_start = pending[:cut].endswith("\n")
                    pending = pending[cut:]
                committed = start is not None and start[1]
                continue
            if isinstance(event, ToolCallDelta):
                calls = max(calls, event.index + 1)
            if isinstance(event, Finish):
                finish = event
                continue
            yield event
    finally:
        await events.aclose()
    if pending and committed:
        leaked = read_leak(pending)
        if leaked is None:  # a whole marker begins it: not possible
            raise FormatLeak(_cannot_read(pending))
        for index, call in enumerate(leaked, start=calls):
            arguments = call.arguments
            if arguments is None and arguments_for is not None:
                arguments = await arguments_for(call.name)
            yield ToolCallDelta(index=index, name=call.name, arguments=arguments or "{}")
        finish = Finish("tool_calls")
    elif pending:
        yield TextDelta(pending)
    if finish is not None:
        yield finish
