"""Meaning as a second signal: turn embeddings, stored int8, and the rerank.

A turn's embedding is a unit vector from a sentence-embedding model (the
local ONNX model by default, `embeddings_local.py`; or the provider's
OpenAI-compatible `/v1/embeddings`, `embeddings_remote.py`: one interface,
`Embedder`). It is written after the turn, in the background
(`embeddings_worker.py`), never on the append path, into the turn store's
file: table `turn_embeddings`, one row per turn and model, the vector as
int8 with one scale per vector (a quarter of float32's room; the cosine
moves by well under a hundredth).

The search (`search.py`) asks `Meaning.rerank` to reorder its own keyword
candidates: both signals are min-max normalised over the candidates, then
weighed `KEYWORD_WEIGHT` keyword to `1 - KEYWORD_WEIGHT` meaning. A
candidate with no embedding yet keeps its keyword share only. Whatever
stops the meaning signal (no model, a slow first load, a failing endpoint)
leaves the keyword ranking as it is, and the result says why.

Nothing here needs numpy: vectors travel as Python arrays, and scoring a
hundred int8 vectors of 384 dimensions in plain Python costs about a
millisecond, so the agent's process never loads a numerical library (the
local model runs in a child process that does). `Meaning.closest` ranks
the few hundred turns of a person's conversations by meaning alone, for
the search's places where words cannot choose; it scores them a dimension
at a time, packed into one integer (`dot_products`), two to three times
faster than one vector at a time.

A search asks for its query's vector as it starts (`Meaning.expect`): the
model, in its child process or at the provider, embeds it while the words
are searched, and the rerank finds it made. The vectors `closest` reads
are kept, and the sets it scores kept packed, for the next questions about
the same people: a turn's vector never changes. At a million turns this
took the meaning signal's share of a query from about 11 ms to 4.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from operator import mul
from typing import Protocol

from .store import TurnStore, own_text
from .turns import Turn, TurnKind

KEYWORD_WEIGHT = 0.7  # of the reranked score; the embedding's cosine has the rest
RERANK_DEPTH = 100  # keyword candidates reordered by meaning
EMBED_CHARS = 2_000  # of a turn's text, what the model reads (it keeps 256 tokens anyway)
PACKED_KEPT = 5_000  # vectors `closest` keeps packed between searches, in all (about 8 MB at 384 dimensions)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS turn_embeddings (
    turn_id INTEGER NOT NULL,
    model   TEXT    NOT NULL,
    scale   REAL    NOT NULL,
    vector  BLOB    NOT NULL,
    PRIMARY KEY (turn_id, model)
) WITHOUT ROWID;
"""

# Turns whose text says something in words; calls to tools are arguments.
EMBEDDED_KINDS = frozenset({TurnKind.USER, TurnKind.ASSISTANT, TurnKind.TOOL_RESULT,
                            TurnKind.EVENT, TurnKind.NOTE})


class EmbeddingError(Exception):
    """The embedding model could not give vectors (said to the model as such)."""


Vector = Sequence[float]


