"""llama.cpp's OpenAI-compatible server (llama-cpp-python) with
SmolLM2-135M-Instruct or Gemma 3 270M (two model families, two chat
templates), started on 127.0.0.1 for the tests and the benches.

`scripts/llama_server install` builds and fetches what it needs (once per
machine; `scripts/setup --tests` runs it). Where it has not been run, the
tests that need the server are skipped, except under CI=true, where they
fail: a CI that silently skips the one real model would prove nothing.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "llama_server"
MODEL_ALIAS = "smollm2-135m-instruct"
# The name each family's model answers to.
ALIASES = {"smollm2": MODEL_ALIAS, "gemma3": "gemma-3-270m"}
CONTEXT_WINDOW = 8192
READY_WITHIN_S = 180.0  # loading a 100 MB model on a busy machine


@dataclass(frozen=True, slots=True)
class LlamaServer:
    """A running server: where it is, the model name it answers to, its window."""

    base_url: str  # ends in /v1, as a provider's base_url
    model: str
    context_window: int
    log: Path  # what the server printed

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")


class Unavailable(Exception):
    """The server is not installed on this machine; the message says how to install it."""


def model_path(family: str = "smollm2") -> Path:
    done = subprocess.run([str(SCRIPT), "model-path", family], capture_output=True, text=True,
                          check=True)
    return Path(done.stdout.strip())


def check_installed(family: str = "smollm2") -> None:
    """Raise `Unavailable` unless the server and the model are both there."""
    how = "run scripts/llama_server install (or scripts/setup --tests)"
    if not model_path(family).is_file():
        raise Unavailable(f"the {family} model file is not there; {how}")
    found = subprocess.run(
        [sys.executable, "-c", "import llama_cpp.server.app"], capture_output=True, text=True)
    if found.returncode != 0:
        raise Unavailable(f"llama-cpp-python's server is not installed in this interpreter; {how}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ready(root: str, alias: str = MODEL_ALIAS) -> bool:
    try:
        with urllib.request.urlopen(root + "/v1/models", timeout=2) as answer:
            return alias in json.loads(answer.read())["data"][0]["id"]
    except (OSError, urllib.error.URLError, ValueError, KeyError, IndexError):
        return False


class ServerProcess:
    """Starts the server and stops it; use as a context manager."""

    # One thread: llama.cpp's threads wait for each other by spinning, and on
    # a busy two-core machine two of them answered ten times slower than one.
    def __init__(self, log: Path, *, threads: int = 1, family: str = "smollm2",
                 window: int = CONTEXT_WINDOW, extra: tuple[str, ...] = ()) -> None:
        """`extra`: more of the server's own arguments (`--cache true` …)."""
        self.log_path = log
        self.threads = threads
        self.family = family
        self.alias = ALIASES[family]
        self.window = window
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LlamaServer:
        check_installed(self.family)
        port = _free_port()
        root = f"http://127.0.0.1:{port}"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        # Unbuffered, so that its log shows what it did as it did it.
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        self.process = subprocess.Popen(
            [str(SCRIPT), "serve", "--family", self.family,
             "--host", "127.0.0.1", "--port", str(port),
             "--n_ctx", str(self.window), "--n_threads", str(self.threads),
             "--n_threads_batch", str(self.threads),
             "--model_alias", self.alias, "--verbose", "false", *self.extra],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        )
        log.close()
        deadline = time.monotonic() + READY_WITHIN_S
        while not _ready(root, self.alias):
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"llama.cpp's server exited with {self.process.returncode}: {self._tail()}")
            if time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"llama.cpp's server was not ready within "
                                   f"{READY_WITHIN_S:.0f} s: {self._tail()}")
            time.sleep(0.25)
        return LlamaServer(f"{root}/v1", self.alias, self.window, self.log_path)

    def __exit__(self, *exc_info: object) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"
