"""`noema chat` over the real stack with a scripted model: running the agent
here, and attached to an agent another host serves on its socket."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

import pytest

from noema.app import build_app
from noema.config import Config
from noema.interfaces.host.attach import attach, socket_path
from noema.interfaces.terminal.chat import Terminal, open_chat
from noema.interfaces.host.protocol import Done, Say
from noema.memory.store import TurnStore
from noema.memory.turns import TurnKind
from noema.paths import AgentLock, AgentPaths
from noema.providers.scripted import ScriptedProvider, call, say
from tests.service.conftest import serve, shut, until

WAIT = 30.0  # seconds: generous, the machine is shared


class Screen(io.TextIOBase):
    """What the chat printed, with a way to wait for a piece of it."""

    def __init__(self) -> None:
        self.text = ""
        self._changed = asyncio.Event()

    def write(self, text: str) -> int:
        self.text += text
        self._changed.set()
        return len(text)

    def flush(self) -> None:
        pass

    async def shows(self, needle: str, after: int = 0) -> int:
        """Wait until `needle` appears after position `after`; where it ends."""
        async def look() -> int:
            while (at := self.text.find(needle, after)) < 0:
                self._changed.clear()
                await self._changed.wait()
            return at + len(needle)
        try:
            return await asyncio.wait_for(look(), WAIT)
        except TimeoutError:
            raise AssertionError(f"{needle!r} never shown; the screen:\n{self.text}") from None


class Keyboard:
    """The chat's stdin: a real pipe, typed into line by line."""

    def __init__(self) -> None:
        read, write = os.pipe()
        self.stdin = os.fdopen(read, "r")
        self._keys = os.fdopen(write, "w")

    def type(self, line: str) -> None:
        self._keys.write(line + "\n")
        self._keys.flush()

    def close(self) -> None:
        if not self._keys.closed:
            self._keys.close()


@pytest.fixture
def keyboard():
    k = Keyboard()
    yield k
    k.close()


def banner(app, pid):
    return "BANNER: running here" if app is not None else f"BANNER: attached to pid {pid}"


async def test_a_chat_that_runs_the_agent_here(tmp_path: Path, keyboard: Keyboard):
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    model = ScriptedProvider([say("Let me check.", call("get_current_time", timezone="UTC")),
                              say("It is **daytime** somewhere."),
                              say("Hello, browser.")], token_delay_s=0.001)
    screen = Screen()
    chatting = asyncio.create_task(open_chat(
        paths, build=lambda host: build_app(paths, Config(), provider=model, listener=host),
        banner=banner, terminal=Terminal(keyboard.stdin, screen, plain=True)))

    at = await screen.shows("BANNER: running here\n")
    at = await screen.shows("you> ", at)
    keyboard.type("what time is it?")
    at = await screen.shows('  · get_current_time({"timezone": "UTC"})', at)
    at = await screen.shows("noema> It is **daytime** somewhere.\n", at)  # plain: as written
    at = await screen.shows("you> ", at)

    # Others can attach while it runs: what they say is shown with its channel.
    other = await attach(paths, client="web")
    try:
        stream = other.messages
        await other.connection.send(Say(request=1, text="hi from the browser"))
        await until(stream, lambda m: isinstance(m, Done))
        at = await screen.shows("[web] hi from the browser\n", at)
        at = await screen.shows("noema> Hello, browser.\n", at)
    finally:
        await other.connection.aclose()

    keyboard.type("/status")
    at = await screen.shows("context: about ", at)
    keyboard.type("/quit")
    await asyncio.wait_for(chatting, WAIT)

    # Leaving stopped the agent: its socket is gone and its lock is free.
    assert not socket_path(paths).exists()
    AgentLock(paths).release()
    assert "Traceback" not in screen.text


