"""Two real model families (SmolLM2, ChatML; Gemma 3, a template of its own) on
llama.cpp's server: a reply, a save point asked as structured data, and the
person's request going first on a server that serves one at a time.

Few, short requests: each server starts once per session (`llama_server`,
`gemma_server`). The models are tiny, so the assertions are on what the
server guarantees (the schema holds its answer: only allowed IDs can be
cited) and on what Noema does, not on the quality of the prose.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from noema.memory.chronicler import ChronicleRequest, Chronicler
from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind
from noema.memory.validator import citable, citations, validate
from noema.providers.base import Message, MessageRole, ModelRequest, TextDelta
from noema.providers.catalog import build_provider
from noema.providers.settings import ModelSettings
from noema.providers.traffic import Metered, Preempted, Traffic

pytestmark = pytest.mark.slow

FAMILIES = ["llama_server", "gemma_server"]
LINES = [("Can you help me plan the vegetable garden?", "Yes: start with tomatoes and beans."),
         ("The soil is clay. Is that a problem?", "Clay holds water; add compost to loosen it."),
         ("I also want herbs near the kitchen.", "Basil and parsley grow well in pots there."),
         ("When should I plant the tomatoes?", "After the last frost, in mid May.")]


def provider_for(server, **fields):
    settings = ModelSettings(provider="llamacpp", model=server.model, base_url=server.base_url,
                             context_window=server.context_window, temperature=0, max_retries=1,
                             timeout_s=300, **fields)
    return build_provider(settings, {})


def block(tmp_path: Path):
    store = TurnStore(tmp_path / "turns.db")
    session = Session.load(store)
    for asked, answered in LINES:
        session.append(NewTurn(TurnKind.USER, asked))
        session.append(NewTurn(TurnKind.ASSISTANT, answered))
    turns = tuple(session.turns)
    return store, ChronicleRequest(None, turns, citable(None, turns, lambda ids: ids),
                                   min_journey_words=20)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("family", FAMILIES)
async def test_a_reply_streams_in_each_familys_template(family, request):
    server = request.getfixturevalue(family)
    provider = provider_for(server)
    try:
        asked = ModelRequest((Message(MessageRole.USER, "Name one vegetable."),), max_tokens=16)
        words = [e.text async for e in provider.stream(asked) if isinstance(e, TextDelta)]
    finally:
        await provider.aclose()
    assert "".join(words).strip()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("family", FAMILIES)
async def test_a_save_point_asked_as_structured_data_cites_only_allowed_turns(
        family, request, tmp_path):
    server = request.getfixturevalue(family)
    provider = provider_for(server)
    store, chronicle = block(tmp_path)
    try:
        chronicler = Chronicler(provider, structured=True)
        text = await chronicler.write(chronicle, max_tokens=320)
    finally:
        await provider.aclose()
        store.close()
    assert chronicler.last_structured
    print(f"\n{family}: {text}")
    # What the schema guarantees whatever the model: the two sections, and
    # citations only among the allowed IDs (an enum the server decodes under).
    assert text.startswith("## State\n") and "\n## The Journey\n" in text
    cited = {i for c in citations(text) for i in c.ids}
    assert cited <= set(chronicle.citable.all)
    verdict = validate(text, allowed=chronicle.citable, block=chronicle.block,
                       min_journey_words=20)
    assert "invented_id" not in {f.code for f in verdict.failures}


@pytest.mark.timeout(600)
async def test_on_one_server_the_persons_request_goes_first(llama_server):
    traffic = Traffic(quiet_s=0.2)
    person = Metered(provider_for(llama_server), traffic=traffic)
    background = Metered(provider_for(llama_server), traffic=traffic, background=True)
    story = ModelRequest((Message(MessageRole.USER, "Tell me a long story about a dragon."),),
                         max_tokens=400)
    started = asyncio.Event()

    async def chronicle() -> str:
        pieces = []
        async for event in background.stream(story):
            if isinstance(event, TextDelta):
                pieces.append(event.text)
                started.set()
        return "".join(pieces)

    task = asyncio.ensure_future(chronicle())
    try:
        await asyncio.wait_for(started.wait(), 300)
        reply = [e.text async for e in person.stream(ModelRequest(
            (Message(MessageRole.USER, "Say hello."),), max_tokens=12))
            if isinstance(e, TextDelta)]
        assert "".join(reply).strip()  # answered while the story was under way
        with pytest.raises(Preempted):
            await task
        assert traffic.preemptions == 1
        assert person.speed.write is not None  # the reply taught the server's speed
    finally:
        task.cancel()
        await person.inner.aclose()
        await background.inner.aclose()

