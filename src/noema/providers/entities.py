"""Answers from a server that HTML-escapes what its model reads, put back.

llama.cpp's Python server renders the chat for its tool-calling format
(`chatml-function-calling`, the one that shows the model its tools) through
a Jinja template with autoescaping on: every `&`, `<`, `>`, `"` and `'` of
the system prompt, the person's words, the files read and the tools'
results reaches the model as `&amp;`, `&lt;`, `&gt;`, `&#34;` and `&#39;`.
The model answers in the same escaped text: it writes `&#34;` where it
means a quote, in its words and in the arguments of its calls (a file it
writes would hold entities where its code needs quotes).

The server's escaping is a function from real text to what the model
reads; `unescape` is its inverse, applied to what the model writes, so
that the model's world and ours meet again. Only the five characters that
escaping changes are put back (and the other spellings of the same five):
an entity escaping never makes, `&copy;` say, is left as the model wrote it.
A call's arguments are JSON, where an entity can only stand inside a
string: a quote there comes back as `\\"`, so the JSON stays JSON.

`EntityStream` does the same to an answer that arrives in pieces, holding
back the end of a piece that could be the start of an entity.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Mapping

from .base import Finish, StreamEvent, TextDelta, ToolCallDelta, Usage

# What Jinja's autoescape (MarkupSafe) writes for each character it escapes.
ESCAPED = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;"}

# Each entity a model in escaped text may write for those five, and what it means.
IN_TEXT: Mapping[str, str] = {
    "&amp;": "&", "&lt;": "<", "&gt;": ">",
    "&#34;": '"', "&quot;": '"', "&#x22;": '"',
    "&#39;": "'", "&apos;": "'", "&#x27;": "'",
}
# The same inside a JSON string, written so that the JSON stays valid.
IN_JSON: Mapping[str, str] = {**IN_TEXT, "&#34;": '\\"', "&quot;": '\\"', "&#x22;": '\\"'}

_LONGEST = max(map(len, IN_TEXT))
_ENTITY = re.compile("|".join(map(re.escape, IN_TEXT)))  # the same entities in both tables


def escape(text: str) -> str:
    """`text` as such a server's template hands it to the model."""
    return "".join(ESCAPED.get(char, char) for char in text)


def unescape(text: str, table: Mapping[str, str] = IN_TEXT) -> str:
    """What the model meant by `text` it wrote in escaped form. One pass,
    left to right: `&amp;#34;` is the text `&#34;`, as escaping made it."""
    return _ENTITY.sub(lambda match: table[match[0]], text)


class EntityStream:
    """`unescape` over a text that comes in pieces (an entity may be split
    between two of them)."""

    def __init__(self, table: Mapping[str, str] = IN_TEXT) -> None:
        self._table = table
        self._held = ""

    def feed(self, piece: str) -> str:
        """What can be given of the text so far; an unfinished entity waits."""
        text = self._held + piece
        start = text.rfind("&", max(0, len(text) - _LONGEST + 1))
        tail = text[start:] if start != -1 else ""
        if tail and any(entity.startswith(tail) and entity != tail for entity in self._table):
            text, self._held = text[:start], tail
        else:
            self._held = ""
        return unescape(text, self._table)

    def flush(self) -> str:
        """The end of the text: what was held back was not an entity."""
        held, self._held = self._held, ""
        return held


async def unescaped(events: AsyncGenerator[StreamEvent, None], *, json_text: bool = False,
                    ) -> AsyncGenerator[StreamEvent, None]:
    """`events` of an answer written in escaped text, as the model meant them;
    with `json_text` its text is a JSON document (an answer held to a schema),
    whose strings must stay valid when a quote comes back."""
    text = EntityStream(IN_JSON if json_text else IN_TEXT)
    calls: dict[int, EntityStream] = {}

    def rest() -> list[StreamEvent]:
        held: list[StreamEvent] = []
        if said := text.flush():
            held.append(TextDelta(said))
        for index, stream in calls.items():
            if left := stream.flush():
                held.append(ToolCallDelta(index=index, id=None, name=None, arguments=left))
        return held

    try:
        async for event in events:
            if isinstance(event, TextDelta):
                if said := text.feed(event.text):
                    yield TextDelta(said)
            elif isinstance(event, ToolCallDelta):
                stream = calls.setdefault(event.index, EntityStream(IN_JSON))
                yield ToolCallDelta(index=event.index, id=event.id, name=event.name,
                                    arguments=stream.feed(event.arguments))
            else:
                if isinstance(event, (Usage, Finish)):
                    for held in rest():
                        yield held
                yield event
        for held in rest():
            yield held
    finally:
        await events.aclose()
