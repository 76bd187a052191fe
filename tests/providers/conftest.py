"""Fake servers shared by the provider tests, and providers built against them."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from noema.providers.base import Message, MessageRole, ModelRequest, Provider, ToolSpec
from noema.providers.catalog import build_provider
from noema.providers.settings import ModelSettings
from tests.fakes import FakeAnthropicServer, FakeOpenAIServer
from tests.fakes._server import FakeServer


class SleepRecorder:
    """Stands in for asyncio.sleep: remembers the waits, waits for nothing."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture(scope="session")
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="session")
def anthropic_server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@dataclass
class Rig:
    """One protocol under test: its fake server and a way to build a provider for it."""

    protocol: str
    server: FakeServer
    make: Callable[..., Any]


@pytest.fixture
async def openai_rig(openai_server: FakeOpenAIServer, sleeps: SleepRecorder) -> AsyncIterator[Rig]:
    openai_server.reset()
    made: list[Any] = []

    def make(base_url: str | None = None, secrets: dict | None = None, **fields: Any) -> Provider:
        fields.setdefault("provider", "openai-compatible")
        fields.setdefault("model", "test-model")
        settings = ModelSettings(base_url=base_url or openai_server.base_url, **fields)
        provider = build_provider(settings, secrets or {}, sleep=sleeps)
        made.append(provider)
        return provider

    yield Rig("openai", openai_server, make)
    for provider in made:
        await provider.aclose()
    openai_server.reset()


@pytest.fixture
async def anthropic_rig(
    anthropic_server: FakeAnthropicServer, sleeps: SleepRecorder
) -> AsyncIterator[Rig]:
    anthropic_server.reset()
    made: list[Any] = []

    def make(base_url: str | None = None, secrets: dict | None = None, **fields: Any) -> Provider:
        fields.setdefault("provider", "anthropic")
        fields.setdefault("model", "claude-test")
        settings = ModelSettings(base_url=base_url or anthropic_server.base_url, **fields)
        provider = build_provider(
            settings, secrets if secrets is not None else {"ANTHROPIC_API_KEY": "test-key"},
            sleep=sleeps,
        )
        made.append(provider)
        return provider

    yield Rig("anthropic", anthropic_server, make)
    for provider in made:
        await provider.aclose()
    anthropic_server.reset()


@pytest.fixture(params=["openai", "anthropic"])
def rig(request: pytest.FixtureRequest) -> Rig:
    """Each protocol in turn, for behaviour both adapters must share."""
    return request.getfixturevalue(f"{request.param}_rig")


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (it was just released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def simple_request(text: str = "hello", tools: tuple[ToolSpec, ...] = ()) -> ModelRequest:
    return ModelRequest(
        messages=(Message(MessageRole.SYSTEM, "You are terse."), Message(MessageRole.USER, text)),
        tools=tools,
    )
