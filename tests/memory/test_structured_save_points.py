"""Save points asked for as structured data where the server can hold its answer
to a schema, rendered into the Markdown the validator reads, and free text
where it cannot (remembered per endpoint)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from hypothesis import given
from hypothesis import strategies as st

from noema.memory.chronicler import Chronicler
from noema.memory.compaction import Compactor
from noema.memory.structured import render, save_point_schema
from noema.memory.validator import citations
from noema.providers.base import (
    BadRequest,
    Finish,
    Message,
    MessageRole,
    ModelRequest,
    SchemaStyle,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from noema.providers.catalog import build_provider
from noema.providers.endpoint import Endpoint
from noema.providers.settings import ModelSettings

from .conftest import chat
from .test_slow_chronicler import SETTINGS, cited_ids, retold

HEADINGS = ("State", "The Journey")
WORDS = st.text("abcdefghij ,;'", min_size=1, max_size=60).filter(lambda t: t.strip(" ,;'"))


@given(st.lists(st.tuples(WORDS, st.integers(1, 10**6), st.sampled_from(["", ".", "?", "!"])),
                min_size=1, max_size=12))
def test_each_sentence_keeps_its_citation_inline_and_in_order(items):
    raw = json.dumps({"state": "Things stand.", "journey": [
        {"sentence": words + stop, "cite": cite} for words, cite, stop in items]})
    text = render(raw, HEADINGS)
    assert text is not None and text.startswith("## State\nThings stand.\n\n## The Journey\n")
    found = [ids for ids in (c.ids for c in citations(text))]
    assert [ids[0] for ids in found] == [cite for _, cite, _ in items]
    for line in text.split("## The Journey\n")[1].splitlines():
        if line:
            assert not line.startswith("{cite") and line.rstrip()[-1] in ".?!"


def test_a_model_that_copies_markers_into_its_sentence_is_not_cited_twice():
    raw = json.dumps({"state": "s", "journey": [{"sentence": "It rained {cite:3}.", "cite": 4}]})
    assert render(raw, HEADINGS).endswith("It rained {cite:4}.\n")
    assert render("## State\nprose", HEADINGS) is None
    assert render('{"state": "only"}', HEADINGS) is None


def test_the_schema_allows_exactly_the_citable_ids():
    schema = save_point_schema({7, 3, 12}).schema
    cite = schema["properties"]["journey"]["items"]["properties"]["cite"]
    assert cite == {"type": "integer", "enum": [3, 7, 12]}
    assert schema["required"] == ["state", "journey"]
    assert schema["properties"]["journey"]["minItems"] == 1


class Constrained:
    """A server that can hold its answer to a schema: given one, it answers with
    the object (as text, or as a tool's input); `refuses` it answers 400."""

    name = "test"
    model = "constrained"
    context_window = 16_000

    def __init__(self, style: SchemaStyle, *, refuses: bool = False, base: str = "a") -> None:
        self.schema_style = style
        self.refuses = refuses
        self.endpoint = Endpoint("llamacpp", "llama.cpp server", f"http://{base}.test/v1", "m")
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        ids = cited_ids(request)
        if request.answer_schema is not None:
            if self.refuses:
                raise BadRequest("response_format is not supported")
            allowed = request.answer_schema.schema["properties"]["journey"]["items"][
                "properties"]["cite"]["enum"]
            assert set(ids) <= set(allowed)
            answer = json.dumps({"state": "The person and the agent talked.", "journey": [
                {"sentence": f"At step {i} the person and the agent spoke with care about the "
                             "garden and the soil", "cite": i} for i in ids]})
            if self.schema_style is SchemaStyle.TOOL:
                yield ToolCallDelta(0, "t1", "save_point", answer)
            else:
                yield TextDelta(answer)
        else:
            yield TextDelta(retold(request))
        yield Finish("stop")


async def test_a_server_that_holds_a_schema_gets_one_and_its_object_is_accepted(session):
    chat(session, 12)
    for style in (SchemaStyle.JSON_OBJECT, SchemaStyle.TOOL):
        model = Constrained(style, base=style.value)
        compactor = Compactor(session, Chronicler(model), SETTINGS, context_window=100_000)
        outcome = await compactor.compact()
        assert outcome.status == "accepted", outcome
        assert model.requests[0].answer_schema is not None
        assert "Give the save point as one JSON object" in model.requests[0].messages[1].content
        assert outcome.save_point.report.attempts[0].structured
        assert "{cite:" in outcome.save_point.text and "## The Journey" in outcome.save_point.text
        chat(session, 12)


async def test_a_server_that_refuses_the_schema_gets_free_text_and_it_is_remembered(session):
    chat(session, 12)
    model = Constrained(SchemaStyle.JSON_OBJECT, refuses=True, base="refusing")
    compactor = Compactor(session, Chronicler(model), SETTINGS, context_window=100_000)
    outcome = await compactor.compact()
    assert outcome.status == "accepted"
    assert [r.answer_schema is not None for r in model.requests] == [True, False]
    assert not outcome.save_point.report.attempts[0].structured
    chat(session, 12)
    again = Compactor(session, Chronicler(model), SETTINGS, context_window=100_000)
    assert (await again.compact()).status == "accepted"
    assert model.requests[-1].answer_schema is None  # not asked again at that endpoint


def test_the_wire_forms_of_a_schema():
    schema = save_point_schema({1, 2})
    request = ModelRequest((Message(MessageRole.USER, "hi"),), max_tokens=10, answer_schema=schema)
    llama = build_provider(ModelSettings(provider="llamacpp", model="m",
                                         base_url="http://127.0.0.1:9/v1"), {})
    assert llama.payload(request)["response_format"] == {"type": "json_object",
                                                         "schema": schema.schema}
    openai = build_provider(ModelSettings(provider="openai", model="m"), {"OPENAI_API_KEY": "k"})
    assert openai.payload(request)["response_format"]["json_schema"]["schema"] == schema.schema
    plain = build_provider(ModelSettings(provider="deepseek", model="m"),
                           {"DEEPSEEK_API_KEY": "k"})
    assert "response_format" not in plain.payload(request)
    claude = build_provider(ModelSettings(provider="anthropic", model="m"),
                            {"ANTHROPIC_API_KEY": "k"})
    body = claude.payload(request)
    assert body["tool_choice"] == {"type": "tool", "name": "save_point"}
    assert body["tools"][-1]["input_schema"] == schema.schema


def test_a_raw_line_break_inside_a_sentence_is_read_as_a_space():
    # Gemma 3 270M, decoding under the server's grammar, wrote one.
    raw = '{"state": "Garden\nplans", "journey": [{"sentence": "The person\n   asked about ' \
          'clay soil", "cite": 2}, {"sentence": "Then they pl'
    text = render(raw, HEADINGS)
    assert text is not None and "## State\nGarden plans\n" in text
    assert "The person asked about clay soil {cite:2}." in text


def test_an_object_cut_short_keeps_its_complete_sentences():
    whole = json.dumps({"state": "Rain.", "journey": [
        {"sentence": "It rained on Monday", "cite": 3},
        {"sentence": "The person bought an umbrella", "cite": 5},
        {"sentence": "Then the sun came out and everyone went", "cite": 7}]})
    cut = whole[: whole.index("went") - 4]
    text = render(cut, HEADINGS)
    assert text is not None and text.endswith("umbrella {cite:5}.\n")
    assert "{cite:7}" not in text


def test_the_answer_length_bounds_the_sentences_the_schema_allows():
    small = save_point_schema({1, 2}, 300).schema
    assert small["properties"]["journey"]["maxItems"] == (300 - 300 // 4 - 16) // 72
    assert small["properties"]["state"]["maxLength"] == 300
    assert "maxItems" not in save_point_schema({1, 2}).schema["properties"]["journey"]
    # A Journey that must reach 40 words gets enough sentences, as far as the answer allows.
    assert save_point_schema({1}, 1_000, min_words=40).schema["properties"]["journey"][
        "minItems"] == 4
    assert save_point_schema({1}, 300, min_words=40).schema["properties"]["journey"][
        "minItems"] == small["properties"]["journey"]["maxItems"]
