"""What `noema setup` proposes and says about a server of one's own: the
window when the server does not tell it, and why a test had no answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from noema import setup_flow
from noema.providers.base import ProviderError
from noema.setup_flow import Answers, live_test
from tests.fakes.local_servers import FakeLocalServer

from .test_setup import READY, setup, written


def test_a_server_that_does_not_say_its_window_gets_a_small_safe_one_written(tmp_path):
    with FakeLocalServer("llamacpp", {"SmolLM2-135M-Instruct.gguf": None}) as server:
        server.script(READY)
        done = setup(tmp_path, "--provider", "llamacpp", "--base-url", server.base_url)
    assert done.exit_code == 0, done.output
    assert "context window: not said by the server; 4,096 tokens are assumed" in done.output
    assert "the -c or --n_ctx it was started with" in done.output
    # Written, so the agent never assumes more than the server may run.
    assert written(tmp_path)["models"]["reasoning"]["context_window"] == 4096


@asynccontextmanager
async def held_server(*, lists_models: bool, begins: bool) -> AsyncIterator[str]:
    """A server that takes requests and answers no chat: busy (it does not
    even list its models), or up with a model that says nothing (or begins,
    then stalls)."""
    held: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        await reader.readexactly(length)
        held.append(writer)
        if head.startswith(b"GET /v1/models") and lists_models:
            body = json.dumps({"data": [{"id": "m", "object": "model"}]}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
                         % (len(body), body))
            await writer.drain()
            writer.close()
            return
        if lists_models and not head.startswith(b"POST /v1/chat/completions"):
            writer.write(b"HTTP/1.1 404 Not Found\r\nconnection: close\r\n"
                         b"content-length: 0\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        if begins:
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                     "choices": [{"index": 0, "delta": {"content": "Let me"},
                                  "finish_reason": None}]}
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
                         + b"data: " + json.dumps(chunk).encode() + b"\n\n")
            await writer.drain()
        await asyncio.sleep(3600)  # never more

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for writer in held:
            writer.close()
        server.close()


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(setup_flow, "TEST_TIMEOUT_S", 0.5)
    monkeypatch.setattr(setup_flow, "BUSY_CHECK_S", 0.5)


@pytest.mark.parametrize("lists_models, begins, words", [
    (False, False, "it is busy, most likely still working on an earlier request"),
    (True, False, "said nothing within 0 s, although llama.cpp server at"),
    (True, True, "began to answer but had not finished after 0 s"),
], ids=["busy", "silent", "slow"])
async def test_a_test_with_no_answer_says_why_and_what_to_do(quick, lists_models, begins, words):
    async with held_server(lists_models=lists_models, begins=begins) as url:
        answers = Answers("llamacpp", model="m", base_url=url, context_window=4096)
        with pytest.raises(ProviderError) as failed:
            await live_test(answers, {})
    assert words in str(failed.value)
    assert "Hint:" in str(failed.value)


async def test_a_server_that_is_not_there_is_said_to_be_started(tmp_path):
    import socket

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    answers = Answers("llamacpp", model="m", base_url=f"http://127.0.0.1:{port}/v1",
                      context_window=4096)
    with pytest.raises(ProviderError, match=r"Hint: is the server running at http://127"):
        await live_test(answers, {})


async def test_the_python_server_s_window_is_read_from_its_refusal_of_a_longer_request():
    from noema.setup_flow import PAST_ANY_WINDOW, window_from_refusal
    from tests.fakes import FakeFailure
    from tests.providers.test_server_quirks import LlamaServerShapes

    counted: list[str] = []

    def count(body):
        counted.append(body["input"])
        return {"count": len(body["input"].split())}

    refusal = ("This model's maximum context length is 8192 tokens. However, you requested "
               "1048588 tokens (1048587 in the messages, 1 in the completion).")
    with LlamaServerShapes({"/extras/tokenize/count": count}) as server:
        server.script(FakeFailure(400, refusal))
        window = await window_from_refusal(server.base_url, "m", None)
        [asked] = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert window is not None and window.tokens == 8192
    assert "refusing a request longer than its window" in window.source
    # Longer than any window: refused before it is read, never answered.
    assert len(asked.body["messages"][0]["content"].split()) >= PAST_ANY_WINDOW
    assert asked.body["max_tokens"] == 1


async def test_a_server_without_that_count_route_is_never_sent_the_long_request():
    from noema.setup_flow import window_from_refusal

    with FakeLocalServer("llamacpp", {"m": None}) as server:
        assert await window_from_refusal(server.base_url, "m", None) is None
        asked = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert asked == []  # a server that would read it whole is not asked
