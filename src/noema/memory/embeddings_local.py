"""The embedded sentence-embedding model: all-MiniLM-L6-v2, int8 ONNX.

The model file ships with Noema (`noema/data/embeddings/`: the graph, its
tokenizer, its licence, and `model.json` with the sha256 of each, made by
`scripts/export_embedding_model.py`). It runs with onnxruntime and the
`tokenizers` library alone: no torch, nothing downloaded. The graph gives
the sentence embedding whole (mean of the token vectors, unit length).

Loading costs about 60 MB of memory, so an agent never loads it itself:
`ChildEmbedder` runs it in a child process that exits when it has had no
work for a while (`embeddings_worker.py` and the search start it again on
demand). `python -m noema.memory.embeddings_local` is that child: it reads
requests as JSON lines on stdin and answers each with a JSON header line
and the float32 vectors as raw bytes on stdout.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from array import array
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from .embeddings import EmbeddingError

if TYPE_CHECKING:  # the agent's side never loads numpy: only the child does
    import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2-int8"
BATCH = 32  # texts per run of the graph
THREADS = 1  # the agent's machine is the person's: one core is enough for a few turns


def model_folder() -> Path:
    return Path(str(resources.files("noema") / "data" / "embeddings"))


class OnnxEmbedder:
    """all-MiniLM-L6-v2 in this process (the child's side)."""

    name = MODEL_NAME

    def __init__(self, folder: Path | None = None) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        folder = folder or model_folder()
        meta = json.loads((folder / "model.json").read_text(encoding="utf-8"))
        model = folder / "model.onnx"
        for path, key in ((model, "model_sha256"), (folder / "tokenizer.json", "tokenizer_sha256")):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest != meta[key]:
                raise EmbeddingError(f"{path} is not the file Noema shipped (sha256 {digest[:12]}…)")
        self.dimensions = int(meta["dimensions"])
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(int(meta["max_tokens"]))
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"])

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors as the rows of one float32 array."""
        import numpy as np

        out = []
        for start in range(0, len(texts), BATCH):
            encoded = self._tokenizer.encode_batch(list(texts[start : start + BATCH]))
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            types = np.array([e.type_ids for e in encoded], dtype=np.int64)
            out.append(self._session.run(None, {
                "input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0])
        if not out:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.concatenate(out).astype(np.float32)

    def close(self) -> None:
        self._session = None


class ChildEmbedder:
    """The local model in a child process, started at the first request and
    ended after `idle_s` seconds without one (by `reap`, which the worker
    calls), so that an idle agent holds none of it."""

    name = MODEL_NAME

    def __init__(self, *, idle_s: float = 60.0, start_timeout_s: float = 60.0) -> None:
        self.idle_s = idle_s
        self.start_timeout_s = start_timeout_s
        self._child: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._last_use = 0.0
        self._warming: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._child is not None and self._child.poll() is None

    def embed(self, texts: Sequence[str]) -> list[array]:
        import time

        with self._lock:
            child = self._ensure()
            try:
                assert child.stdin is not None and child.stdout is not None
                child.stdin.write(json.dumps({"texts": list(texts)}).encode() + b"\n")
                child.stdin.flush()
                header = json.loads(child.stdout.readline() or b"{}")
                if "error" in header or "rows" not in header:
                    raise EmbeddingError(header.get("error", "the embedding process ended"))
                rows, dims = int(header["rows"]), int(header["dimensions"])
                data = _read_exactly(child.stdout, rows * dims * 4)
            except (OSError, ValueError, EmbeddingError) as exc:
                self._stop()
                raise EmbeddingError(f"the local embedding model failed: {exc}") from None
            self._last_use = time.monotonic()
            flat = array("f", data)
            return [flat[n * dims : (n + 1) * dims] for n in range(rows)]

    def ready(self) -> bool:
        """Whether a request would be answered at once. When the child is not
        running it is started in the background (loading takes a second or
        two), so that a search does not wait for it: that search ranks by
        words, and the next ones have meaning."""
        if self.running and self._last_use:
            return True
        if self._warming is None or not self._warming.is_alive():
            self._warming = threading.Thread(target=self._warm, name="embeddings-start", daemon=True)
            self._warming.start()
        return False

    def _warm(self) -> None:
        try:
            self.embed(["warm"])
        except EmbeddingError:
            pass  # said by the next request that needs it

    def reap(self) -> bool:
        """End the child if it has been idle long enough; whether it runs now."""
        import time

        with self._lock:
            if self.running and time.monotonic() - self._last_use > self.idle_s:
                self._stop()
            return self.running

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self.running:
            assert self._child is not None
            return self._child
        self._child = subprocess.Popen(
            [sys.executable, "-m", "noema.memory.embeddings_local"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={**os.environ, "OMP_NUM_THREADS": str(THREADS)},
            start_new_session=True,  # a Ctrl-C in the chat is not meant for it
        )
        return self._child

    def _stop(self) -> None:
        child, self._child = self._child, None
        self._last_use = 0.0
        if child is None:
            return
        try:
            if child.stdin:
                child.stdin.close()
            child.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            child.kill()
            child.wait()
        finally:
            if child.stdout:
                child.stdout.close()


def _read_exactly(stream, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EmbeddingError("the embedding process ended mid-answer")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serve() -> int:
    """The child: embed each request until stdin closes."""
    import numpy as np

    out = sys.stdout.buffer
    try:
        model = OnnxEmbedder()
    except Exception as exc:  # said to the parent, which says it to the model
        failure = str(exc) or type(exc).__name__
        for _ in sys.stdin.buffer:
            out.write(json.dumps({"error": f"cannot load the model: {failure}"}).encode() + b"\n")
            out.flush()
        return 1
    for line in sys.stdin.buffer:
        try:
            texts = json.loads(line)["texts"]
            vectors = np.ascontiguousarray(model.embed_array(texts), dtype=np.float32)
        except Exception as exc:
            out.write(json.dumps({"error": str(exc) or type(exc).__name__}).encode() + b"\n")
            out.flush()
            continue
        out.write(json.dumps({"rows": int(vectors.shape[0]),
                              "dimensions": int(vectors.shape[1])}).encode() + b"\n")
        out.write(vectors.tobytes())
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve())
