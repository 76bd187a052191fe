"""Through the person's proxy, to the address the fetch checked and nowhere else.

A proxy left to itself resolves the target's name again, and its answer may
not be the one checked here (a name that answers a public address to us and
a private one to the proxy). So the proxy is never given a name to reach: the
fetch resolves and checks the target itself, then

- for `https://`, asks the proxy for a tunnel to that address (HTTP
  `CONNECT 203.0.113.7:443`, `CONNECT [2001:db8::1]:443` with the IPv6
  literal bracketed, or a SOCKS5 request with the address as bytes); TLS and
  the `Host` header then go through the tunnel with the URL's name, exactly
  as on a direct connection;
- for plain `http://` through an HTTP(S) proxy, sends the request itself to
  the proxy in absolute form with the checked address
  (`GET http://203.0.113.7:80/page HTTP/1.1`, `Host:` the URL's name), as
  proxies expect plain HTTP: most refuse a tunnel to port 80 (Squid does by
  default). A SOCKS proxy has no such rule: plain HTTP goes through it as a
  connection to the checked address.

What this changes for the person: names are resolved on this machine, not
by the proxy. A proxy that routes plain HTTP by the `Host` header rather
than by the request's address would defeat the check; common ones (Squid,
tinyproxy, Privoxy) go by the address.
"""

from __future__ import annotations

import base64
import ipaddress
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import h11
import httpcore2
import httpx2

from ..tools.errors import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Connector = Callable[[IPAddress, int, "float | None"], Awaitable[httpcore2.AsyncNetworkStream]]

_SOCKS_REPLIES = {
    1: "general failure", 2: "not allowed by its rules", 3: "network unreachable",
    4: "host unreachable", 5: "connection refused", 6: "time to live expired",
    7: "command not supported", 8: "address type not supported",
}


@dataclass(frozen=True, slots=True)
class Proxy:
    """The proxy of `[web] proxy`, read once."""

    scheme: str  # "http", "https", "socks5" or "socks5h" (the same here: we never send names)
    host: str
    port: int
    username: str = ""
    password: str = ""

    @classmethod
    def parse(cls, url: str) -> Proxy:
        parts = urlsplit(url)
        defaults = {"http": 80, "https": 443, "socks5": 1080, "socks5h": 1080}
        if parts.scheme not in defaults or not parts.hostname:
            raise ValueError(f"not a proxy address: {parts.scheme}://…")
        return cls(parts.scheme, parts.hostname, parts.port or defaults[parts.scheme],
                   unquote(parts.username or ""), unquote(parts.password or ""))


def authority(ip: IPAddress, port: int) -> str:
    """`ip:port` as a request target: an IPv6 address in brackets."""
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


async def _to_proxy(proxy: Proxy, proxy_tls: ssl.SSLContext | None, timeout: float | None
                    ) -> httpcore2.AsyncNetworkStream:
    """A connection to the proxy itself, over TLS for an https:// proxy."""
    stream = await httpcore2.AnyIOBackend().connect_tcp(proxy.host, proxy.port, timeout=timeout)
    if proxy.scheme == "https":
        try:
            stream = await stream.start_tls(proxy_tls or ssl.create_default_context(),
                                            server_hostname=proxy.host, timeout=timeout)
        except BaseException:
            await stream.aclose()
            raise
    return stream


def tunnel_connector(proxy_url: str, proxy_tls: ssl.SSLContext | None = None) -> Connector:
    """A connector that reaches a checked address through the proxy at `proxy_url`."""
    proxy = Proxy.parse(proxy_url)

    async def connect(ip: IPAddress, port: int, timeout: float | None
                      ) -> httpcore2.AsyncNetworkStream:
        stream = await _to_proxy(proxy, proxy_tls, timeout)
        try:
            if proxy.scheme.startswith("socks5"):
                await _socks5(stream, proxy, ip, port, timeout)
            else:
                await _http_connect(stream, proxy, ip, port, timeout)
        except BaseException:
            await stream.aclose()
            raise
        return stream

    return connect


def forwards_plain_http(proxy_url: str) -> bool:
    """Whether plain http:// goes to this proxy as a proxy request (HTTP and
    HTTPS proxies) rather than through a connection it opens (SOCKS)."""
    return Proxy.parse(proxy_url).scheme in ("http", "https")


class _ProxyOnly(httpcore2.AsyncNetworkBackend):
    """A network backend whose every connection goes to the proxy."""

    def __init__(self, proxy: Proxy, proxy_tls: ssl.SSLContext | None) -> None:
        self._proxy = proxy
        self._tls = proxy_tls

    async def connect_tcp(self, host, port, timeout=None, local_address=None,
                          socket_options=None) -> httpcore2.AsyncNetworkStream:
        return await _to_proxy(self._proxy, self._tls, timeout)

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise ToolError("the fetch does not open local sockets")

    async def sleep(self, seconds: float) -> None:
        import anyio

        await anyio.sleep(seconds)


