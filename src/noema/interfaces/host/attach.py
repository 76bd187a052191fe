"""Reaching a running agent over its socket, from another process.

`noema run` serves the attach protocol (`interfaces.protocol`) on a unix
socket in the agent's folder, `agent.sock`, readable and writable by its
owner only. `noema chat`, `noema status` and the web page connect here;
when nothing answers, no agent is running (or the one that runs does not
accept attachments, as an in-process chat of an older kind).

A unix socket's address holds at most 107 bytes, and an agent's folder may
be deeper than that. A longer path is reached through the folder's open
descriptor: `/proc/self/fd/N/agent.sock` names the same file in a few
bytes (Linux), so the folder itself can be anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

from ...paths import AgentPaths
from .protocol import (
    MAX_LINE,
    ClientMessage,
    Hello,
    ProtocolError,
    Refused,
    ServerMessage,
    Welcome,
    decode_server,
    encode,
)

SOCKET_NAME = "agent.sock"
MAX_ADDRESS = 100  # bytes; the kernel allows 107, a little room is kept
HANDSHAKE_TIMEOUT = 5.0  # seconds for the host to answer Hello


def socket_path(paths: AgentPaths) -> Path:
    """Where the agent's socket lives: in its own (owner-only) folder."""
    return paths.root / SOCKET_NAME


@contextlib.contextmanager
def unix_address(path: Path) -> Iterator[str]:
    """A name of `path` short enough for a unix socket address, valid inside
    the block: the path itself when it fits, else a name through an open
    descriptor of its folder."""
    text = os.fsencode(path)
    if len(text) <= MAX_ADDRESS:
        yield os.fsdecode(text)
        return
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)


class AgentNotRunning(ConnectionError):
    """Nothing answers on the agent's socket."""


class AttachRefused(ConnectionError):
    """The agent answered `Refused` (another protocol version, say)."""


class SocketConnection:
    """A client's attachment over the agent's socket (the `Connection` protocol)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 client: str) -> None:
        self.client = client
        self._reader = reader
        self._writer = writer

    async def send(self, message: ClientMessage) -> None:
        """Send a request; ConnectionError when the agent is gone."""
        if self._writer.is_closing():
            raise ConnectionError("the connection to the agent is closed")
        self._writer.write(encode(message))
        await self._writer.drain()

    async def messages(self) -> AsyncIterator[ServerMessage]:
        """The agent's messages in order; ends when the connection closes. A
        message type this version does not know is skipped."""
        while True:
            try:
                line = await self._reader.readline()
            except (ConnectionError, ValueError):  # reset, or a line past the limit
                return
            if not line:
                return
            try:
                message = decode_server(line)
            except ProtocolError:
                continue  # a line we cannot read tells us nothing; the next may
            if message is not None:
                yield message

    async def aclose(self) -> None:
        """Leave; the agent goes on."""
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()


async def connect_socket(path: Path, *, client: str) -> SocketConnection:
    """Connect to the agent's socket at `path`; the caller sends `Hello` first.

    Raises AgentNotRunning when no agent listens there.
    """
    try:
        with unix_address(path) as address:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(address)  # a unix socket connects at once or not at all
            except BaseException:
                sock.close()
                raise
    except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
        raise AgentNotRunning(f"no agent answers at {path}") from exc
    reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_LINE + 2)
    return SocketConnection(reader, writer, client)


@dataclass(frozen=True, slots=True)
class Attached:
    """An attachment after the handshake: the connection and the agent's welcome."""

    connection: SocketConnection
    welcome: Welcome
    messages: AsyncIterator[ServerMessage]  # what follows the welcome, in order


async def attach(paths: AgentPaths, *, client: str, since: int | None = None,
                 timeout: float = HANDSHAKE_TIMEOUT) -> Attached:
    """Connect to the agent and say `Hello`; AgentNotRunning when none answers,
    AttachRefused when it will not talk to us."""
    connection = await connect_socket(socket_path(paths), client=client)
    messages = connection.messages()
    try:
        await connection.send(Hello(client=client, since=since))
        first = await asyncio.wait_for(anext(messages, None), timeout)
    except (TimeoutError, ConnectionError) as exc:
        await connection.aclose()
        raise AgentNotRunning(f"the agent at {socket_path(paths)} did not answer") from exc
    if isinstance(first, Welcome):
        return Attached(connection, first, messages)
    await connection.aclose()
    if isinstance(first, Refused):
        raise AttachRefused(f"the agent refused the connection: {first.reason}")
    raise AgentNotRunning(f"the agent at {socket_path(paths)} did not answer")


async def reachable(paths: AgentPaths) -> bool:
    """Whether a running agent accepts attachments on its socket now."""
    try:
        attached = await attach(paths, client="probe")
    except ConnectionError:
        return False
    await attached.connection.aclose()
    return True


def lock_holder(paths: AgentPaths) -> int | None:
    """The process that last took the agent's lock, if it still lives (it
    may run the agent without a socket, as an in-process chat does)."""
    try:
        note = paths.lock_file.read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        return None
    if len(note) != 2 or note[0] != "pid" or not note[1].isdigit():
        return None
    pid = int(note[1])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid  # alive, someone else's: not ours to signal, but alive
    return pid if pid != os.getpid() else None
