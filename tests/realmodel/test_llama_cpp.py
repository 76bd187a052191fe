"""Noema against a model server nobody here wrote: llama.cpp's
(llama-cpp-python) with SmolLM2-135M-Instruct, started once per session, and
with Gemma 3 270M beside it (another family, another chat template), so that
what works is not one model's template.

The model is tiny and the server has its own ways (it cannot stream a tool
call, it answers nothing when its model picks words over a call, it
answers a body it cannot read with a 500), so the assertions are on what
really happened: what the server sent, what the agent stored and ran. The
model runs at temperature 0, and each chat starts a fresh agent, so its
choices repeat from run to run. One file, so that the test processes
start one server of each model between them.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path

import httpx2
import pexpect
import pytest

from noema.memory import savepoints
from noema.memory.chronicler import ChronicleRequest, Chronicler
from noema.memory.compaction import TOO_SLOW, Compactor
from noema.memory.session import Session
from noema.memory.settings import MemorySettings
from noema.memory.store import TurnStore
from noema.memory.tokens import estimate_tokens
from noema.memory.turns import Flag, NewTurn, TurnKind
from noema.memory.validator import citable, citations, validate
from noema.providers.base import (
    BadRequest,
    Message,
    MessageRole,
    ModelRequest,
    TextDelta,
    ToolCall,
)
from noema.providers.catalog import build_provider
from noema.providers.discovery import ServerProbe
from noema.providers.failures import failure_from_response
from noema.providers.settings import ModelSettings
from noema.providers.traffic import Metered, Preempted, Traffic
from tests.foundation.test_cli import NOEMA, env_for
from tests.realmodel.server import LlamaServer

pytestmark = pytest.mark.slow

ANSWER_TIMEOUT_S = 240  # one message: several prompt evaluations on a busy machine


def config(server: LlamaServer, workspace: Path, *, max_output_tokens: int = 160,
           max_steps: int = 2) -> str:
    return (
        "[models.reasoning]\nprovider = 'llamacpp'\n"
        f"model = '{server.model}'\nbase_url = '{server.base_url}'\n"
        f"context_window = {server.context_window}\ntemperature = 0\n"
        f"max_output_tokens = {max_output_tokens}\nmax_retries = 1\ntimeout_s = 300\n"
        f"[cycle]\nmax_steps = {max_steps}\n"
        f"[[files.roots]]\npath = '{workspace}'\n"
    )


def start_chat(home: Path, text: str) -> pexpect.spawn:
    agent = home / "agents" / "default"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "config.toml").write_text(text)
    chat = pexpect.spawn(NOEMA[0], [*NOEMA[1:], "chat"], env={**env_for(home), "TERM": "dumb"},
                         encoding="utf-8", timeout=ANSWER_TIMEOUT_S)
    chat.logfile_read = (home / "chat.log").open("a")  # what the person saw, for a failure
    return chat


def stored(home: Path):
    store = TurnStore(home / "agents" / "default" / "turns.db")
    try:
        return store.range(1, store.last_id() or 0)
    finally:
        store.close()


def provider_for(server: LlamaServer, **fields):
    fields.setdefault("context_window", server.context_window)
    settings = ModelSettings(provider="llamacpp", model=server.model, base_url=server.base_url,
                             temperature=0, max_retries=1, **fields)
    return build_provider(settings, {})


def leave(chat: pexpect.spawn, home: Path) -> str:
    """Quit the chat; everything it showed."""
    chat.sendline("/quit")
    chat.expect(pexpect.EOF)
    chat.logfile_read.close()
    return (home / "chat.log").read_text(errors="replace")


@pytest.mark.timeout(600)
def test_a_conversation_through_noema_chat_and_stop_cutting_its_stream(
    llama_server: LlamaServer, tmp_path: Path,
) -> None:
    chat = start_chat(tmp_path, config(llama_server, tmp_path / "ws", max_output_tokens=1500))
    try:
        chat.expect("model llamacpp/smollm2-135m-instruct")
        chat.expect("you> ")
        chat.sendline("Hello! How are you today?")
        chat.expect(r"noema> (\S[^\r\n]*)")
        said = chat.match.group(1)
        chat.expect("you> ")
        # After that greeting this model tells the story in words, not calls.
        chat.sendline("Tell me a long story about a dragon.")
        chat.expect(r"noema> \S+ \S+ \S+")  # the answer is streaming
        chat.sendline("/stop")
        chat.expect(r"\(stopped\)")
        chat.expect("you> ")
        shown = leave(chat, tmp_path)
    finally:
        chat.close(force=True)
    assert "Traceback" not in shown and not re.search(r"^! ", shown, re.M)  # no error line
    answers = [t for t in stored(tmp_path) if t.kind is TurnKind.ASSISTANT]
    # The server answers a request that offers tools with nothing when its
    # model picks words; asked again without them, it gives these words.
    assert answers and answers[0].content.strip() and said.strip() in answers[0].content
    assert not answers[0].has(Flag.INTERRUPTED)
    # The story was cut: whatever of it is kept is marked so, far short of
    # the 1,500 tokens it was allowed, and the server saw the hang-up.
    story = answers[1:]
    assert all(t.has(Flag.INTERRUPTED) or t.has(Flag.DISCARDED) for t in story)
    assert sum(len(t.content.split()) for t in story) < 800
    # Printed by the server when it notices the client gone mid-answer.
    assert re.search(r"^disconnected$", llama_server.log.read_text(errors="replace"), re.M)


@pytest.mark.timeout(600)
def test_a_real_tool_call_runs_as_a_versioned_write(llama_server: LlamaServer, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    # One model call: that server ignores max_tokens while it writes a call's
    # arguments, and a second call of this model can run on for minutes.
    chat = start_chat(tmp_path, config(llama_server, workspace, max_steps=1))
    try:
        chat.expect("you> ")
        # Firm words: asked more loosely, this model picks another tool.
        chat.sendline("Use file_write to write hello to notes.txt.")
        chat.expect(r"file_write\(")
        chat.expect("you> ")
        shown = leave(chat, tmp_path)
    finally:
        chat.close(force=True)
    assert "Traceback" not in shown and not re.search(r"^! ", shown, re.M)
    turns = stored(tmp_path)
    calls = [t for t in turns if t.kind is TurnKind.TOOL_CALL and t.tool_name == "file_write"]
    assert calls, "the model made no file_write call"
    arguments = json.loads(calls[0].arguments)  # what the model sent, run as sent
    [result] = [t for t in turns if t.kind is TurnKind.TOOL_RESULT and t.call_id == calls[0].call_id]
    assert not result.has(Flag.ERROR), result.content
    written = (workspace / arguments["path"]).read_text()
    assert written == arguments["content"]
    history = subprocess.run([*NOEMA, "history"], capture_output=True, text=True,
                             env=env_for(tmp_path), timeout=60)
    assert history.returncode == 0 and arguments["path"] in history.stdout


@pytest.mark.timeout(600)
async def test_compaction_with_the_real_model_as_chronicler(llama_server: LlamaServer,
                                                            tmp_path: Path) -> None:
    store = TurnStore(tmp_path / "turns.db")
    provider = provider_for(llama_server)
    try:
        session = Session.load(store)
        topics = ("the vegetable garden", "a trip to Lisbon", "the leaking kitchen tap",
                  "a present for Marta", "the guitar lessons", "the tax return")
        for topic in topics:
            session.append(NewTurn(TurnKind.USER, f"Can you help me with {topic}?"))
            session.append(NewTurn(TurnKind.ASSISTANT,
                                   f"Yes. For {topic}, let us start with what matters most."))
        block_ids = set(session.ids())
        settings = MemorySettings(retries=2, min_journey_words=20, keep_recent_turns=2)
        compactor = Compactor(session, Chronicler(provider, max_output_tokens=300), settings,
                              context_window=llama_server.context_window)
        outcome = await compactor.compact()
    finally:
        await provider.aclose()

    assert outcome.status in ("accepted", "rejected"), outcome
    record = savepoints.get(store, outcome.save_point.id)
    attempts = record.report.attempts
    # Every attempt is recorded with the validator's verdict on the real text.
    assert 1 <= len(attempts) <= settings.retries + 1
    # Each attempt wrote something, or ran out of the time one may take.
    assert all((a.chars > 0 or a.failures[0][0] == TOO_SLOW) and a.chronicler_s > 0
               for a in attempts)
    assert all(a.failures for a in attempts[:-1])  # only a refusal asks again
    invented = [a for a in attempts if any(code == "invented_id" for code, _ in a.failures)]
    if outcome.status == "accepted":
        assert not attempts[-1].failures
        assert set(record.report.cited) <= block_ids  # no invented citation was accepted
        assert session.save_point_id == record.id
    else:
        assert session.save_point_id is None and set(session.ids()) == block_ids
        assert len(attempts) == settings.retries + 1
    assert not (outcome.status == "accepted" and attempts[-1] in invented)
    store.close()


async def test_token_counts_come_from_the_servers_tokenizer(llama_server: LlamaServer) -> None:
    provider = provider_for(llama_server)
    try:
        texts = ["hello world", "The quick brown fox jumps over the lazy dog. " * 20, ""]
        counts = await provider.count_tokens(texts)
    finally:
        await provider.aclose()
    async with httpx2.AsyncClient() as client:
        answer = await client.post(f"{llama_server.root}/extras/tokenize",
                                   json={"input": texts[1], "model": llama_server.model})
    assert counts is not None and counts[2] == 0
    assert counts[1] == len(answer.json()["tokens"])
    assert 0 < counts[0] < counts[1]
    print(f"estimate {estimate_tokens(texts[1])} against {counts[1]} counted")


async def test_the_model_reads_escaped_text_and_its_answers_come_back_real(
    llama_server: LlamaServer,
) -> None:
    # Its chat format for tools renders every message through an escaping
    # template: the model reads `&#34;` for a quote and writes it back.
    line = 'Repeat this line exactly: say "hi" <b>bold</b> & more'
    async with httpx2.AsyncClient(timeout=120) as client:
        raw = await client.post(f"{llama_server.base_url}/chat/completions", json={
            "model": llama_server.model, "messages": [{"role": "user", "content": line}],
            "max_tokens": 40, "temperature": 0})
    written = raw.json()["choices"][0]["message"]["content"]
    provider = provider_for(llama_server)
    try:
        assert await provider.reads_escaped()
        request = ModelRequest(messages=(Message(MessageRole.USER, line),), max_tokens=40)
        events = [event async for event in provider.stream(request)]
    finally:
        await provider.aclose()
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    print(f"\nthe model wrote {written!r}; shown as {text!r}")
    assert "&#34;" in written  # what the model read, copied
    assert not any(entity in text for entity in ("&#34;", "&lt;", "&gt;", "&amp;", "&#39;"))


async def test_the_window_the_server_serves(llama_server: LlamaServer) -> None:
    async with ServerProbe("llamacpp", llama_server.base_url) as probe:
        assert llama_server.model in await probe.models()
        # llama.cpp's Python server has no /props and no window in its
        # model list: discovery says it does not know, rather than guess.
        assert await probe.window(llama_server.model) is None
    # What it does say: its refusal of a request past its window names it.
    provider = provider_for(llama_server, context_window=32_768)
    request = ModelRequest(messages=(Message(MessageRole.USER, "word " * 9000),), max_tokens=16)
    try:
        with pytest.raises(BadRequest) as refused:
            async for _ in provider.stream(request):
                pass
    finally:
        await provider.aclose()
    assert refused.value.server_window == llama_server.context_window
    assert "\n" not in str(refused.value)
    assert f"set the model's context_window to {llama_server.context_window}" in str(refused.value)


async def test_a_stored_null_content_is_sent_as_text(llama_server: LlamaServer) -> None:
    # A tool-call turn with null content made this server answer 500 for
    # every later message of the conversation. The raw body shows it; the
    # provider sends the same history as an empty string and is answered.
    call = {"id": "c1", "type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}
    history = [
        {"role": "system", "content": "You are brief."},
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
        {"role": "user", "content": "Thanks. Say ok."},
    ]
    async with httpx2.AsyncClient(timeout=120) as client:
        refused = await client.post(f"{llama_server.base_url}/chat/completions",
                                    json={"model": llama_server.model, "messages": history,
                                          "max_tokens": 8})
    assert refused.status_code == 500
    failure = failure_from_response(refused.status_code, refused.headers, refused.json(), "")
    assert not failure.retryable  # the same body would be refused again
    assert "\n" not in failure.detail and len(failure.detail) <= 240
    assert "Input should be a valid string" in failure.detail

    provider = provider_for(llama_server)
    messages = (
        Message(MessageRole.SYSTEM, "You are brief."),
        Message(MessageRole.USER, "What time is it?"),
        Message(MessageRole.ASSISTANT, None, tool_calls=(  # type: ignore[arg-type]
            ToolCall("c1", "get_current_time", "{}"),)),
        Message(MessageRole.TOOL, "12:00", tool_call_id="c1", tool_name="get_current_time"),
        Message(MessageRole.USER, "Thanks. Say ok."),
    )
    try:
        words = [e.text async for e in provider.stream(ModelRequest(messages, max_tokens=8))
                 if isinstance(e, TextDelta)]
    finally:
        await provider.aclose()
    assert "".join(words).strip()


async def test_an_answer_streaming_is_not_cut_by_a_request_that_arrives_meanwhile(
    llama_server: LlamaServer,
) -> None:
    # Started as the guide says (`--interrupt_requests false`, which
    # `scripts/llama_server serve` passes): a count asked while an answer
    # streams waits for it, instead of ending it early without a finish.
    body = {"model": llama_server.model, "max_tokens": 40, "temperature": 0, "stream": True,
            "messages": [{"role": "user", "content": "Tell me a long story about the sea."}]}
    finishes: list[str | None] = []
    async with httpx2.AsyncClient(timeout=300) as client:
        async with client.stream("POST", f"{llama_server.base_url}/chat/completions",
                                 json=body) as answer:
            counting = None
            async for line in answer.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                if counting is None:  # the answer has begun: another request arrives
                    counting = asyncio.create_task(client.post(
                        f"{llama_server.root}/extras/tokenize/count",
                        json={"input": "a count meanwhile", "model": llama_server.model}))
                    await asyncio.sleep(0.5)  # it is waiting for the server's lock now
                choice = json.loads(line[len("data: "):])["choices"][0]
                finishes.append(choice.get("finish_reason"))
        assert counting is not None
        assert (await counting).status_code == 200
    assert finishes[-1] in ("length", "stop"), finishes  # the answer reached its own end


# -- two families: a reply, a structured save point, the person first ------------

FAMILIES = ["llama_server", "gemma_server"]
LINES = [("Can you help me plan the vegetable garden?", "Yes: start with tomatoes and beans."),
         ("The soil is clay. Is that a problem?", "Clay holds water; add compost to loosen it."),
         ("I also want herbs near the kitchen.", "Basil and parsley grow well in pots there."),
         ("When should I plant the tomatoes?", "After the last frost, in mid May.")]


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
        text = await chronicler.write(chronicle, max_tokens=240)
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

