"""A guarded HTTP GET: no private address reached, redirects followed one by
one, a size cap enforced while the body streams in, timeouts everywhere.

Without a proxy there is no window between check and connect: the network
backend under httpx resolves the host once, refuses it unless every address
is allowed, connects to a checked address (the Host header and TLS name stay
the URL's), and checks the connected socket's peer before a byte is sent.
Every redirect goes through the same door, because each hop is a new request.

With a proxy the same holds: the name is resolved and checked here, and the
proxy is given the checked address, never the name: a tunnel to it for
https://, a proxy request to it for plain http:// (`tunnel.py`), so the
proxy's own resolver has no say in where the request goes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpcore2
import httpx2

from ..tools.errors import ToolError, shorten
from .addresses import AddressGuard, IPAddress, Refused, Resolver, read_host, system_resolver
from .settings import WebSettings
from .tunnel import ForwardTransport, forwards_plain_http, tunnel_connector
from .urls import check_authority, check_spelling

Connector = Callable[[IPAddress, int, "float | None"], Awaitable[httpcore2.AsyncNetworkStream]]
# Called with (from, to) before a redirect is followed; raises ToolError to stop it.
RedirectCheck = Callable[[str, str], None]

USER_AGENT = "Noema/0.1 (personal agent; page fetch)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Fetched:
    """A response body, at most the size cap, and what it claims to be."""

    url: str  # after redirects: the provenance of the text
    media_type: str  # lowercase, without parameters ("text/html")
    charset: str | None
    body: bytes
    truncated: bool  # the body was longer than the cap and was cut there


async def direct_connect(ip: IPAddress, port: int, timeout: float | None
                         ) -> httpcore2.AsyncNetworkStream:
    """A TCP connection to exactly `ip`, whose peer is checked before use."""
    stream = await httpcore2.AnyIOBackend().connect_tcp(str(ip), port, timeout=timeout)
    await verify_peer(stream, ip)
    return stream


async def verify_peer(stream: httpcore2.AsyncNetworkStream, expected: IPAddress) -> None:
    """Close the stream and refuse unless its socket is connected to `expected`."""
    sock = stream.get_extra_info("socket")
    peer = ipaddress.ip_address(str(sock.getpeername()[0]).split("%", 1)[0]) if sock else None
    if peer != expected:
        await stream.aclose()
        raise Refused(f"refused: the connection to {expected} reached {peer} instead")


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network backend that only connects to checked addresses."""

    def __init__(self, guard: AddressGuard, connect: Connector) -> None:
        self._guard = guard
        self._connect = connect

    async def connect_tcp(self, host, port, timeout=None, local_address=None,
                          socket_options=None) -> httpcore2.AsyncNetworkStream:
        addresses = await self._guard.resolve(host, port)
        failure: Exception | None = None
        for ip in addresses:  # all checked: any of them may take the connection
            try:
                return await self._connect(ip, port, timeout)
            except (OSError, httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise Refused("refused: the fetch does not open local sockets")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _transport(guard: AddressGuard, connect: Connector,
               verify: ssl.SSLContext | bool) -> httpx2.AsyncBaseTransport:
    transport = httpx2.AsyncHTTPTransport(trust_env=False, verify=verify)
    # httpx offers no way to choose the network backend of its pool, so the
    # pool is rebuilt with the same TLS context and the guarded backend.
    transport._pool = httpcore2.AsyncConnectionPool(
        ssl_context=transport._pool._ssl_context,
        max_connections=4,
        network_backend=GuardedBackend(guard, connect),
    )
    return transport


class Fetcher:
    """Fetches one URL at a time under the `[web]` limits."""

    def __init__(self, settings: WebSettings, *, resolver: Resolver = system_resolver,
                 connect: Connector = direct_connect, verify: ssl.SSLContext | bool = True
                 ) -> None:
        self.settings = settings
        self.guard = AddressGuard(settings.allowed_networks, resolver)
        self._forward: str | None = None  # the proxy that takes plain http:// as requests
        if settings.proxy and connect is direct_connect:  # the proxy is the way out
            # An https:// proxy is verified like the sites: the system's authorities,
            # or those a test brings.
            self._proxy_tls = verify if isinstance(verify, ssl.SSLContext) else None
            connect = tunnel_connector(settings.proxy, self._proxy_tls)
            if forwards_plain_http(settings.proxy):
                self._forward = settings.proxy
        self._connect = connect
        self._verify = verify  # the system's certificate authorities, unless a test brings its own

    async def fetch(self, url: str, accept: frozenset[str],
                    on_redirect: RedirectCheck | None = None) -> Fetched:
        """GET `url`, following redirects (each one past `on_redirect` first, when
        given); a ToolError names what went wrong."""
        s = self.settings
        timeout = httpx2.Timeout(s.read_timeout_s, connect=s.connect_timeout_s)
        mounts = {} if self._forward is None else {
            "http://": ForwardTransport(self._forward, self.guard.resolve, self._proxy_tls)}
        client = httpx2.AsyncClient(
            transport=_transport(self.guard, self._connect, self._verify), mounts=mounts,
            timeout=timeout, follow_redirects=False, trust_env=False,
            headers={"User-Agent": USER_AGENT},
        )
        try:
            async with asyncio.timeout(s.total_timeout_s), client:
                return await self._follow(client, url, accept, on_redirect)
        except TimeoutError:
            raise ToolError(
                f"fetching {shorten(url)} took longer than {s.total_timeout_s:g} s; try again later"
            ) from None
        except httpx2.TimeoutException as exc:
            what = "connecting" if isinstance(exc, httpx2.ConnectTimeout) else "waiting for data"
            raise ToolError(
                f"the server of {shorten(url)} timed out ({what}); try again later"
            ) from None
        except httpx2.TransportError as exc:
            reason = shorten(str(exc) or type(exc).__name__, 120, 40)
            raise ToolError(f"could not fetch {shorten(url)}: {reason}") from None

    async def _follow(self, client: httpx2.AsyncClient, url: str, accept: frozenset[str],
                      on_redirect: RedirectCheck | None) -> Fetched:
        current = await self._checked(url)
        for hop in range(self.settings.max_redirects + 1):
            response = await client.send(client.build_request("GET", current), stream=True)
            try:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    if hop == self.settings.max_redirects:
                        raise ToolError(
                            f"{shorten(url)} redirects more than {self.settings.max_redirects} "
                            "times; giving up"
                        )
                    location = response.headers["location"]
                    check_spelling(location, "the redirect to")  # before a join reads it
                    target = str(response.url.join(location))
                    if on_redirect is not None:
                        on_redirect(current, target)
                    current = await self._checked(target)
                    continue
                return await self._read(response, accept)
            finally:
                await response.aclose()
        raise AssertionError("unreachable: the loop returns or raises")

    async def _checked(self, url: str) -> str:
        """The URL to request, refused early if its host alone is refused.

        An address in any spelling (2130706433, 0x7f.1, [::ffff:7f00:1]) is
        rewritten in its plain form, so the request goes where the check looked.
        """
        check_authority(url)
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError:
            raise ToolError(f"{shorten(url)} is not a valid web address") from None
        if parts.scheme not in ("http", "https"):
            raise ToolError(
                f"{shorten(url)} is not an http:// or https:// address; only web pages can "
                "be fetched"
            )
        if not parts.hostname:
            raise ToolError(f"{shorten(url)} names no host")
        host = read_host(parts.hostname)
        self.guard.check_literal(host)
        checked = url.strip()
        if host.address is not None:
            literal = f"[{host.address}]" if host.address.version == 6 else str(host.address)
            netloc = literal + (f":{port}" if port is not None else "")
            checked = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        try:
            target = httpx2.URL(checked)  # the host as httpx will send it, if it differs
        except (httpx2.InvalidURL, ValueError):
            raise ToolError(f"{shorten(url)} is not a valid web address") from None
        self.guard.check_literal(read_host(target.raw_host.decode("ascii")))
        return checked

    async def _read(self, response: httpx2.Response, accept: frozenset[str]) -> Fetched:
        url = str(response.url)
        if response.status_code >= 400:
            raise ToolError(
                f"the server answered {response.status_code} {response.reason_phrase} for "
                f"{shorten(url)}"
            )
        header = response.headers.get("content-type", "")
        media = header.split(";", 1)[0].strip().lower()
        if media not in accept:
            shown = media or "no content type"
            raise ToolError(
                f"{shorten(url)} is {shorten(shown)}, which cannot be read as text; readable "
                "kinds are web pages, plain text, PDF, DOCX and ODT"
            )
        body, truncated = await read_capped(response, self.settings.max_bytes)
        charset = response.charset_encoding
        return Fetched(url, media, charset, body, truncated)


async def read_capped(response: httpx2.Response, cap: int) -> tuple[bytes, bool]:
    """At most `cap` bytes of the body, read as they arrive; the rest is never read."""
    body = bytearray()
    async for chunk in response.aiter_bytes(_CHUNK):
        room = cap - len(body)
        body += chunk[:room]
        if len(chunk) > room:
            return bytes(body), True
    return bytes(body), False
