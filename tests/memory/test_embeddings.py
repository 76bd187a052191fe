"""Meaning as a second signal: int8 vectors in the store, the rerank, the background writer,
both sources (the local model in a child process, an OpenAI-compatible endpoint)."""

from __future__ import annotations

import json
import math
import shutil
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from noema.memory.embeddings import (
    EmbeddingError,
    EmbeddingTable,
    Meaning,
    to_int8,
    unit,
)
from noema.memory.embeddings_local import ChildEmbedder, OnnxEmbedder, model_folder
from noema.memory.embeddings_remote import RemoteEmbedder
from noema.memory.embeddings_worker import EmbeddingWorker, backfill, open_meaning
from noema.memory.recall_tools import memory_tools
from noema.memory.search import HistorySearch
from noema.memory.settings import MemorySettings
from noema.memory.turns import NewTurn, TurnKind
from noema.providers.base import ToolCall
from noema.tools.registry import ToolContext, ToolRegistry


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


class Axes:
    """A made-up model: a text's vector counts its words from a small
    vocabulary, so that what is 'close in meaning' is known exactly."""

    name = "axes"
    words = ("dog", "cat", "music", "money")

    def __init__(self, gate: threading.Event | None = None, fail: str | None = None) -> None:
        self.gate = gate
        self.fail = fail
        self.calls = 0  # answers given (a call held at the gate is not one yet)
        self.entered = threading.Event()  # a call has reached the gate

    def embed(self, texts):
        self.entered.set()
        if self.gate is not None:
            self.gate.wait()  # no time-out: only the test opens it
        if self.fail:
            raise EmbeddingError(self.fail)
        self.calls += 1
        return [unit([t.lower().count(w) + 0.01 for w in self.words]) for t in texts]

    def close(self) -> None:
        pass


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(min_value=-1, max_value=1), min_size=2, max_size=64))
def test_int8_vectors_keep_their_cosine(values):
    assume(math.sqrt(sum(x * x for x in values)) > 1e-6)  # a model's vectors are never nearly zero
    vector = unit(values)
    scale, packed = to_int8(vector)
    back = [b * scale for b in memoryview(packed).cast("b")]
    assert dot(back, vector) == pytest.approx(1.0, abs=0.01)
    assert len(packed) == len(vector)  # one byte a dimension


def test_stored_vectors_come_back_by_turn_and_model(store):
    ids = [store.append(NewTurn(TurnKind.USER, f"turn {n}")).id for n in range(3)]
    table = EmbeddingTable(store, "axes")
    table.put(ids[:2], [unit([1, 0, 0, 0]), unit([0, 1, 0, 0])])
    got = table.get(ids)
    assert set(got) == set(ids[:2]) and table.newest() == ids[1]
    assert EmbeddingTable(store, "another model").get(ids) == {}  # models never mix
    scale, values = got[ids[0]]
    assert values[0] * scale == pytest.approx(1.0, abs=0.01)


def _conversation(store):
    lines = ["I walked the dog in the park", "money money money, the rent is due",
             "my cat sleeps all day", "we played music until late",
             "the dog chased the cat", "time to pay the money I owe"]
    return [store.append(NewTurn(TurnKind.USER, line)).id for line in lines]


def test_the_rerank_weighs_normalised_keyword_and_meaning_scores(store):
    ids = _conversation(store)
    model = Axes()
    backfill(store, model)
    meaning = Meaning(store, model, weight=0.7)
    # By keywords the money turn leads a little; by meaning the query is all dog.
    candidates = [(ids[1], 10.0), (ids[0], 9.5), (ids[3], 1.0)]
    reranked = meaning.rerank("a dog", candidates)
    assert reranked.note is None
    order = [i for i, _ in reranked.order]
    assert order[0] == ids[0]
    score = dict(reranked.order)
    assert score[ids[0]] == pytest.approx(0.7 * (9.5 - 1) / 9 + 0.3 * 1.0, abs=0.01)
    keyword_only = Meaning(store, model, weight=1.0).rerank("a dog", candidates)
    assert [i for i, _ in keyword_only.order] == [ids[1], ids[0], ids[3]]


