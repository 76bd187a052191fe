"""Fetched documents read into text in a worker process, under a memory and a time bound.

What a document takes to read depends on what its bytes say, not on how
many there are: 2 MB of DOCX can unpack to 2 GB of XML, a PDF of 900 KB
inflates to hundreds of megabytes of drawing commands, 10 MB of `<p>` keeps
an HTML reader busy for minutes, and a body labelled text/html may be
anything. Each format has its own checks (`extract.py`), but the bound that
holds for every format, and for every library bug still unknown, is the
kernel's: the text is made in a worker process whose data segment may grow
by at most `memory_for(size)` during one document (`RLIMIT_DATA`, which
counts the heap and private mappings), which is stopped after `timeout_s`,
and whose text comes back cut at `TEXT_LIMIT` characters. The agent's own
memory grows by the body and the text, nothing more.

One worker serves the whole process, one document at a time, and is started
again after it was stopped or ran out of memory (its heap may be in pieces).
It is a plain child reading frames on its standard input: it ends when the
agent does.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..tools.errors import ToolError

TEXT_LIMIT = 4_000_000  # characters of text kept from one document
_BASE_MEMORY = 256 << 20  # what reading any document may take, above the worker's own
_PER_BODY_BYTE = 4  # and per byte of the document
_FRAME = struct.Struct(">Q")
_KEPT_ENV = frozenset({"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "HOME",
                       "VIRTUAL_ENV"})


def memory_for(size: int, base: int = _BASE_MEMORY) -> int:
    """How much the worker's data may grow while it reads a document of `size` bytes."""
    return base + _PER_BODY_BYTE * size


class _Job:
    """One document's reading, as its caller knows it."""

    cancelled = False