class ForwardTransport(httpx2.AsyncBaseTransport):
    """Plain http:// through an HTTP(S) proxy, as proxy requests to checked addresses.

    Each request's host is resolved and checked by `resolve` (the fetch's
    address guard) and the request goes to the proxy with the first checked
    address as its target; the `Host` header keeps the URL's name.
    """

    def __init__(self, proxy_url: str, resolve: Callable[[str, int], Awaitable[list]],
                 proxy_tls: ssl.SSLContext | None = None) -> None:
        proxy = Proxy.parse(proxy_url)
        self._resolve = resolve
        self._login: list[tuple[bytes, bytes]] = []
        if proxy.username or proxy.password:
            pair = base64.b64encode(f"{proxy.username}:{proxy.password}".encode())
            self._login = [(b"Proxy-Authorization", b"Basic " + pair)]
        self._inner = httpx2.AsyncHTTPTransport(trust_env=False)
        # As for the direct way: httpx cannot be given a network backend, so
        # its pool is replaced by one whose every connection is to the proxy.
        self._inner._pool = httpcore2.AsyncConnectionPool(
            max_connections=4, network_backend=_ProxyOnly(proxy, proxy_tls))

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.scheme != "http":  # https goes through a tunnel, never here
            raise ToolError(f"{url.scheme}:// is never sent as a proxy request")
        port = url.port or 80
        ip = (await self._resolve(url.raw_host.decode("ascii"), port))[0]
        target = f"http://{authority(ip, port)}{url.raw_path.decode('ascii')}".encode()
        sent = httpx2.Request(request.method, url, headers=[*request.headers.raw, *self._login],
                              stream=request.stream,
                              extensions={**request.extensions, "target": target})
        response = await self._inner.handle_async_request(sent)
        if response.status_code == 407:
            await response.aclose()
            raise ToolError("the proxy asks for a login, or refused the one given; the user "
                            "name and password go in [web] proxy (http://user:password@host:port)")
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _http_connect(stream: httpcore2.AsyncNetworkStream, proxy: Proxy, ip: IPAddress,
                        port: int, timeout: float | None) -> None:
    target = authority(ip, port)
    headers = [("Host", target)]
    if proxy.username or proxy.password:
        pair = f"{proxy.username}:{proxy.password}".encode()
        headers.append(("Proxy-Authorization", "Basic " + base64.b64encode(pair).decode()))
    conn = h11.Connection(h11.CLIENT)
    await stream.write(conn.send(h11.Request(method="CONNECT", target=target, headers=headers))
                       + conn.send(h11.EndOfMessage()), timeout)
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise ToolError(f"the proxy answered the tunnel request with garbage ({exc})"
                            ) from None
        if event is h11.NEED_DATA:
            data = await stream.read(4096, timeout)
            if not data:
                raise ToolError("the proxy closed the connection instead of opening a tunnel")
            conn.receive_data(data)
            continue
        if isinstance(event, h11.InformationalResponse):
            continue
        break
    if not isinstance(event, h11.Response) or not 200 <= event.status_code < 300:
        status = getattr(event, "status_code", "no answer")
        hint = ("; many proxies tunnel only to port 443, so a page on another port may "
                "need no proxy") if port != 443 else ""
        raise ToolError(f"the proxy refused a tunnel to {target} ({status}){hint}")
    if conn.trailing_data[0]:  # bytes from the far side before we spoke: not a clean tunnel
        raise ToolError("the proxy sent data before the tunnel was used; refusing it")


async def _exactly(stream: httpcore2.AsyncNetworkStream, count: int,
                   timeout: float | None) -> bytes:
    data = b""
    while len(data) < count:
        more = await stream.read(count - len(data), timeout)
        if not more:
            raise ToolError("the SOCKS proxy closed the connection during its handshake")
        data += more
    return data


async def _socks5(stream: httpcore2.AsyncNetworkStream, proxy: Proxy, ip: IPAddress,
                  port: int, timeout: float | None) -> None:
    """RFC 1928 CONNECT to an address (never a name), RFC 1929 login if configured."""
    login = bool(proxy.username or proxy.password)
    await stream.write(b"\x05\x02\x00\x02" if login else b"\x05\x01\x00", timeout)
    version, method = await _exactly(stream, 2, timeout)
    if version != 5 or method not in ((0, 2) if login else (0,)):
        raise ToolError("the SOCKS proxy accepts none of the ways to log in that are configured")
    if method == 2:
        user, password = proxy.username.encode(), proxy.password.encode()
        if len(user) > 255 or len(password) > 255:
            raise ToolError("the SOCKS proxy's user name and password must be at most 255 bytes")
        await stream.write(bytes([1, len(user)]) + user + bytes([len(password)]) + password,
                           timeout)
        if (await _exactly(stream, 2, timeout))[1] != 0:
            raise ToolError("the SOCKS proxy refused the user name and password")
    kind = b"\x01" if ip.version == 4 else b"\x04"
    await stream.write(b"\x05\x01\x00" + kind + ip.packed + port.to_bytes(2, "big"), timeout)
    version, reply, _, bound = await _exactly(stream, 4, timeout)
    if version != 5 or reply != 0:
        why = _SOCKS_REPLIES.get(reply, f"code {reply}")
        raise ToolError(f"the SOCKS proxy could not reach {authority(ip, port)}: {why}")
    rest = {1: 4, 4: 16}.get(bound)
    if rest is None:
        rest = (await _exactly(stream, 1, timeout))[0] if bound == 3 else None
    if rest is None:
        raise ToolError("the SOCKS proxy answered with an unknown address type")
    await _exactly(stream, rest + 2, timeout)  # the address it bound, and its port
