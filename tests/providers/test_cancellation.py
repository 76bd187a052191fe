"""Stopping a stream closes the HTTP response at once, as the server sees it.

The fake server streams slowly enough that the answer could not finish
within the wait, so only a real disconnect can set its event.
"""

from __future__ import annotations

import asyncio

import pytest

from noema.providers.base import TextDelta
from tests.fakes import FakeReply

from .conftest import Rig, simple_request

LONG = "word " * 400  # 20 s at the pace below: far longer than any wait here
PACE = 20  # tokens per second


async def test_cancelling_the_consuming_task_disconnects(rig: Rig) -> None:
    rig.server.tokens_per_second = PACE
    rig.server.script(FakeReply(text=LONG))
    provider = rig.make()
    first = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(simple_request()):
            if isinstance(event, TextDelta):
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await rig.server.wait_disconnected(10)
    assert rig.server.completed == 0


async def test_aclose_on_the_stream_disconnects(rig: Rig) -> None:
    rig.server.tokens_per_second = PACE
    rig.server.script(FakeReply(text=LONG))
    stream = rig.make().stream(simple_request())

    event = await anext(stream)
    while not isinstance(event, TextDelta):
        event = await anext(stream)
    await stream.aclose()

    assert await rig.server.wait_disconnected(10)
    assert rig.server.disconnects == 1 and rig.server.completed == 0


async def test_cancelling_while_waiting_for_the_first_byte_disconnects(rig: Rig) -> None:
    # The first event goes out at once; then the server is slow to say more.
    rig.server.tokens_per_second = 0.2
    rig.server.script(FakeReply(text=LONG))
    provider = rig.make()
    task = asyncio.create_task(anext(provider.stream(simple_request())))

    assert await rig.server.wait_requests(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await rig.server.wait_disconnected(10)
