"""Embeddings from the provider's OpenAI-compatible `/v1/embeddings` endpoint.

OpenAI, Ollama, llama.cpp's server and vLLM all answer
`POST {base_url}/embeddings` with `{"model": ..., "input": [...]}` by
`{"data": [{"index": i, "embedding": [...]}, ...]}`; this is the one
request made. Vectors are scaled to unit length here (not every server
does), so that a dot product is a cosine. Any failure is an
`EmbeddingError` naming the server and what it said: the worker waits and
tries again, the search ranks by keywords and says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from .embeddings import EmbeddingError, unit

TIMEOUT_S = 30.0
MAX_BATCH = 64  # inputs per request: servers cap it, llama.cpp lowest


class RemoteEmbedder:
    """One embedding model served over HTTP."""

    def __init__(self, base_url: str, model: str, api_key: str = "", *, timeout_s: float = TIMEOUT_S,
                 transport: object | None = None) -> None:
        import httpx2

        if not model.strip():
            raise ValueError("the embedding model's name is empty; set memory.embedding_model")
        self.name = f"remote:{model}"
        self.model = model
        self.url = base_url.rstrip("/") + "/embeddings"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        options: dict = {"headers": headers, "timeout": timeout_s}
        if transport is not None:
            options["transport"] = transport
        self._client = httpx2.Client(**options)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        rows: list[list[float]] = []
        for start in range(0, len(texts), MAX_BATCH):
            rows.extend(self._request(list(texts[start : start + MAX_BATCH])))
        return [unit(row) for row in rows]

    def _request(self, texts: list[str]) -> list[list[float]]:
        import httpx2

        try:
            answer = self._client.post(self.url, json={"model": self.model, "input": texts})
        except httpx2.HTTPError as exc:
            raise EmbeddingError(f"cannot reach {self.url}: {exc}") from None
        if answer.status_code != 200:
            raise EmbeddingError(
                f"{self.url} answered {answer.status_code}: {answer.text[:200].strip()}")
        try:
            data = sorted(answer.json()["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"{self.url} gave no embeddings in the expected form ({exc})") from None
        if len(vectors) != len(texts) or len({len(v) for v in vectors}) > 1 or not all(vectors):
            raise EmbeddingError(f"{self.url} gave {len(vectors)} embeddings for {len(texts)} texts")
        return vectors

    def close(self) -> None:
        self._client.close()
