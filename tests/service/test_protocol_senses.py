"""Silence and StartSense over the agent's real socket: a person's interface
(the web page beside `noema run`) closes and reopens a channel."""

from __future__ import annotations

import asyncio
import time

from noema.interfaces.host.attach import socket_path
from noema.interfaces.host.protocol import (
    MAX_LINE,
    AskStatus,
    Done,
    Hello,
    Silence,
    StartSense,
    Status,
    Welcome,
    decode_client,
    decode_server,
    encode,
)

from .conftest import WAIT, until


async def ask(attached, message) -> Done | Status:
    """Send a request and read up to its answer (Done or Status, by request number)."""
    await attached.connection.send(message)
    seen = await until(attached.messages, lambda m: isinstance(m, (Done, Status))
                       and m.request == message.request)
    return seen[-1]


def sensor(status: Status, channel: str):
    return next(s for s in status.status.sensors if s.channel == channel)


def test_the_messages_round_trip_as_one_line_each():
    silence = Silence(request=3, channel="clock", seconds=900)
    line = encode(silence)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode_client(line) == silence
    start = StartSense(request=4, channel="clock")
    assert decode_client(encode(start)) == start


async def test_a_channel_is_silenced_and_started_again_over_the_socket(served):
    web = await served.attach("web")
    try:
        before = time.time()
        done = await ask(web, Silence(request=1, channel="clock", seconds=900))
        assert done.ok and done.error is None
        clock = sensor(await ask(web, AskStatus(request=2)), "clock")
        assert clock.state == "silenced" and clock.silenced_until >= before + 899
        assert not served.app.pipeline.gate.is_open("clock", time.time())

        done = await ask(web, StartSense(request=3, channel="clock"))
        assert done.ok
        assert sensor(await ask(web, AskStatus(request=4)), "clock").state == "active"
        assert served.app.pipeline.gate.is_open("clock", time.time())
    finally:
        await web.connection.aclose()


async def test_a_refusal_says_why_and_changes_nothing(served):
    web = await served.attach("web")
    try:
        unknown = await ask(web, Silence(request=1, channel="nope", seconds=60))
        assert not unknown.ok and "unknown channel" in unknown.error and "clock" in unknown.error
        fixed = await ask(web, Silence(request=2, channel="scheduler.urgent", seconds=60))
        assert not fixed.ok and "cannot be silenced" in fixed.error
        unknown = await ask(web, StartSense(request=3, channel="nope"))
        assert not unknown.ok and "unknown channel" in unknown.error
        status = await ask(web, AskStatus(request=4))
        assert {s.state for s in status.status.sensors} == {"active"}
    finally:
        await web.connection.aclose()


async def test_a_malformed_silence_is_answered_not_understood(served):
    """A bad duration never reaches the pipeline; the line's request is answered."""
    reader, writer = await asyncio.open_unix_connection(str(socket_path(served.paths)),
                                                        limit=MAX_LINE * 2)
    try:
        writer.write(encode(Hello(client="web")))
        assert isinstance(await read(reader), Welcome)
        # Raw lines: the typed message refuses to be built with these values.
        writer.write(b'{"type": "silence", "request": 1, "channel": "clock", "seconds": -5}\n')
        writer.write(b'{"type": "silence", "request": 2, "channel": "clock", "seconds": "soon"}\n')
        writer.write(b'{"type": "start_sense", "request": 3}\n')  # no channel
        for request in (1, 2, 3):
            done = await read(reader)
            assert isinstance(done, Done) and done.request == request and not done.ok
            assert "not understood" in done.error
        assert served.app.pipeline.gate.is_open("clock", time.time())
    finally:
        writer.close()


async def read(reader):
    line = await asyncio.wait_for(reader.readline(), WAIT)
    return decode_server(line) if line else None
