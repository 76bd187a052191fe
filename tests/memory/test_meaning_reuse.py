"""What the meaning signal does once per search, or once for many.

The query is embedded while the words are searched, not after; the vectors
of a person's turns are read from the store once, and packed once for the
few people questions come back to."""

from __future__ import annotations

import threading
from array import array
from operator import mul

import pytest

from noema.memory import embeddings
from noema.memory.embeddings import EmbeddingError, Meaning, to_int8
from noema.memory.embeddings_worker import backfill
from noema.memory.search import HistorySearch

from .test_search_meant_stretches import Concepts, add


class QueryWatcher(Concepts):
    """Concepts, telling when a query (one text) starts being embedded."""

    def __init__(self) -> None:
        super().__init__()
        self.query_started = threading.Event()
        self.query_threads: list[str] = []

    def embed(self, texts):
        if len(texts) == 1:
            self.query_threads.append(threading.current_thread().name)
            self.query_started.set()
        return super().embed(texts)


def conversation(store) -> list[int]:
    texts = ["freezing cold weather today", "we took the kayak down the river",
             "the rent is due again", "cold and weather and jumpers", "money for the rent"]
    return [add(store, text, sender="Ana", minute=n).id for n, text in enumerate(texts)]


def test_the_query_is_embedded_while_the_words_are_searched(store):
    conversation(store)
    model = QueryWatcher()
    backfill(store, model)
    overlapped = threading.Event()

    class Watched(HistorySearch):
        def _gather(self, *args, **kwargs):
            # Waits for the query's embedding to start: it never does while the
            # words are searched if the model is asked only after them.
            if model.query_started.wait(10):
                overlapped.set()
            return super()._gather(*args, **kwargs)

    search = Watched(store, meaning=Meaning(store, model, weight=0.5))
    try:
        result = search.search("weather river")
    finally:
        search.meaning.close()
    assert overlapped.is_set(), "the query was embedded only after the words were searched"
    assert result.unmeant is None and result.hits
    assert model.query_threads and all(n.startswith("query-embedding") for n in model.query_threads)
    plain_meaning = Meaning(store, Concepts(), weight=0.5)
    plain = HistorySearch(store, meaning=plain_meaning).search("weather river")
    plain_meaning.close()
    assert [(h.turn.id, h.score) for h in result.hits] == [(h.turn.id, h.score) for h in plain.hits]


def test_a_failing_model_is_said_by_the_search_that_expected_it(store):
    conversation(store)
    backfill(store, Concepts())
    meaning = Meaning(store, Concepts(fail="the endpoint answered 503"))
    result = HistorySearch(store, meaning=meaning).search("weather river")
    assert result.unmeant == "the endpoint answered 503"
    assert result.hits  # ranked by words


def test_a_model_not_ready_is_not_asked_ahead(store):
    conversation(store)
    backfill(store, Concepts())

    class Starting(QueryWatcher):
        def ready(self) -> bool:
            return False

    model = Starting()
    result = HistorySearch(store, meaning=Meaning(store, model)).search("weather river")
    assert "starting" in (result.unmeant or "")
    assert model.query_threads == []


def test_closing_ends_the_thread_that_embeds_queries(store):
    conversation(store)
    backfill(store, Concepts())
    meaning = Meaning(store, QueryWatcher())
    before = set(threading.enumerate())
    HistorySearch(store, meaning=meaning).search("weather river")
    made = [t for t in set(threading.enumerate()) - before if t.name.startswith("query-embedding")]
    assert made
    meaning.close()
    for thread in made:
        thread.join(10)
        assert not thread.is_alive()


class CountedReads:
    """The table's `get`, counting the turn IDs asked for."""

    def __init__(self, meaning: Meaning) -> None:
        self.asked: list[int] = []
        real = meaning.table.get

        def get(turn_ids):
            ids = list(turn_ids)
            self.asked += ids
            return real(ids)

        meaning.table.get = get  # type: ignore[method-assign]


def test_a_persons_turns_are_read_once_and_a_turn_given_a_vector_since_is_seen(store):
    ids = conversation(store)
    model = Concepts()
    backfill(store, model)
    late = add(store, "freezing freezing weather", sender="Ana", minute=50).id  # no vector yet
    meaning = Meaning(store, model)
    reads = CountedReads(meaning)
    people = [*ids, late]
    first = meaning.closest("weather", people, 2)
    assert sorted(reads.asked) == sorted(people) and late not in first
    reads.asked.clear()
    assert meaning.closest("rent", people, 2) == meaning.closest("rent", people, 2)
    assert reads.asked == [late, late]  # only the turn that had no vector is asked again
    backfill(store, model)
    assert meaning.closest("weather", people, 1) == [late]


def test_questions_about_two_people_in_turn_pack_each_ones_turns_once(store, monkeypatch):
    ids = conversation(store)
    others = [add(store, f"{text} again", sender="Ben", minute=20 + n).id
              for n, text in enumerate(["cold weather", "a paddle in the river", "rent money"])]
    model = Concepts()
    backfill(store, model)
    packed: list[int] = []

    class Counted(embeddings.PackedVectors):
        def __init__(self, vectors) -> None:
            packed.append(len(vectors))
            super().__init__(vectors)

    monkeypatch.setattr(embeddings, "PackedVectors", Counted)
    meaning = Meaning(store, model)
    stored = meaning.table.get([*ids, *others])
    for query in ["weather", "river", "rent", "jumpers"]:
        for people in (ids, others):
            want = array("b", to_int8(model.embed([query])[0])[1])
            dots = [sum(map(mul, stored[i][1], want)) for i in people]
            cosine = {i: dot * stored[i][0] for i, dot in zip(people, dots, strict=True)}
            assert meaning.closest(query, people, 3) == sorted(
                cosine, key=lambda i: (-cosine[i], -i))[:3]
    assert packed == [len(ids), len(others)]
    # Past what is kept in all, the set asked for least recently is packed again.
    monkeypatch.setattr(embeddings, "PACKED_KEPT", len(ids) + 1)
    packed.clear()
    meaning = Meaning(store, model)
    for people in (ids, others, ids):
        meaning.closest("weather", people, 1)
    assert packed == [len(ids), len(others), len(ids)]


def test_a_query_vector_failing_in_its_thread_fails_the_rerank_as_before(store):
    conversation(store)
    backfill(store, Concepts())
    meaning = Meaning(store, Concepts(fail="no model"))
    meaning.expect("weather")
    with pytest.raises(EmbeddingError, match="no model"):
        meaning._query_vector("weather")
