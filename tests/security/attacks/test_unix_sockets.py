"""Network off means no connection to anything outside the sandbox, Unix
sockets included.

Canary servers listen on socket files in the roots (a writable workspace and
a read-only root, mode 0777), on one that appears while the command runs,
and on an abstract address; each records every connection or datagram it
gets. The verdict is the canaries' count, never the command's words: a
canary that heard anything is an escape. Meanwhile what a command needs
inside the sandbox (a socket pair, an asyncio loop, IPv4 on its own
loopback) keeps working.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from noema.security.sandbox import Layout, Output, bwrap_argv, run_process, sandbox_env
from noema.security.settings import RootSettings, ShellSettings

from ..world import BWRAP, World

pytestmark = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot create a sandbox here")

PY = "python3"  # the system's: the checkout's environment is not in the sandbox
_cwd_lock = threading.Lock()


class Canary:
    """A Unix socket that counts whoever reaches it."""

    def __init__(self, address: str | bytes, kind: int = socket.SOCK_STREAM) -> None:
        self.heard = 0
        self.sock = socket.socket(socket.AF_UNIX, kind)
        self.kind = kind
        if isinstance(address, bytes):
            self.sock.bind(address)  # abstract: b"\0name"
        else:
            folder, name = os.path.split(address)
            with _cwd_lock:  # a relative name: tmp paths can pass the 108-byte limit
                here = os.getcwd()
                os.chdir(folder)
                try:
                    self.sock.bind(name)
                finally:
                    os.chdir(here)
            os.chmod(address, 0o777)
        if kind == socket.SOCK_STREAM:
            self.sock.listen(16)
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                if self.kind == socket.SOCK_STREAM:
                    peer, _ = self.sock.accept()
                    peer.close()
                else:
                    self.sock.recv(4096)
            except (TimeoutError, OSError):
                continue
            self.heard += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def canaries() -> Iterator[list[Canary]]:
    made: list[Canary] = []
    yield made
    for canary in made:
        canary.close()


def _connect(name: str, kind: str = "SOCK_STREAM") -> str:
    """A command that tries to reach the socket `name` (a path, or an abstract
    name after an @) every way Python offers: connect, and sendto. A path is
    reached from its folder, by its own name: a whole temporary path can pass
    the 108 bytes a socket address holds."""
    if name.startswith("@"):
        address, enter = f"'\\0{name[1:]}'", ""
    else:
        folder, base = os.path.split(name)
        address, enter = repr(base), f"import os; os.chdir({folder!r})\n"
    return (
        f"{PY} -c \"import socket\n{enter}"
        f"for how in ('connect', 'sendto'):\n"
        f"  try:\n"
        f"    s = socket.socket(socket.AF_UNIX, socket.{kind} if how == 'connect' else socket.SOCK_DGRAM)\n"
        f"    s.connect({address}) if how == 'connect' else s.sendto(b'x', {address})\n"
        f"    print('REACHED', how)\n"
        f"  except OSError as e:\n"
        f"    print('refused', how, e)\n\""
    )


async def _shell(world: World, command: str) -> str:
    result = await world.call("shell_execute", command=command)
    assert not result.is_error, result.content
    return result.content


async def test_sockets_in_the_roots_stay_silent(world, canaries):
    """Stream and datagram sockets in the workspace and in a read-only root,
    whatever their mode, are out of reach of a command without the network."""
    shelf = world.base / "shelf"
    shelf.mkdir()
    world.extra_roots = (RootSettings(path=shelf, mode="read-only"),)
    places = [world.ws / "admin.sock", shelf / "auth.sock"]
    canaries += [Canary(str(p)) for p in places]
    canaries += [Canary(str(world.ws / "log.sock"), socket.SOCK_DGRAM)]
    for target in [*places, world.ws / "log.sock"]:
        said = await _shell(world, _connect(str(target)))
        assert said.count("Operation not permitted") == 2, said  # the filter's refusal
    await _shell(world, _connect(str(world.ws / "log.sock"), "SOCK_DGRAM"))
    # Tools that speak to sockets by other means than Python's.
    await _shell(world, "command -v socat >/dev/null && socat - UNIX-CONNECT:admin.sock </dev/null;"
                        " command -v nc >/dev/null && nc -U admin.sock </dev/null; true")
    assert [c.heard for c in canaries] == [0, 0, 0]


async def test_a_socket_made_while_the_command_runs_stays_silent(world, canaries):
    """A socket bound after the command started (no mask decided at the start
    can cover it) is unreachable too."""
    fifo = world.ws / "go.fifo"
    os.mkfifo(fifo)
    late = world.ws / "late.sock"

    def person() -> None:
        with open(fifo, "w") as go:  # blocks until the command is waiting on it
            canaries.append(Canary(str(late)))
            go.write("now\n")

    helper = threading.Thread(target=person, daemon=True)
    helper.start()
    content = await _shell(world, "cat go.fifo >/dev/null; test -S late.sock && echo SEEN; "
                                  + _connect(str(late)))
    helper.join(10)
    assert "SEEN" in content  # the socket was there to be tried
    assert content.count("Operation not permitted") == 2, content
    assert canaries and canaries[0].heard == 0


async def test_an_abstract_socket_stays_silent(world, canaries):
    name = f"noema-canary-{os.getpid()}-{id(world)}"
    canaries.append(Canary(b"\0" + name.encode()))
    content = await _shell(world, _connect("@" + name))
    assert content.count("Operation not permitted") == 2, content
    assert canaries[0].heard == 0


async def test_what_a_command_needs_inside_keeps_working(world):
    content = await _shell(world, (
        f"{PY} -c \"import socket, asyncio\n"
        "a, b = socket.socketpair(); a.send(b'ping'); print(b.recv(4).decode())\n"
        "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET); a.send(b'pong'); "
        "print(b.recv(4).decode())\n"
        "asyncio.run(asyncio.sleep(0)); print('loop')\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); print('inet')\""
    ))
    assert content.startswith("Exit code 0."), content
    assert content.split("\n", 1)[1].split() == ["ping", "pong", "loop", "inet"]


async def test_a_datagram_pair_cannot_be_aimed_elsewhere(world, canaries):
    """A datagram socket pair could name any socket in `sendto`: refused."""
    target = world.ws / "dgram.sock"
    canaries.append(Canary(str(target), socket.SOCK_DGRAM))
    content = await _shell(world, (
        f"cd {world.ws} && {PY} -c \"import socket\n"
        "try:\n"
        "  a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        f"  a.sendto(b'x', {target.name!r}); print('SENT')\n"
        "except OSError as e: print('refused', e)\""
    ))
    assert "refused [Errno 1] Operation not permitted" in content, content
    assert canaries[0].heard == 0


async def test_with_the_network_allowed_sockets_are_the_persons_choice(world, canaries):
    """The filter's socket rule is what network = false means; allowed, a
    command reaches the workspace's socket (and this test proves the canary
    can hear)."""
    canaries.append(Canary(str(world.ws / "open.sock")))
    world.build(shell=ShellSettings(network=True))
    content = await _shell(world, _connect(str(world.ws / "open.sock")))
    assert "REACHED connect" in content
    assert canaries[0].heard >= 1


async def test_the_namespace_alone_isolates_abstract_sockets_not_socket_files(tmp_path, canaries):
    """Why the filter is needed: without it, a new network namespace already
    keeps abstract addresses apart, but a socket file in a root answers."""
    ws = tmp_path / "ws"
    ws.mkdir()
    name = f"noema-ns-{os.getpid()}"
    canaries.append(Canary(b"\0" + name.encode()))
    canaries.append(Canary(str(ws / "file.sock")))
    for target in ("@" + name, str(ws / "file.sock")):
        command = ["/bin/sh", "-c", _connect(target)]
        finished = await run_process(
            bwrap_argv("bwrap", Layout(ws, (ws,)), command),
            cwd=ws, env=sandbox_env(), timeout_s=30, output=Output(10_000),
        )
        assert finished.exit_code == 0, finished.output
    assert canaries[0].heard == 0  # abstract: another namespace's
    assert canaries[1].heard >= 1  # a socket file: reached without the filter
