"""A proxy on 127.0.0.1 (HTTP CONNECT, HTTP proxy requests and SOCKS5), for fetch tests.

It records what it was asked (`asked`: the request line of an HTTP request,
or the address of a SOCKS5 request; `hosts`: the Host headers) and dials
through `route`, which maps the host asked to the address really dialled, so
a test can play a public address while everything stays on this machine. A
host not in `route` is refused (a name there would be the proxy resolving
it itself), and so is a tunnel to a port of `refuse_ports` (Squid tunnels
only to the ports of its SSL_ports list, 443 by default). A proxy request
(`GET http://203.0.113.7:80/page`) is passed on to the routed address in
origin form with its headers, as Squid does; `tunnels_only` makes the proxy
refuse it as some do.
"""

from __future__ import annotations

import ipaddress
import selectors
import socket
import socketserver
import ssl
import threading
from dataclasses import dataclass


class TunnelProxy:
    """Use as a context manager; `url` is the proxy's address for `[web] proxy`."""

    def __init__(self, scheme: str = "http", login: tuple[str, str] | None = None,
                 refuse_ports: frozenset[int] = frozenset(),
                 tls: ssl.SSLContext | None = None, tunnels_only: bool = False) -> None:
        self.scheme = scheme  # "http", "https" (with `tls`, the proxy's own certificate) or "socks5"
        self.tls = tls
        self.login = login
        self.refuse_ports = refuse_ports
        self.tunnels_only = tunnels_only
        self.route: dict[str, str] = {}
        self.asked: list[str] = []
        self.hosts: list[str] = []  # the Host header of each CONNECT
        self._server: socketserver.ThreadingTCPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.server_address[1]
        user = f"{self.login[0]}:{self.login[1]}@" if self.login else ""
        return f"{self.scheme}://{user}127.0.0.1:{port}"

    def __enter__(self) -> TunnelProxy:
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                try:
                    owner._serve(self.request)
                except OSError:
                    pass

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    # -- one client -------------------------------------------------------------------

    def _serve(self, client: socket.socket) -> None:
        client.settimeout(10)
        if self.tls is not None:
            client = self.tls.wrap_socket(client, server_side=True)
        if self.scheme == "socks5":
            target = self._socks(client)
        else:
            target = self._connect(client)
        if isinstance(target, _Forward):
            self._pass_on(client, target)
            return
        if target is None:
            return
        host, port = target
        dialled = self.route.get(host)
        if dialled is None or port in self.refuse_ports:
            self._answer(client, ok=False)
            return
        with socket.create_connection((dialled, port), timeout=10) as far:
            self._answer(client, ok=True)
            _pump(client, far)

    def _connect(self, client: socket.socket) -> tuple[str, int] | _Forward | None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                return None
            head += chunk
        head, rest = head.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.asked.append(lines[0])
        self.hosts += [line.split(":", 1)[1].strip() for line in lines[1:]
                       if line.lower().startswith("host:")]
        method, target, _ = lines[0].split(" ", 2)
        if self.login and not any(line.lower().startswith("proxy-authorization: basic ")
                                  for line in lines[1:]):
            client.sendall(b"HTTP/1.1 407 Login\r\nContent-Length: 0\r\n\r\n")
            return None
        if method != "CONNECT":
            if self.tunnels_only or not target.startswith("http://"):
                client.sendall(b"HTTP/1.1 405 Only tunnels\r\nContent-Length: 0\r\n\r\n")
                return None
            authority, slash, path = target[len("http://"):].partition("/")
            host, _, port = authority.rpartition(":")
            return _Forward(method, host, int(port), slash + path, lines[1:], rest)
        host, _, port = target.rpartition(":")
        return host, int(port)  # an IPv6 host stays bracketed: the route names it so

    def _pass_on(self, client: socket.socket, request: _Forward) -> None:
        """A proxy request, sent on in origin form to the routed address; the
        answer is relayed and the connection closed after it."""
        dialled = self.route.get(request.host)
        if dialled is None:
            self._answer(client, ok=False)
            return
        kept = [line for line in request.headers
                if line.split(":", 1)[0].strip().lower() not in ("proxy-authorization",
                                                                   "connection")]
        head = "\r\n".join([f"{request.method} {request.path} HTTP/1.1", *kept,
                             "Connection: close", "", ""])
        with socket.create_connection((dialled, request.port), timeout=10) as far:
            far.sendall(head.encode("latin-1") + request.body)
            while data := far.recv(65536):
                client.sendall(data)

    def _socks(self, client: socket.socket) -> tuple[str, int] | None:
        version, count = _exactly(client, 2)
        methods = _exactly(client, count)
        wanted = 2 if self.login else 0
        if version != 5 or wanted not in methods:
            client.sendall(b"\x05\xff")
            return None
        client.sendall(bytes([5, wanted]))
        if wanted == 2:
            _, size = _exactly(client, 2)
            user = _exactly(client, size)
            (size,) = _exactly(client, 1)
            password = _exactly(client, size)
            ok = (user.decode(), password.decode()) == self.login
            client.sendall(b"\x01\x00" if ok else b"\x01\x01")
            if not ok:
                return None
        _, command, _, kind = _exactly(client, 4)
        if kind == 1:
            host = str(ipaddress.IPv4Address(_exactly(client, 4)))
        elif kind == 4:
            host = f"[{ipaddress.IPv6Address(_exactly(client, 16))}]"
        else:  # a name: what a pinned fetch must never send
            host = _exactly(client, _exactly(client, 1)[0]).decode()
        port = int.from_bytes(_exactly(client, 2), "big")
        self.asked.append(f"SOCKS {host}:{port}")
        return host, port

    def _answer(self, client: socket.socket, ok: bool) -> None:
        if self.scheme == "socks5":
            client.sendall(bytes([5, 0 if ok else 2, 0, 1, 0, 0, 0, 0, 0, 0]))
        elif ok:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")


@dataclass(frozen=True)
class _Forward:
    """A proxy request: to whom, and what to pass on."""

    method: str
    host: str  # as asked: an IPv6 address stays bracketed
    port: int
    path: str
    headers: list[str]
    body: bytes  # what came after the head in the same read


def _exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        more = sock.recv(count - len(data))
        if not more:
            raise ConnectionError("closed")
        data += more
    return data


def _pump(a: socket.socket, b: socket.socket) -> None:
    if isinstance(a, ssl.SSLSocket):
        _pump_in_one_thread(a, b)
        return

    def copy(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    other = threading.Thread(target=copy, args=(b, a), daemon=True)
    other.start()
    copy(a, b)
    other.join(10)


def _pump_in_one_thread(a: ssl.SSLSocket, b: socket.socket) -> None:
    """Both directions from one thread: an SSL socket read in one thread while
    another writes to it breaks its records now and then (a ReadError at the
    client). Quiet for 10 s, the tunnel ends."""
    peers: dict[socket.socket, socket.socket] = {a: b, b: a}
    with selectors.DefaultSelector() as selector:
        for sock in peers:
            selector.register(sock, selectors.EVENT_READ)
        try:
            while True:
                # Records already decrypted wait in the SSL object, unseen by select.
                ready = [a] if a.pending() else [k.fileobj for k, _ in selector.select(10)]
                if not ready:
                    return
                for src in ready:
                    try:
                        data = src.recv(65536)
                    except ssl.SSLWantReadError:
                        continue  # part of a record: the rest comes with the next read
                    if not data:
                        return
                    peers[src].sendall(data)
        except OSError:
            pass
        finally:
            for sock in peers:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
