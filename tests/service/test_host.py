"""The host: interfaces attached over the socket and in memory, at once."""

from __future__ import annotations

import asyncio
import os
import socket
import stat

import pytest

from noema.config import Config
from noema.interfaces.host.attach import socket_path
from noema.interfaces.host.host import Host, CannotServe
from noema.interfaces.host.protocol import (
    MAX_LINE,
    Answer,
    ApprovalAsked,
    ApprovalSettled,
    AskStatus,
    CycleEnded,
    Done,
    Goodbye,
    Hello,
    Idle,
    Notice,
    Refused,
    Said,
    Say,
    Status,
    Stop,
    TextDelta,
    ToolFinished,
    Welcome,
    decode_server,
    encode,
)
from noema.paths import AgentPaths
from noema.providers.scripted import ScriptedProvider, call, say
from noema.security.settings import AutonomySettings, FilesSettings, RootSettings

from .conftest import WAIT, serve, shut, until

ANSWER = " ".join(f"word{i}" for i in range(60))


def text_of(messages) -> str:
    return "".join(m.delta for m in messages if isinstance(m, TextDelta))


def broadcasts(messages) -> list[int]:
    """The seqs of the broadcast messages seen (replies to one client carry the last one)."""
    return [m.seq for m in messages if not isinstance(m, (Welcome, Done, Status))]


def is_idle(message) -> bool:
    return isinstance(message, Idle)


async def test_the_socket_is_owner_only_even_in_a_folder_too_deep_for_an_address(tmp_path):
    deep = tmp_path / ("d" * 90) / ("e" * 90)
    paths = AgentPaths.for_agent("ana", deep)
    assert len(os.fsencode(socket_path(paths))) > 108  # past what a unix address can hold
    served = await serve(paths, Config(), ScriptedProvider([say("hello")]))
    try:
        info = os.stat(socket_path(paths))
        assert stat.S_ISSOCK(info.st_mode)
        assert stat.S_IMODE(info.st_mode) == 0o600
        assert [p.name for p in paths.root.iterdir() if p.name.startswith(".sock-")] == []
        attached = await served.attach()
        assert attached.welcome.agent == "ana"
        await attached.connection.aclose()
    finally:
        await shut(served)
    assert not socket_path(paths).exists()  # removed on close


async def test_a_stale_socket_is_replaced_and_a_live_one_never(tmp_path):
    paths = AgentPaths.for_agent("ana", tmp_path / "home").ensure()
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(socket_path(paths)))  # a socket whose process is gone
    dead.close()
    served = await serve(paths, Config(), ScriptedProvider([]))
    try:
        attached = await served.attach()
        await attached.connection.aclose()
        intruder = Host("ana")
        with pytest.raises(CannotServe, match="already serves"):
            await intruder.serve(socket_path(paths))
        attached = await served.attach()  # the live socket is untouched
        await attached.connection.aclose()
    finally:
        await shut(served)


async def test_two_clients_see_the_same_streamed_answer(served):
    served.model.extend([say(ANSWER)])
    over_socket = await served.attach("chat")
    in_memory = served.host.connect("web")
    await in_memory.send(Hello(client="web"))
    memory_messages = in_memory.messages()
    welcome = await anext(memory_messages)
    assert isinstance(welcome, Welcome) and welcome.complete

    await over_socket.connection.send(Say(request=1, text="tell me sixty words"))
    seen_socket = await until(over_socket.messages, is_idle)
    seen_memory = await until(memory_messages, is_idle)

    assert text_of(seen_socket) == text_of(seen_memory) == ANSWER
    assert broadcasts(seen_socket) == broadcasts(seen_memory)
    seqs = broadcasts(seen_socket)
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # one by one, none skipped
    said = [m for m in seen_memory if isinstance(m, Said)]
    assert [s.turn.content for s in said] == ["tell me sixty words"]
    assert said[0].turn.channel == "terminal"
    done = [m for m in seen_socket if isinstance(m, Done)]
    assert done == [Done(seq=done[0].seq, request=1, ok=True, turn_id=said[0].turn.id)]
    assert not any(isinstance(m, Done) for m in seen_memory)  # an answer goes to its asker

    await in_memory.send(AskStatus(request=5))
    status = await until(memory_messages, lambda m: isinstance(m, Status))
    assert status[-1].request == 5 and status[-1].status.clients == 2
    assert status[-1].status.session_turns == 2 and status[-1].status.phase == "idle"
    await in_memory.aclose()
    await over_socket.connection.aclose()