async def test_a_chat_attached_to_a_running_agent_leaves_it_running(tmp_path: Path,
                                                                    keyboard: Keyboard):
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    model = ScriptedProvider([say("Attached and answering.")], token_delay_s=0.001)
    served = await serve(paths, Config(), model)
    try:
        def build(host):
            raise AssertionError("an agent runs already: the chat must not build another")

        screen = Screen()
        chatting = asyncio.create_task(open_chat(
            paths, build=build, banner=banner,
            terminal=Terminal(keyboard.stdin, screen, plain=True)))
        at = await screen.shows(f"BANNER: attached to pid {os.getpid()}\n")
        at = await screen.shows("you> ", at)
        keyboard.type("are you there?")
        at = await screen.shows("noema> Attached and answering.\n", at)
        keyboard.type("/quit")
        await asyncio.wait_for(chatting, WAIT)

        # The agent goes on: it still answers on its socket.
        again = await served.attach("test")
        try:
            assert served.host.status().session_turns >= 2
        finally:
            await again.connection.aclose()
        assert socket_path(paths).exists()
    finally:
        await shut(served)
    assert "Traceback" not in screen.text


async def test_a_chat_whose_agent_stops_says_so_and_ends(tmp_path: Path, keyboard: Keyboard):
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    served = await serve(paths, Config(), ScriptedProvider([], token_delay_s=0.001))
    stopped = False
    try:
        screen = Screen()
        chatting = asyncio.create_task(open_chat(
            paths, build=lambda host: None, banner=banner,
            terminal=Terminal(keyboard.stdin, screen, plain=True)))
        await screen.shows("you> ")
        await shut(served)
        stopped = True
        await screen.shows("* the agent is leaving: the agent is stopping")
        await asyncio.wait_for(chatting, WAIT)
    finally:
        if not stopped:
            await shut(served)


async def test_lines_from_a_script_are_answered_one_after_the_other(tmp_path: Path,
                                                                    keyboard: Keyboard):
    # `printf 'a\nb\n' | noema chat`: both lines are in the pipe before the
    # first answer starts. A person's second message would cut the first
    # answer short; a script's waits for it, and the end of the input waits
    # for the last answer.
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    slow = " ".join(f"word{i}" for i in range(40))
    model = ScriptedProvider([say(f"First: {slow}."), say(f"Second: {slow}.")],
                             token_delay_s=0.01)
    keyboard.type("the first question")
    keyboard.type("the second question")
    keyboard.close()
    screen = Screen()
    chatting = asyncio.create_task(open_chat(
        paths, build=lambda host: build_app(paths, Config(), provider=model, listener=host),
        banner=banner, terminal=Terminal(keyboard.stdin, screen, plain=True, scripted=True)))
    await asyncio.wait_for(chatting, WAIT)

    shown = screen.text
    assert f"you> the first question\nnoema> First: {slow}.\n" in shown
    assert f"you> the second question\nnoema> Second: {slow}.\n" in shown
    assert shown.endswith("you> \n")  # the last prompt, ended for the shell that follows
    assert "interrupted" not in shown and "Traceback" not in shown
    assert not socket_path(paths).exists()  # it left by itself, the agent stopped
    AgentLock(paths).release()


async def test_yes_piped_before_the_question_is_a_message_and_approves_nothing(
        tmp_path: Path, keyboard: Keyboard):
    # `printf 'write the proof file\nyes\n' | noema chat`: the "yes" was in
    # the pipe before the question was drawn. It is the person's message
    # (stored, answered), never the answer that runs the command.
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = ScriptedProvider([say("", call("shell_execute", command="echo ran > proof.txt")),
                              say("I read your yes."), say("Nothing more.")],
                             token_delay_s=0.001)
    keyboard.type("write the proof file")
    keyboard.type("yes")
    keyboard.close()
    screen = Screen()
    config = Config.model_validate({"files": {"roots": [{"path": str(workspace)}]}})
    chatting = asyncio.create_task(open_chat(
        paths, build=lambda host: build_app(paths, config, provider=model, listener=host),
        banner=banner, terminal=Terminal(keyboard.stdin, screen, plain=True, scripted=True)))
    await asyncio.wait_for(chatting, WAIT)

    shown = screen.text
    assert "shell_execute needs your approval" in shown
    assert not (workspace / "proof.txt").exists()  # nothing approved it
    store = TurnStore(paths.turns_db)
    try:
        said = [t.content for t in store.range(1, 10_000) if t.kind is TurnKind.USER]
    finally:
        store.close()
    assert said.count("yes") == 1 and said.count("write the proof file") == 1
    assert "Traceback" not in shown
    AgentLock(paths).release()
