"""Fake model servers that speak the real wire protocols over real HTTP on
127.0.0.1, for tests and benchmarks.

    with FakeOpenAIServer(tokens_per_second=50) as server:
        server.script(FakeReply(text="hello there"), FakeFailure(429, retry_after=1))
        ... point a client at server.base_url ...
        server.requests  # what the client sent
"""

from .anthropic_server import FakeAnthropicServer
from .openai_server import FakeOpenAIServer
from .script import FakeFailure, FakeReply, FakeToolCall, RecordedRequest

__all__ = [
    "FakeAnthropicServer",
    "FakeFailure",
    "FakeOpenAIServer",
    "FakeReply",
    "FakeToolCall",
    "RecordedRequest",
]