async def test_a_client_that_dies_mid_stream_disturbs_nobody(served):
    served.model.token_delay_s = 0.005
    served.model.extend([say(ANSWER), say("still here")])
    speaker = await served.attach("chat")
    doomed = await served.attach("web")
    await speaker.connection.send(Say(request=1, text="go on"))
    await until(doomed.messages, lambda m: isinstance(m, TextDelta))
    doomed.connection._writer.transport.abort()  # gone without a word, as a killed process

    seen = await until(speaker.messages, is_idle)
    assert text_of(seen) == ANSWER
    ended = [m for m in seen if isinstance(m, CycleEnded)]
    assert [e.outcome for e in ended] == ["answered"]
    await speaker.connection.send(Say(request=2, text="are you there?"))
    seen = await until(speaker.messages, is_idle)
    assert text_of(seen) == "still here"
    assert served.host.clients == 1
    await speaker.connection.aclose()


async def test_a_client_that_stops_reading_is_dropped_and_the_others_go_on(served):
    long_answer = " ".join(f"w{i}" for i in range(30_000))
    served.model.token_delay_s = 0.0
    served.model.extend([say(long_answer)])
    reader = await served.attach("chat")
    stalled = socket.socket(socket.AF_UNIX)  # says hello, then never reads a byte
    stalled.connect(str(socket_path(served.paths)))
    stalled.sendall(encode(Hello(client="web")))
    try:
        await reader.connection.send(Say(request=1, text="a long one"))
        seen = await until(reader.messages, is_idle, timeout=120)
        assert text_of(seen) == long_answer
        assert served.host.clients == 1  # the stalled one was let go
        stalled.settimeout(WAIT)
        received = b""
        while chunk := stalled.recv(1 << 16):  # what was on its way, then the end
            received += chunk
        lines = [decode_server(line) for line in received.splitlines()]
        assert isinstance(lines[0], Welcome) and not any(isinstance(m, Idle) for m in lines)
    finally:
        stalled.close()
    await reader.connection.aclose()


async def test_resuming_with_since_loses_and_repeats_nothing(served):
    served.model.token_delay_s = 0.003
    served.model.extend([say(ANSWER)])
    witness = await served.attach("web")
    first = await served.attach("chat")
    await first.connection.send(Say(request=1, text="tell me"))
    part = await until(first.messages, lambda m: isinstance(m, TextDelta) and m.delta.startswith(
        "word10"))
    last = part[-1].seq
    await first.connection.aclose()

    whole = await until(witness.messages, is_idle)
    again = await served.attach("chat", since=last)
    assert again.welcome.complete
    rest = await until(again.messages, is_idle)

    assert broadcasts(part) + broadcasts(rest) == broadcasts(whole)
    assert text_of(part) + text_of(rest) == text_of(whole) == ANSWER
    await again.connection.aclose()
    await witness.connection.aclose()


async def test_a_resume_older_than_the_backlog_says_it_is_incomplete():
    host = Host("ana", backlog=3)
    for n in range(5):
        host.on_notice(f"notice {n}")  # seqs 1..5; the backlog keeps 3..5

    async def resume(since):
        connection = host.connect("chat")
        await connection.send(Hello(since=since))
        messages = connection.messages()
        welcome = await anext(messages)
        replay = [await anext(messages) for _ in range(3 if since is not None else 0)]
        await connection.aclose()
        return welcome, replay

    welcome, replay = await resume(0)
    assert not welcome.complete and [m.seq for m in replay] == [3, 4, 5]
    welcome, replay = await resume(2)
    assert welcome.complete and [m.text for m in replay] == ["notice 2", "notice 3", "notice 4"]
    welcome, _ = await resume(None)
    assert welcome.complete and welcome.seq == 5


async def raw(paths):
    return await asyncio.open_unix_connection(str(socket_path(paths)), limit=MAX_LINE * 2)


async def read_line(reader):
    line = await asyncio.wait_for(reader.readline(), WAIT)
    return decode_server(line) if line else None


@pytest.mark.parametrize("first, says", [
    (b"this is not json\n", "the first message must be hello"),
    (b'{"type": "say", "request": 1, "text": "hi"}\n', "the first message must be hello"),
    (encode(Hello(version=99)), "speaks protocol version 1, not 99"),
])
async def test_a_bad_first_message_is_refused_and_closed(served, first, says):
    reader, writer = await raw(served.paths)
    writer.write(first)
    refused = await read_line(reader)
    assert isinstance(refused, Refused) and says in refused.reason
    assert await read_line(reader) is None  # closed
    writer.close()