class Embedder(Protocol):
    """A sentence-embedding model: texts in, unit vectors out."""

    name: str  # recorded with each vector: vectors of two models never mix

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One unit vector per text."""
        ...

    def close(self) -> None: ...


def to_int8(vector: Vector) -> tuple[float, bytes]:
    """A vector as int8 with its own scale (value = int8 * scale)."""
    peak = max((abs(x) for x in vector), default=0.0)
    scale = peak / 127.0 if peak > 0 else 1.0
    return scale, array("b", [max(-127, min(127, round(x / scale))) for x in vector]).tobytes()


_OFFSET = bytes(b ^ 0x80 for b in range(256))  # an int8's byte -> its value + 128, unsigned
_LANE_LIMIT = (1 << 32) // (255 * 255)  # dimensions whose offset products fit a 32-bit lane


class PackedVectors:
    """Int8 vectors of one size, scored against a query all at once.

    A dot product in Python costs a multiplication per dimension; over the
    few hundred turns of a person's conversations that is tens of
    milliseconds. Here each dimension of all the vectors is packed into one
    integer, a 32-bit lane per vector, so that one multiplication by the
    query's value adds to every vector's sum at once (in C). Values are
    offset by 128 to be unsigned, so no lane borrows from the next; the
    offsets are taken off at the end. Packing costs about what one scoring
    does: kept packed, the same vectors score again several times faster.
    """

    def __init__(self, vectors: Sequence[array]) -> None:
        self.count = len(vectors)
        self.dims = len(vectors[0]) if vectors else 0
        if any(len(v) != self.dims for v in vectors) or self.dims > _LANE_LIMIT:
            raise ValueError("packed vectors must all have the same size, at most "
                             f"{_LANE_LIMIT} dimensions")
        joined = b"".join(vectors).translate(_OFFSET)
        lane = bytearray(4 * self.count)
        self._columns = []
        for at in range(self.dims):
            lane[0::4] = joined[at :: self.dims]
            self._columns.append(int.from_bytes(lane, "little"))
        self._sums = [sum(v) for v in vectors]

    def dot(self, query: array) -> list[int]:
        """The exact dot product of each vector with `query`, in their order."""
        if len(query) != self.dims:
            raise ValueError(f"a query of {len(query)} dimensions against vectors of {self.dims}")
        if not self.count:
            return []
        packed = sum(map(mul, map((128).__add__, query), self._columns))
        lanes = array("I")
        lanes.frombytes(packed.to_bytes(4 * self.count, "little"))
        if sys.byteorder == "big":
            lanes.byteswap()
        # sum((a + 128) * (q + 128)) = a.q + 128 * (sum(a) + sum(q)) + dims * 128 ** 2
        shift = 128 * sum(query) + self.dims * 128 * 128
        return [total - 128 * own - shift for total, own in zip(lanes, self._sums, strict=True)]


def dot_products(vectors: Sequence[array], query: array) -> list[int]:
    """The exact dot product of each int8 vector with `query`: packed
    (`PackedVectors`) when they all have its size, one at a time otherwise."""
    if vectors and all(len(v) == len(query) for v in vectors) and len(query) <= _LANE_LIMIT:
        return PackedVectors(vectors).dot(query)
    return [sum(map(mul, v, query)) for v in vectors]


def unit(vector: Vector) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else list(vector)


def embed_text(turn: Turn) -> str:
    """What the model reads of a turn: its own text with its sender, the start
    of a long one."""
    text = own_text(turn)
    if turn.sender:
        text = f"{turn.sender}: {text}"
    return text[:EMBED_CHARS]


class EmbeddingTable:
    """The stored vectors of one model, in the turn store's file."""

    def __init__(self, store: TurnStore, model: str) -> None:
        self.store = store
        self.model = model
        with store.transaction() as db:
            db.execute(_SCHEMA)

    def put(self, turn_ids: Sequence[int], vectors: Sequence[Vector]) -> None:
        rows = [(tid, self.model, *to_int8(v)) for tid, v in zip(turn_ids, vectors, strict=True)]
        with self.store.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO turn_embeddings (turn_id, model, scale, vector)"
                " VALUES (?, ?, ?, ?)", rows)

    def get(self, turn_ids: Iterable[int]) -> dict[int, tuple[float, array]]:
        """(scale, int8 values) of those of `turn_ids` that have a vector."""
        rows = self.store.conn.execute(
            "SELECT turn_id, scale, vector FROM turn_embeddings WHERE model = ?"
            " AND turn_id IN (SELECT value FROM json_each(?))",
            (self.model, json.dumps(list(turn_ids))),
        ).fetchall()
        return {int(tid): (float(scale), array("b", blob)) for tid, scale, blob in rows}

    def newest(self) -> int:
        """The highest turn ID with a vector of this model (0 for none)."""
        row = self.store.conn.execute(
            "SELECT max(turn_id) FROM turn_embeddings WHERE model = ?", (self.model,)).fetchone()
        return int(row[0] or 0)

    def count(self) -> int:
        return int(self.store.conn.execute(
            "SELECT count(*) FROM turn_embeddings WHERE model = ?", (self.model,)).fetchone()[0])

    def missing(self, after: int, limit: int) -> list[Turn]:
        """Up to `limit` turns after ID `after` that should have a vector and
        have none, oldest first."""
        turns = self.store.range(after + 1, after + limit)
        have = self.get(t.id for t in turns)
        return [t for t in turns if t.kind in EMBEDDED_KINDS and t.id not in have
                and embed_text(t).strip()]


