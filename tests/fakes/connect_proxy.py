"""A tunnelling proxy on 127.0.0.1 (HTTP CONNECT and SOCKS5), for fetch tests.

It records what it was asked (`asked`: the request line and Host header of an
HTTP request, or the address of a SOCKS5 request) and dials through `route`,
which maps the address asked to the one really dialled, so a test can play a
public address while everything stays on this machine. An address not in
`route` is refused, and so is a request that is not a tunnel (a proxy asked
`GET http://name/` would resolve the name itself).
"""

from __future__ import annotations

import ipaddress
import selectors
import socket
import socketserver
import ssl
import threading


class TunnelProxy:
    """Use as a context manager; `url` is the proxy's address for `[web] proxy`."""

    def __init__(self, scheme: str = "http", login: tuple[str, str] | None = None,
                 refuse_ports: frozenset[int] = frozenset(),
                 tls: ssl.SSLContext | None = None) -> None:
        self.scheme = scheme  # "http", "https" (with `tls`, the proxy's own certificate) or "socks5"
        self.tls = tls
        self.login = login
        self.refuse_ports = refuse_ports
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

    def _connect(self, client: socket.socket) -> tuple[str, int] | None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                return None
            head += chunk
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        self.asked.append(lines[0])
        self.hosts += [line.split(":", 1)[1].strip() for line in lines[1:]
                       if line.lower().startswith("host:")]
        method, target, _ = lines[0].split(" ", 2)
        if method != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Only tunnels\r\nContent-Length: 0\r\n\r\n")
            return None
        host, _, port = target.rpartition(":")
        if self.login and not any(line.lower().startswith("proxy-authorization: basic ")
                                  for line in lines[1:]):
            client.sendall(b"HTTP/1.1 407 Login\r\nContent-Length: 0\r\n\r\n")
            return None
        return host, int(port)  # an IPv6 host stays bracketed: the route names it so

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