async def test_bad_lines_after_hello_get_an_error_and_never_a_crash(served):
    served.model.extend([say("fine")])
    reader, writer = await raw(served.paths)
    writer.write(encode(Hello(client="nc")))
    assert isinstance(await read_line(reader), Welcome)
    writer.write(b'{"type": "say", "request": 7}\n')  # no text
    writer.write(b'{"type": "dance", "request": 8}\n')  # a type this host does not know
    writer.write(encode(Say(request=9, text="   ")))
    for request in (7, 8, 9):
        done = await read_line(reader)
        assert isinstance(done, Done) and done.request == request and not done.ok
        assert done.error
    writer.write(b"[1, 2, 3]\n")  # no request to answer: this client is broken
    refused = await read_line(reader)
    assert isinstance(refused, Refused) and "not a message of this protocol" in refused.reason
    assert await read_line(reader) is None
    writer.close()

    reader, writer = await raw(served.paths)
    writer.write(encode(Hello()))
    assert isinstance(await read_line(reader), Welcome)
    writer.write(b"x" * (MAX_LINE + 10) + b"\n")
    refused = await read_line(reader)
    assert isinstance(refused, Refused) and "longer than" in refused.reason
    writer.close()

    after = await served.attach()  # the agent serves on
    await after.connection.send(Say(request=1, text="still working?"))
    assert text_of(await until(after.messages, is_idle)) == "fine"
    await after.connection.aclose()


async def test_stop_stops_the_cycle_for_every_client(served):
    served.model.token_delay_s = 0.02
    served.model.extend([say(ANSWER)])
    one, other = await served.attach("chat"), await served.attach("web")
    await one.connection.send(Say(request=1, text="talk"))
    await until(other.messages, lambda m: isinstance(m, TextDelta))
    await other.connection.send(Stop(request=2))
    seen = await until(other.messages, lambda m: isinstance(m, Done))  # sent once it stopped
    assert [m.outcome for m in seen if isinstance(m, CycleEnded)] == ["stopped"]
    assert [(m.request, m.ok) for m in seen if isinstance(m, Done)] == [(2, True)]
    await other.connection.send(Stop(request=3))
    nothing = await until(other.messages, lambda m: isinstance(m, Done))
    assert nothing[-1].request == 3 and not nothing[-1].ok and "nothing" in nothing[-1].error
    await one.connection.aclose()
    await other.connection.aclose()


def approval_config(tmp_path) -> Config:
    return Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
                  autonomy=AutonomySettings(tools={"file_write": "ask"}))


def write_call(name: str):
    return say("", call("file_write", path=name, content="yes\n"))


async def test_the_first_answer_from_any_client_settles_an_approval(tmp_path):
    model = ScriptedProvider([write_call("asked.txt"), say("written")])
    served = await serve(AgentPaths.for_agent("ana", tmp_path / "home"), approval_config(tmp_path),
                         model)
    try:
        chat, web = await served.attach("chat"), await served.attach("web")
        await chat.connection.send(Say(request=1, text="write it"))
        asked = (await until(web.messages, lambda m: isinstance(m, ApprovalAsked)))[-1]
        assert asked.tool == "file_write" and "asked.txt" in asked.arguments
        await web.connection.send(Answer(approval=asked.approval, allow=True))
        seen = await until(chat.messages, is_idle)
        settled = [m for m in seen if isinstance(m, ApprovalSettled)]
        assert [(s.approval, s.allowed, s.by) for s in settled] == [(asked.approval, True, "web")]
        assert text_of(seen) == "written"
        assert (tmp_path / "ws" / "asked.txt").read_text() == "yes\n"
        await chat.connection.send(Answer(approval=asked.approval, allow=False))  # too late
        late = await until(chat.messages, lambda m: isinstance(m, Notice))
        assert "no longer open" in late[-1].text
        # Asked as a request, an answer naming a question that is not open is
        # refused in its Done, and settles nothing.
        await chat.connection.send(Answer(request=7, approval=asked.approval + 1, allow=True))
        done = (await until(chat.messages, lambda m: isinstance(m, Done)))[-1]
        assert (done.request, done.ok) == (7, False)
        assert done.error == f"approval {asked.approval + 1} is no longer open"
        await chat.connection.aclose()
        await web.connection.aclose()
    finally:
        await shut(served)