class Reader:
    """The worker, driven from a thread: `read` blocks until the text or an error."""

    def __init__(self, timeout_s: float = 30.0, base_memory: int = _BASE_MEMORY) -> None:
        self.timeout_s = timeout_s
        self.base_memory = base_memory
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._job: _Job | None = None  # the reading under way, when a caller marked it

    def read(self, body: bytes, media_type: str, charset: str | None, url: str,
             truncated: bool, job: _Job | None = None) -> str:
        """The readable text of a fetched body; a ToolError says why there is none.

        `job` (from `read_async`) marks the reading so that only its own
        cancellation stops it."""
        header = {"media_type": media_type, "charset": charset, "url": url,
                  "truncated": truncated, "memory": memory_for(len(body), self.base_memory)}
        with self._lock:
            if job is not None and job.cancelled:
                raise ToolError(f"reading {url} was cancelled")
            self._job = job
            try:
                return self._exchange(header, body, url)
            finally:
                self._job = None

    def _exchange(self, header: dict, body: bytes, url: str) -> str:
        """One document to the worker and its text back (the lock is held)."""
        proc = self._started()
        deadline = time.monotonic() + self.timeout_s
        try:
            assert proc.stdin is not None
            _write_frame(proc.stdin, json.dumps(header).encode())
            _write_frame(proc.stdin, body)
            proc.stdin.flush()
            answer = json.loads(self._frame(proc, deadline))
            text = self._frame(proc, deadline).decode("utf-8", "replace")
        except TimeoutError:
            self._stop()
            raise ToolError(f"reading {url} took longer than {self.timeout_s:g} s and was "
                            "stopped; the document is too costly to read") from None
        except (OSError, EOFError, ValueError):
            code = self._stop()
            raise ToolError(f"the reader of {url} stopped ({_exit_words(code)}); the "
                            "document could not be read") from None
        if answer.get("restart"):  # it ran out of memory: a fresh one for the next
            self._stop()
        if "error" in answer:
            raise ToolError(answer["error"])
        return text

    def close(self) -> None:
        with self._lock:
            self._stop()

    def abandon(self, job: _Job) -> None:
        """The fetch that wanted `job`'s text was cancelled: kill the worker if it
        reads that job now (the thread waiting on it then returns at once), and
        make sure it never starts otherwise."""
        job.cancelled = True
        proc = self._proc
        if self._job is job and proc is not None and proc.poll() is None:
            proc.kill()

    async def read_async(self, body: bytes, media_type: str, charset: str | None, url: str,
                         truncated: bool) -> str:
        """`read` from a thread; a cancelled caller stops its reading too."""
        import asyncio

        job = _Job()
        try:
            return await asyncio.to_thread(self.read, body, media_type, charset, url,
                                           truncated, job)
        except asyncio.CancelledError:
            self.abandon(job)
            raise

    def _started(self) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        source = str(Path(__file__).resolve().parents[2])  # the folder holding `noema`
        path = os.pathsep.join([source, *filter(None, [os.environ.get("PYTHONPATH")])])
        # What reads hostile bytes gets none of the agent's secrets from the environment.
        kept = {k: v for k, v in os.environ.items() if k in _KEPT_ENV}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "noema.web.reader"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
            start_new_session=True,  # a Ctrl-C at the terminal is the agent's, not its
            env={**kept, "PYTHONPATH": path})
        return self._proc

    def _stop(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
        code = proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        return code

    def _frame(self, proc: subprocess.Popen, deadline: float) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        size = _FRAME.unpack(_read_exactly(fd, _FRAME.size, deadline))[0]
        if size > 4 * TEXT_LIMIT + 65536:
            raise ValueError("a frame larger than any answer")
        return _read_exactly(fd, size, deadline)


def _read_exactly(fd: int, count: int, deadline: float) -> bytes:
    parts, left = [], count
    while left:
        wait = deadline - time.monotonic()
        if wait <= 0 or not select.select([fd], [], [], wait)[0]:
            raise TimeoutError
        part = os.read(fd, min(left, 1 << 20))
        if not part:
            raise EOFError
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _write_frame(stream, data: bytes) -> None:
    stream.write(_FRAME.pack(len(data)))
    stream.write(data)


def _exit_words(code: int | None) -> str:
    if code is None or code >= 0:
        return f"exit {code}"
    import signal

    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"


_SHARED: list[Reader] = []
_SHARED_LOCK = threading.Lock()


def shared_reader() -> Reader:
    """The process's one reader (its worker starts at the first document)."""
    with _SHARED_LOCK:
        if not _SHARED:
            _SHARED.append(Reader())
            atexit.register(_SHARED[0].close)  # the worker goes with the agent
    return _SHARED[0]


def read_text(body: bytes, media_type: str, charset: str | None, url: str,
              truncated: bool) -> str:
    """`Reader.read` on the process's one worker (blocking: call it from a thread)."""
    return shared_reader().read(body, media_type, charset, url, truncated)


# -- the worker ----------------------------------------------------------------------

def _data_in_use() -> int:
    """The worker's data segment now (what RLIMIT_DATA counts), in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def _serve() -> None:
    import resource

    from .extract import to_text

    # Frames go out on a copy of the standard output; what a library prints
    # goes to the standard error (discarded), never into a frame.
    source, sink = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    while True:
        try:
            header = json.loads(_next_frame(source))
            body = _next_frame(source)
        except EOFError:
            return  # the agent closed the pipe: it is done
        answer: dict = {}
        text = ""
        limit = _data_in_use() + int(header["memory"])
        resource.setrlimit(resource.RLIMIT_DATA, (min(limit, hard) if hard >= 0 else limit,
                                                  hard))
        try:
            text = to_text(body, header["media_type"], header["charset"], header["url"],
                           header["truncated"])
            if len(text) > TEXT_LIMIT:
                text = (text[:TEXT_LIMIT] + f"\n\n[the text stops here: it was cut at "
                        f"{TEXT_LIMIT} characters]")
        except MemoryError:
            text = ""
            mib = int(header["memory"]) >> 20
            answer = {"error": f"reading {header['url']} needs more than {mib} MiB; the "
                               "document is too costly to read", "restart": True}
        except ToolError as exc:
            answer = {"error": str(exc)}
        except Exception as exc:  # a hostile file: each library fails its own way
            answer = {"error": f"{header['url']} could not be read as {header['media_type']} "
                               f"({type(exc).__name__})"}
        finally:
            resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
        del body
        _write_frame(sink, json.dumps(answer).encode())
        _write_frame(sink, text.encode("utf-8", "replace"))
        sink.flush()
        if answer.get("restart"):
            return


def _next_frame(source) -> bytes:
    head = source.read(_FRAME.size)
    if len(head) < _FRAME.size:
        raise EOFError
    size = _FRAME.unpack(head)[0]
    data = source.read(size)
    if len(data) < size:
        raise EOFError
    return data


if __name__ == "__main__":
    _serve()