def test_a_candidate_without_a_vector_keeps_its_keyword_share(store):
    ids = _conversation(store)
    model = Axes()
    EmbeddingTable(store, model.name).put([ids[0]], model.embed(["dog"]))
    reranked = Meaning(store, model).rerank("dog", [(ids[1], 10.0), (ids[0], 9.0)])
    assert dict(reranked.order)[ids[1]] == pytest.approx(0.7)
    assert dict(reranked.order)[ids[0]] == pytest.approx(0.7 * 0 + 0.3)


def test_without_vectors_or_a_model_the_keyword_order_stands_and_says_why(store):
    ids = _conversation(store)
    candidates = [(ids[1], 2.0), (ids[0], 1.0)]
    none = Meaning(store, Axes()).rerank("dog", candidates)
    assert none.order == candidates and "no turn" in none.note
    backfill(store, Axes())
    broken = Meaning(store, Axes(fail="the model server is down")).rerank("dog", candidates)
    assert broken.order == candidates and broken.note == "the model server is down"


async def test_the_tool_says_when_the_meaning_signal_was_not_available(store):
    _conversation(store)
    backfill(store, Axes())
    search = HistorySearch(store, meaning=Meaning(store, Axes(fail="the model server is down")))
    registry = ToolRegistry(memory_tools(store, search))
    call = ToolCall("c", "search_full_history", json.dumps({"query": "dog park"}))
    said = (await registry.call(call, ToolContext("c", 0, 1))).content
    assert "without the meaning signal: the model server is down" in said
    assert "matched: dog, park" in said or "matched: park, dog" in said
    working = HistorySearch(store, meaning=Meaning(store, Axes()))
    assert "meaning signal" not in (await ToolRegistry(memory_tools(store, working)).call(
        call, ToolContext("c", 0, 1))).content


def test_search_reranks_its_keyword_candidates_by_meaning(store):
    ids = _conversation(store)
    backfill(store, Axes())
    # "cat" and "money" each in two turns: by keywords, ties; meaning decides.
    plain = HistorySearch(store).search("cat money", limit=6)
    meant = HistorySearch(store, meaning=Meaning(store, Axes(), weight=0.5)).search("cat cat money", limit=6)
    assert meant.unmeant is None
    assert {h.turn.id for h in meant.hits[:2]} == {ids[2], ids[4]}  # the cat turns first
    assert len(plain.hits) >= 4