async def test_with_nobody_attached_an_approval_is_refused_at_once(tmp_path):
    model = ScriptedProvider([write_call("unasked.txt"), say("I could not")])
    served = await serve(AgentPaths.for_agent("ana", tmp_path / "home"), approval_config(tmp_path),
                         model)
    try:
        served.app.agent.submit("write it", channel="email")  # as a channel would, unattended
        await asyncio.wait_for(served.app.agent.idle(), WAIT)
        results = [t for t in served.app.session.turns if t.kind.value == "tool_result"]
        assert len(results) == 1 and "no interface is attached" in results[0].content
        assert not (tmp_path / "ws" / "unasked.txt").exists()
    finally:
        await shut(served)


async def test_closing_the_host_says_goodbye_and_refuses_an_open_approval(tmp_path):
    model = ScriptedProvider([write_call("never.txt")])
    served = await serve(AgentPaths.for_agent("ana", tmp_path / "home"), approval_config(tmp_path),
                         model)
    try:
        chat = await served.attach("chat")
        await chat.connection.send(Say(request=1, text="write it"))
        await until(chat.messages, lambda m: isinstance(m, ApprovalAsked))
        await served.host.aclose()
        seen = await until(chat.messages, lambda m: isinstance(m, Goodbye))
        assert [(m.allowed, m.by) for m in seen if isinstance(m, ApprovalSettled)] == [
            (False, "stopped")]
        assert [m async for m in chat.messages] == []  # closed after the goodbye
        await asyncio.wait_for(served.app.agent.idle(), WAIT)
        finished = [t for t in served.app.session.turns if t.kind.value == "tool_result"]
        assert "stopped" in finished[-1].content and not (tmp_path / "ws" / "never.txt").exists()
        assert not socket_path(served.paths).exists()
        await chat.connection.aclose()
    finally:
        await served.app.aclose()


async def test_a_tool_finishing_is_shown_with_its_call(tmp_path):
    model = ScriptedProvider([say("", call("get_current_time", timezone="UTC")), say("noon")])
    served = await serve(AgentPaths.for_agent("ana", tmp_path / "home"), Config(), model)
    try:
        chat = await served.attach("chat")
        await chat.connection.send(Say(request=1, text="time?"))
        seen = await until(chat.messages, is_idle)
        finished = [m for m in seen if isinstance(m, ToolFinished)]
        assert [f.call.tool_name for f in finished] == ["get_current_time"]
        assert finished[0].result.kind == "tool_result" and not finished[0].result.error
        await chat.connection.aclose()
    finally:
        await shut(served)


async def test_the_status_says_which_sensor_is_silenced_or_crashed(served):
    now = __import__("time").time()
    served.app.pipeline.gate.stop(["clock"], 600, now)
    served.host.on_sensor_crash("scheduler", retry_in=60)  # as the hub reports a crash
    states = {s.channel: s for s in served.host.status().sensors}
    assert states["clock"].state == "silenced" and states["clock"].silenced_until >= now + 599
    assert states["scheduler"].state == "crashed, restarting in 60 s"
    assert states["scheduler.urgent"].state == "active"
    served.host.on_notice("the scheduler sensor failed (boom); retrying in 60 s")
    assert served.host.status().last_error.startswith("the scheduler sensor failed")


async def test_a_client_dropped_for_falling_behind_resumes_from_its_goodbye():
    host = Host("ana")
    connection = host.connect("web")
    await connection.send(Hello(client="web"))
    messages = connection.messages()
    assert isinstance(await anext(messages), Welcome)
    total = 4200  # more than a client may fall behind
    for n in range(total):
        host.on_notice(f"notice {n}")  # the client reads none of them meanwhile
    goodbye = await anext(messages)
    assert isinstance(goodbye, Goodbye) and "fell too far behind" in goodbye.reason
    assert [m async for m in messages] == [] and host.clients == 0
    with pytest.raises(ConnectionError):
        await connection.send(AskStatus(request=1))

    again = host.connect("web")
    await again.send(Hello(client="web", since=goodbye.seq))
    resumed = again.messages()
    assert (await anext(resumed)).complete
    texts = [(await anext(resumed)).text for _ in range(total - goodbye.seq)]
    assert texts == [f"notice {n}" for n in range(goodbye.seq, total)]
    assert goodbye.seq == 0  # everything it had not read is sent again, once
    await again.aclose()


async def test_a_socket_that_cannot_be_made_is_a_clear_error(tmp_path):
    host = Host("ana")
    with pytest.raises(CannotServe, match="cannot be made"):
        await host.serve(tmp_path / "no such folder" / "agent.sock")
