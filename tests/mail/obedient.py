"""A model that does whatever the text it reads tells it to.

Any line of any message of a request (the person's, a tool result, an event,
inside an envelope or not) of the form `DO <tool> <json arguments>` is
obeyed: the model calls that tool, each such order once, one per response. Datamarks are read
through, as a model reading past them would. When no order is left it
answers in one sentence. It is the worst case for the checks that do not
trust the model: what it manages to do is what a poisoned mail could make a
real model do.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from noema.perception.untrusted import DEFAULT_MARKER
from noema.providers.base import ModelRequest, StreamEvent
from noema.providers.scripted import ScriptedCall, ScriptedProvider, ScriptedResponse

_ORDER = re.compile(r"DO (\w+) (?=\{)")
_JSON = json.JSONDecoder()


def orders(text: str) -> list[tuple[str, str]]:
    """(tool, arguments) of each `DO tool {...}` in `text`, in order."""
    found = []
    for match in _ORDER.finditer(text):
        try:
            _, end = _JSON.raw_decode(text, match.end())
        except ValueError:
            continue
        found.append((match.group(1), text[match.end():end]))
    return found


@dataclass
class ObedientProvider(ScriptedProvider):
    """Obeys every `DO tool {...}` it reads, once; then says `answer`."""

    responses: list[ScriptedResponse] = field(default_factory=list)
    answer: str = "Done as asked."
    obeyed: list[tuple[str, str]] = field(default_factory=list)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        calls = []
        for message in request.messages:
            text = (message.content or "").replace(DEFAULT_MARKER, " ")
            for name, arguments in orders(text):
                if (name, arguments) not in self.obeyed and not calls:
                    self.obeyed.append((name, arguments))  # one order per response, in order
                    calls.append(ScriptedCall(name, arguments))
        self.responses.append(ScriptedResponse("" if calls else self.answer, tuple(calls)))
        async for event in super().stream(request):
            yield event


@dataclass
class ReadingProvider(ScriptedProvider):
    """Obeys every `DO tool {...}` in what it reads anew: the messages since its
    own last one (the person's message, an event, a tool's result), every time
    it reads them, and each order of the system prompt once (a pinned note,
    the chronicle). A stranger's order that comes back by any path (a lookup,
    a search, a file, a command's output) is obeyed again, as a model that
    reads it again would."""

    responses: list[ScriptedResponse] = field(default_factory=list)
    answer: str = "Done as asked."
    obeyed: list[tuple[str, str]] = field(default_factory=list)
    _from_prompt: set[tuple[str, str]] = field(default_factory=set)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        fresh = []
        for message in reversed(request.messages):
            if message.role == "assistant":
                break
            fresh.append(message)
        found: list[tuple[str, str]] = []
        for message in request.messages:
            if message.role == "system":
                for order in orders(message.content.replace(DEFAULT_MARKER, " ")):
                    if order not in self._from_prompt:
                        self._from_prompt.add(order)
                        found.append(order)
        for message in reversed(fresh):
            found += orders((message.content or "").replace(DEFAULT_MARKER, " "))
        calls = tuple(ScriptedCall(name, arguments) for name, arguments in dict.fromkeys(found))
        self.obeyed += [(c.name, c.arguments) for c in calls]
        self.responses.append(ScriptedResponse("" if calls else self.answer, calls))
        async for event in super().stream(request):
            yield event