@dataclass(frozen=True, slots=True)
class Reranked:
    """Candidates in their new order, and what the meaning signal did."""

    order: list[tuple[int, float]]  # (turn ID, combined score), best first
    note: str | None  # why the meaning signal was not used, when it was not


class Meaning:
    """The meaning signal of a search: the query's embedding against the
    stored ones of its keyword candidates."""

    def __init__(self, store: TurnStore, embedder: Embedder, *, weight: float = KEYWORD_WEIGHT,
                 depth: int = RERANK_DEPTH, worker: object | None = None) -> None:
        self.embedder = embedder
        self.worker = worker  # the background writer, stopped with this
        self.table = EmbeddingTable(store, embedder.name)
        self.weight = weight
        self.depth = depth
        self._lock = threading.Lock()
        self._asked: tuple[str, array, float] | None = None  # the last query's vector and scale
        self._expected: tuple[str, Future[tuple[array, float]]] | None = None  # being embedded
        self._embedding: ThreadPoolExecutor | None = None  # made at the first `expect`
        # The sets of turns `closest` scored last, packed; the most recent last.
        self._packed: OrderedDict[tuple[int, ...], PackedVectors] = OrderedDict()
        self._read: dict[int, tuple[float, array]] = {}  # vectors `closest` read (they never change)

    def expect(self, query: str) -> None:
        """Start embedding `query` in a thread of its own: the model (a child
        process, or the provider) works while the search reads its keyword
        candidates, and the rerank then finds the vector made. Nothing when
        the model is not ready: the rerank says so and ranks by words."""
        ready = getattr(self.embedder, "ready", None)
        if ready is not None and not ready():
            return
        with self._lock:
            if self._asked is not None and self._asked[0] == query:
                return
            if self._expected is not None and self._expected[0] == query:
                return
            if self._embedding is None:
                self._embedding = ThreadPoolExecutor(1, thread_name_prefix="query-embedding")
            self._expected = (query, self._embedding.submit(self._embedded, query))

    def _embedded(self, query: str) -> tuple[array, float]:
        scale, packed = to_int8(self.embedder.embed([query])[0])
        return array("b", packed), scale

    def _query_vector(self, query: str) -> tuple[array, float]:
        """The query's int8 vector and scale, embedded once for the calls of one
        search (the rerank and `closest` ask for the same query)."""
        with self._lock:
            if self._asked is None or self._asked[0] != query:
                expected, self._expected = self._expected, None
                if expected is not None and expected[0] == query:
                    vector, scale = expected[1].result()  # its EmbeddingError, if any, is raised here
                else:
                    vector, scale = self._embedded(query)
                self._asked = (query, vector, scale)
            return self._asked[1], self._asked[2]

    def _stored(self, turn_ids: Iterable[int]) -> dict[int, tuple[float, array]]:
        """The stored vectors of `turn_ids` (those that have one), read from
        the store only where not read before: the turns `closest` scores are
        the same from one search to the next, and neither a turn nor its
        vector ever changes. A turn read without a vector is read again, as
        the background writer may have given it one since."""
        ids = list(turn_ids)
        with self._lock:
            unread = [i for i in ids if i not in self._read]
            if unread:
                if len(self._read) + len(unread) > 2 * PACKED_KEPT:
                    self._read = {}
                    unread = ids
                self._read.update(self.table.get(unread))
            return {i: self._read[i] for i in ids if i in self._read}

    def closest(self, query: str, turn_ids: Iterable[int], count: int) -> list[int]:
        """Of `turn_ids`, the `count` with a stored vector closest to the
        query's, closest first; none when the model cannot answer now (the
        rerank then says why)."""
        if count <= 0:
            return []
        vectors = self._stored(turn_ids)
        ready = getattr(self.embedder, "ready", None)
        if not vectors or ready is not None and not ready():
            return []
        try:
            wanted, scale = self._query_vector(query)
        except EmbeddingError:
            return []
        ids = tuple(vectors)
        stored = [vectors[i][1] for i in ids]
        kept = self._packed.get(ids)
        if kept is not None and kept.dims == len(wanted):
            self._packed.move_to_end(ids)
            dots = kept.dot(wanted)
        elif (len(ids) <= PACKED_KEPT and len(wanted) <= _LANE_LIMIT
              and all(len(v) == len(wanted) for v in stored)):
            # The people a person asks after recur, and so do their turns:
            # questions about two or three of them come in turn.
            packed = PackedVectors(stored)
            self._packed[ids] = packed
            while sum(p.count for p in self._packed.values()) > PACKED_KEPT:
                self._packed.popitem(last=False)
            dots = packed.dot(wanted)
        else:
            dots = dot_products(stored, wanted)
        cosine = {i: dot * vectors[i][0] for i, dot in zip(ids, dots, strict=True)}
        return sorted(cosine, key=lambda i: (-cosine[i], -i))[:count]

    def rerank(self, query: str, candidates: Sequence[tuple[int, float]]) -> Reranked:
        """`candidates` (turn ID, keyword score; best first) reordered by
        the weighed sum of both normalised signals."""
        if not candidates:
            return Reranked(list(candidates), None)
        head, tail = list(candidates[: self.depth]), list(candidates[self.depth:])
        vectors = self.table.get(i for i, _ in head)
        if not vectors:
            return Reranked(list(candidates), "no turn among the candidates has an embedding yet")
        ready = getattr(self.embedder, "ready", None)
        if ready is not None and not ready():
            return Reranked(list(candidates), "the embedding model is starting; search again in a moment")
        try:
            wanted, scale = self._query_vector(query)
        except EmbeddingError as exc:
            return Reranked(list(candidates), str(exc))
        keyword = _min_max([s for _, s in head])
        cosine: list[float | None] = []
        for turn_id, _ in head:
            stored = vectors.get(turn_id)
            cosine.append(None if stored is None else sum(map(mul, stored[1], wanted)) * stored[0] * scale)
        meaning = _min_max(cosine)
        combined = [self.weight * k + (1 - self.weight) * (m or 0.0) for k, m in zip(keyword, meaning, strict=True)]
        order = sorted(zip((i for i, _ in head), combined, strict=True), key=lambda pair: -pair[1])
        return Reranked(order + tail, None)

    def close(self) -> None:
        stop = getattr(self.worker, "stop", None)
        if stop is not None:
            stop()
        if self._embedding is not None:
            # A query still being embedded ends when the model closes, below.
            self._embedding.shutdown(wait=False, cancel_futures=True)
        self.embedder.close()


def _min_max(values: Sequence[float | None]) -> list[float | None]:
    """Scaled to 0..1 over the known values (all ones when they are equal);
    unknown ones stay unknown."""
    known = [v for v in values if v is not None]
    if not known:
        return list(values)
    low, high = min(known), max(known)
    if high - low < 1e-12:
        return [None if v is None else 1.0 for v in values]
    return [None if v is None else (v - low) / (high - low) for v in values]