def test_appends_never_wait_for_the_model_and_the_worker_catches_up(store):
    gate = threading.Event()
    model = Axes(gate=gate)
    worker = EmbeddingWorker(store, model, poll_s=0.05, quiet_s=0.0)
    worker.start()
    try:
        ids = [store.append(NewTurn(TurnKind.USER, "the dog number 0")).id]
        assert model.entered.wait(30), "the worker never called the model"
        # The model is now held at its gate, which only this test opens: appends
        # that waited for it could not end while the gate is closed.
        appender = threading.Thread(target=lambda: ids.extend(
            store.append(NewTurn(TurnKind.USER, f"the dog number {n}")).id for n in range(1, 5)))
        appender.start()
        appender.join(60)
        assert not appender.is_alive(), "the appends waited for the blocked model"
        assert len(ids) == 5 and model.calls == 0 and not gate.is_set()
        assert EmbeddingTable(store, model.name).get(ids) == {}
        gate.set()
        deadline = time.monotonic() + 30
        while len(EmbeddingTable(store, model.name).get(ids)) < len(ids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(EmbeddingTable(store, model.name).get(ids)) == set(ids), \
            "the worker did not catch up within 30 s of the model being freed"
    finally:
        gate.set()
        worker.stop()


def test_backfill_embeds_an_old_store_once_and_reports_progress(store):
    ids = [store.append(NewTurn(TurnKind.USER, f"cat {n}")).id for n in range(300)]
    store.append(NewTurn(TurnKind.TOOL_CALL, tool_name="x", call_id="c", arguments="{}"))
    seen: list[tuple[int, int]] = []
    model = Axes()
    done, reached = backfill(store, model, batch=16, progress=lambda d, t: seen.append((d, t)))
    assert done == 300 and reached == store.last_id()  # the call has no words to embed
    assert seen[-1] == (store.last_id(), store.last_id()) and len(seen) > 1
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert backfill(store, model, after=0)[0] == 0  # nothing twice
    assert len(EmbeddingTable(store, model.name).get(ids)) == 300


# -- the local model ------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_model():
    return OnnxEmbedder()


def test_the_local_model_gives_unit_vectors_close_for_close_meanings(local_model):
    a, b, c = local_model.embed(["my dog loves the park", "the puppy enjoys playing outside",
                                 "the quarterly tax return is due"])
    assert len(a) == 384
    assert dot(a, a) == pytest.approx(1.0, abs=1e-3)
    assert dot(a, b) > dot(a, c) + 0.2


def test_a_model_file_that_is_not_the_shipped_one_is_refused(tmp_path):
    folder = tmp_path / "embeddings"
    shutil.copytree(model_folder(), folder)
    with open(folder / "tokenizer.json", "a", encoding="utf-8") as changed:
        changed.write(" ")
    with pytest.raises(EmbeddingError, match="not the file Noema shipped"):
        OnnxEmbedder(folder)


def test_the_child_model_answers_and_ends_when_idle(local_model):
    child = ChildEmbedder(idle_s=0.0)
    try:
        [vector] = child.embed(["my dog loves the park"])
        [direct] = local_model.embed(["my dog loves the park"])
        assert dot(vector, direct) == pytest.approx(1.0, abs=1e-3)
        assert child.running
        assert child.reap() is False and not child.running  # idle: gone, memory and all
        [again] = child.embed(["my dog loves the park"])  # started again on demand
        assert dot(again, direct) == pytest.approx(1.0, abs=1e-3)
    finally:
        child.close()
    assert not child.running


def test_a_search_does_not_wait_for_the_child_model_to_start(store):
    ids = _conversation(store)
    child = ChildEmbedder()
    try:
        backfill(store, child)  # vectors stored; the child now runs
        child.close()  # idle: ended
        meaning = Meaning(store, child)
        first = meaning.rerank("a dog", [(ids[1], 2.0), (ids[0], 1.0)])
        assert "starting" in first.note and first.order == [(ids[1], 2.0), (ids[0], 1.0)]
        deadline = time.monotonic() + 60
        while not child.ready() and time.monotonic() < deadline:
            time.sleep(0.05)
        later = meaning.rerank("a dog", [(ids[1], 2.0), (ids[0], 1.0)])
        assert later.note is None
    finally:
        child.close()


def test_open_meaning_builds_the_local_source_and_off_means_none(store):
    assert open_meaning(store, "off") is None
    meaning = open_meaning(store, "local", poll_s=60)
    try:
        assert isinstance(meaning.embedder, ChildEmbedder)
        assert not meaning.embedder.running  # nothing to do yet: no model loaded
    finally:
        meaning.close()
    with pytest.raises(ValueError, match="'somewhere'"):
        open_meaning(store, "somewhere")


def test_the_provider_source_needs_a_model_name_said_by_its_key():
    with pytest.raises(ValueError, match="memory.embedding_model"):
        MemorySettings(embeddings="provider")
    assert MemorySettings(embeddings="provider", embedding_model="nomic-embed-text").embedding_model


# -- an OpenAI-compatible endpoint ---------------------------------------------------------


class EmbeddingsServer:
    """/v1/embeddings on 127.0.0.1: vectors from the Axes model, or a chosen failure."""

    def __init__(self) -> None:
        self.status = 200
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the standard library's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body,
                                       "auth": self.headers.get("Authorization")})
                if outer.status != 200:
                    payload = b'{"error": "model not found"}'
                    self.send_response(outer.status)
                else:
                    vectors = [[2 * x for x in v] for v in Axes().embed(body["input"])]  # not unit
                    data = [{"index": n, "embedding": v} for n, v in enumerate(vectors)][::-1]
                    payload = json.dumps({"data": data}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    server = EmbeddingsServer()
    yield server
    server.close()


def test_the_endpoint_gives_unit_vectors_in_input_order(endpoint):
    remote = RemoteEmbedder(endpoint.base_url, "nomic-embed-text", "sk-test")
    try:
        dog, money = remote.embed(["dog dog", "money"])
    finally:
        remote.close()
    assert dot(dog, dog) == pytest.approx(1.0)
    assert dog[0] > 0.9 and money[3] > 0.9  # the answer's order was reversed: sorted by index
    sent = endpoint.requests[0]
    assert sent["path"] == "/v1/embeddings" and sent["auth"] == "Bearer sk-test"
    assert sent["body"] == {"model": "nomic-embed-text", "input": ["dog dog", "money"]}


def test_a_failing_endpoint_is_an_embedding_error_naming_it(endpoint):
    endpoint.status = 404
    remote = RemoteEmbedder(endpoint.base_url, "missing-model")
    try:
        with pytest.raises(EmbeddingError, match="answered 404: .*model not found"):
            remote.embed(["dog"])
    finally:
        remote.close()
    unreachable = RemoteEmbedder("http://127.0.0.1:9/v1", "m", timeout_s=2)
    try:
        with pytest.raises(EmbeddingError, match="cannot reach"):
            unreachable.embed(["dog"])
    finally:
        unreachable.close()


def test_the_provider_source_writes_vectors_in_the_background(store, endpoint):
    ids = _conversation(store)
    meaning = open_meaning(store, "provider", base_url=endpoint.base_url, model="axes",
                           poll_s=0.05, quiet_s=0.0)
    try:
        deadline = time.monotonic() + 30
        while len(meaning.table.get(ids)) < len(ids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(meaning.table.get(ids)) == set(ids)
        found = HistorySearch(store, meaning=meaning).search("dog park")
        assert found.unmeant is None and found.hits[0].turn.id == ids[0]
    finally:
        meaning.close()
    assert math.isfinite(meaning.table.get([ids[0]])[ids[0]][0])


def test_the_agents_process_never_loads_the_numerical_libraries(tmp_path):
    # The model and numpy live in the child: an agent that embeds and reranks
    # keeps the memory it had (bench/idle_agent.py measures the whole agent).
    script = f"""
import sys, time
from noema.app import build_app  # the composition root and all it imports
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, TurnKind
from noema.memory.embeddings_worker import open_meaning
from noema.memory.search import HistorySearch
store = TurnStore({str(tmp_path / 'turns.db')!r})
for text in ("my dog loves the park", "the tax return is due"):
    store.append(NewTurn(TurnKind.USER, text))
meaning = open_meaning(store, "local", poll_s=0.05, quiet_s=0.0)
deadline = time.monotonic() + 60
while meaning.table.count() < 2 and time.monotonic() < deadline:
    time.sleep(0.05)
found = HistorySearch(store, meaning=meaning).search("dog")
meaning.close()
print(meaning.table.count(), found.unmeant, sorted(m for m in ("numpy", "onnxruntime", "tokenizers") if m in sys.modules))
"""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "None", "[]"]


def test_an_existing_store_is_back_filled_from_the_command_line_with_progress(tmp_path):
    import subprocess
    import sys

    from noema.memory.store import TurnStore

    path = tmp_path / "turns.db"
    store = TurnStore(path)
    for n in range(150):
        store.append(NewTurn(TurnKind.USER, f"turn number {n} about the garden"))
    store.close()
    done = subprocess.run([sys.executable, "-m", "noema.memory.embeddings_worker", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "150/150" in done.stdout and "150 turns embedded; 150 have a vector" in done.stdout
    again = subprocess.run([sys.executable, "-m", "noema.memory.embeddings_worker", str(path)],
                           capture_output=True, text=True, timeout=300)
    assert "0 turns embedded; 150 have a vector" in again.stdout
