"""What a model behind an escaping chat template writes, put back as it meant it."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from noema.providers.base import Finish, TextDelta, ToolCallDelta, Usage
from noema.providers.entities import IN_JSON, EntityStream, escape, unescape, unescaped

# Text rich in the characters escaping changes, and in the look of entities.
marked = st.text(alphabet=st.sampled_from(list("&<>\"';#x34aqumpltg \n")) | st.characters(),
                 max_size=80)


def pieces(text: str, cuts: list[int]) -> list[str]:
    at = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *at], [*at, len(text)], strict=True)]


@given(marked)
def test_unescape_undoes_the_templates_escaping(text):
    assert unescape(escape(text)) == text


@given(marked, st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_an_answer_in_pieces_comes_back_whole_however_it_is_cut(text, cuts):
    stream = EntityStream()
    given_back = "".join(stream.feed(piece) for piece in pieces(escape(text), cuts))
    assert given_back + stream.flush() == text


@given(marked, st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_arguments_stay_json_and_mean_what_the_model_meant(text, cuts):
    # The model's JSON is real (the server's grammar writes it); the strings
    # inside hold what it read, escaped.
    written = json.dumps({"content": escape(text)})
    stream = EntityStream(IN_JSON)
    given_back = "".join(stream.feed(piece) for piece in pieces(written, cuts)) + stream.flush()
    assert json.loads(given_back) == {"content": text}


def test_what_escaping_never_writes_is_left_as_the_model_wrote_it():
    assert unescape("&copy; &nbsp; &#60; & ; &am") == "&copy; &nbsp; &#60; & ; &am"
    assert unescape("&amp;#34;") == "&#34;"  # the text "&#34;", escaped once


async def test_events_keep_their_order_and_the_held_end_comes_before_the_finish():
    async def answer():
        for event in (TextDelta("She said &#3"), TextDelta("4;hi&#34; &am"),
                      ToolCallDelta(index=0, id="c1", name="file_write",
                                    arguments='{"content": "a &lt;b&'),
                      ToolCallDelta(index=0, arguments='gt; &#34;c&#34;"}'),
                      Usage(5, 7), Finish("tool_calls")):
            yield event

    events = [e async for e in unescaped(answer())]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    arguments = "".join(e.arguments for e in events if isinstance(e, ToolCallDelta))
    assert text == 'She said "hi" &am'
    assert json.loads(arguments) == {"content": 'a <b> "c"'}
    assert [type(e) for e in events][-2:] == [Usage, Finish]
    assert next(e for e in events if isinstance(e, ToolCallDelta)).name == "file_write"


async def test_an_answer_held_to_a_schema_stays_json_when_its_quotes_come_back():
    # A structured answer is JSON in the text: its strings hold what the
    # model read escaped, and a quote must come back escaped for JSON.
    written = json.dumps({"state": escape('She said "ok" & left'), "journey": []})

    async def answer():
        yield TextDelta(written[:20])
        yield TextDelta(written[20:])
        yield Finish("stop")

    text = "".join([e.text async for e in unescaped(answer(), json_text=True)
                    if isinstance(e, TextDelta)])
    assert json.loads(text) == {"state": 'She said "ok" & left', "journey": []}
    plain = "".join([e.text async for e in unescaped(answer()) if isinstance(e, TextDelta)])
    try:
        json.loads(plain)
    except ValueError:
        pass  # as plain text, the quotes come back bare: the JSON breaks
    else:
        raise AssertionError("unescaped as text, the JSON should have broken")
