"""Which addresses the fetch may reach: every spelling of a host read as the
address it names, and every address judged after DNS resolution.

A page fetch must not become a way into the person's own network (a router's
admin page, a database on localhost, a cloud's metadata service), so the rule
is one question: is the address globally reachable? Python's `is_global`
(from the IANA special-purpose registries) answers it, and the few ranges its
table gets wrong or leaves out are refused by name (`NOT_GLOBAL`: IPv6
site-local, local-use NAT64, multicast, newer special ranges), and an IPv6
address outside 2000::/3, the one range the internet routes, is refused
whatever the table says. An IPv6 address that carries an IPv4 address
(mapped, translated, NAT64, 6to4, Teredo, IPv4-compatible) is judged by the
IPv4 address too. The person can open a range with
`[web] allow_ranges`; cloud metadata addresses stay closed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from ..tools.errors import ToolError, shorten

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[Sequence[IPAddress]]]

ALLOW_HINT = "the person can allow it with [web] allow_ranges"

# Cloud metadata services answer with credentials; never reachable, even
# inside an allowed range.
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack...
    "169.254.170.2",  # AWS ECS task credentials
    "100.100.100.200",  # Alibaba Cloud
    "fd00:ec2::254",  # AWS over IPv6
))
METADATA_NAMES = frozenset({
    "metadata", "metadata.google.internal", "metadata.goog", "instance-data",
    "instance-data.ec2.internal",
})

_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765/6145: ::ffff:0:a.b.c.d
# The only IPv6 unicast the internet routes (RFC 4291, IANA): anything else
# is local, reserved or unassigned, whatever Python's table says of it.
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")

# Ranges `is_global` calls global (in Python 3.11 and up to the version that
# fixed each) that are not reachable from the whole internet, with their words.
NOT_GLOBAL: tuple[tuple[Network, str], ...] = tuple(
    (ipaddress.ip_network(net), words) for net, words in (
        ("fec0::/10", "a site-local address"),  # RFC 3879: deprecated, still routed in sites
        ("64:ff9b:1::/48", "a local-use NAT64 address"),  # RFC 8215
        ("::/96", "an IPv4-compatible address"),  # RFC 4291: deprecated, never routed
        ("5f00::/16", "an SRv6 segment address"),  # RFC 9602
        ("3fff::/20", "a documentation address"),  # RFC 9637
        ("ff00::/8", "a multicast address"),  # is_global looks at the scope bits only
        ("224.0.0.0/4", "a multicast address"),  # is_global is True for most of it
        ("192.0.0.0/24", "an IETF protocol address"),  # 3.11 knows only parts of it
    ))
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
# What inet_aton would read as an IPv4 address: 1 to 4 parts, each decimal,
# octal (leading 0) or hexadecimal (0x), as in 2130706433, 0177.0.0.1, 0x7f.1.
_IPV4_SPELLING = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}$", re.I)


class Refused(ToolError):
    """The fetch would reach an address the person has not allowed."""


@dataclass(frozen=True, slots=True)
class Host:
    """A URL's host read for what it names: an address, or a name to resolve."""

    name: str  # lowercase, no brackets, zone or trailing dot; IDNA as ASCII
    address: IPAddress | None


def read_host(raw: str) -> Host:
    """The host as the network stack would take it, whatever its spelling."""
    text = unquote(raw).strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.split("%", 1)[0]  # an IPv6 zone ("fe80::1%eth0") is not part of the address
    text = text.rstrip(".")
    if not text:
        raise Refused(f"refused: {shorten(raw)!r} names no host")
    if ":" in text:
        try:
            return Host(text, ipaddress.IPv6Address(text))
        except ValueError:
            raise Refused(f"refused: {shorten(raw)!r} is not a valid IPv6 address") from None
    if _IPV4_SPELLING.match(text):
        try:
            packed = socket.inet_aton(text)
        except OSError:
            raise Refused(f"refused: {shorten(raw)!r} is not a valid IPv4 address") from None
        address = ipaddress.IPv4Address(packed)
        return Host(str(address), address)
    return Host(text, None)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 address carries, with the name of the scheme.

    Every form a stack, a translator or a tunnel reads as an IPv4 host:
    mapped (::ffff:a.b.c.d), translated (::ffff:0:a.b.c.d), NAT64 (well-known
    and local-use prefixes), 6to4, Teredo and the old IPv4-compatible form.
    """
    if ip.ipv4_mapped is not None:
        return "an IPv4-mapped address", ip.ipv4_mapped
    if ip in _IPV4_TRANSLATED:
        return "an IPv4-translated address", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return "a 6to4 address", ip.sixtofour
    if ip.teredo is not None:
        return "a Teredo address", ip.teredo[1]  # the client; the server is checked apart
    for prefix in _NAT64:
        if ip in prefix:
            return "a NAT64 address", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:
        return "an IPv4-compatible address", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _kind(ip: IPAddress) -> str | None:
    """An address that is not globally reachable, in words (None if no word fits).

    Only the words: whether the address is refused is `refusal`'s question."""
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if ip in _SHARED:
        return "a shared (carrier-grade NAT) address"
    if ip.is_reserved:  # before private: Python counts 240.0.0.0/4 as both
        return "a reserved address"
    if ip.is_private:
        return "a private address"
    return None


def refusal(ip: IPAddress, allowed: Sequence[Network] = ()) -> str | None:
    """Why the fetch may not reach `ip` ("… is a private address"), or None.

    Reachable means globally reachable: `is_global`, less `NOT_GLOBAL`; an
    address the person's `allowed` ranges hold passes (metadata never does).
    """
    if ip in METADATA_ADDRESSES:
        return f"{ip} is a cloud metadata address"
    if any(ip.version == net.version and ip in net for net in allowed):
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:  # the same host as its IPv4 address, judged as it
            why = refusal(ip.ipv4_mapped, allowed)
            return f"{ip} is an IPv4-mapped address of {why}" if why else None
        inner = embedded_ipv4(ip)
        if inner is not None:
            scheme, v4 = inner
            why = refusal(v4, allowed)
            if why is not None:
                return f"{ip} is {scheme} of {why}"
            if scheme == "a Teredo address":
                server = refusal(ip.teredo[0], allowed)  # the relay server too
                if server is not None:
                    return f"{ip} is {scheme} relayed by {server}"
    named = next((words for net, words in NOT_GLOBAL
                  if ip.version == net.version and ip in net), None)
    if named is None and isinstance(ip, ipaddress.IPv6Address) and embedded_ipv4(ip):
        # A way to a global IPv4 host, judged as that host: Python's own
        # table has called 2002::/16 private in some 3.11 releases, global in others.
        return None
    if named is None and ip.version == 6 and ip not in _GLOBAL_UNICAST and not ip.is_multicast:
        return f"{ip} is {_kind(ip) or 'an address outside the routed range (2000::/3)'}"
    if named is None and ip.is_global:
        return None
    if named is None or ip.is_unspecified or ip.is_loopback:  # ::1 is loopback first
        named = _kind(ip) or "a special-purpose address"
    return f"{ip} is {named}"


async def system_resolver(name: str, port: int) -> list[IPAddress]:
    """The addresses the operating system's resolver gives for `name`."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    found: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if ip not in found:
            found.append(ip)
    return found


@dataclass(frozen=True, slots=True)
class AddressGuard:
    """Resolves a host once and refuses it unless every address is allowed."""

    allowed: tuple[Network, ...] = ()
    resolver: Resolver = system_resolver

    def check_literal(self, host: Host) -> None:
        """Refuse a host whose spelling alone is refused (an address, a metadata name)."""
        if host.name in METADATA_NAMES:
            raise Refused(f"refused: {host.name} is a cloud metadata service")
        if host.name == "localhost" or host.name.endswith(".localhost"):
            self.check_address(ipaddress.ip_address("127.0.0.1"), via=host.name)
        if host.address is not None:
            self.check_address(host.address)

    def check_address(self, ip: IPAddress, via: str | None = None) -> None:
        why = refusal(ip, self.allowed)
        if why is None:
            return
        where = f"{via} resolves to {why}" if via else why
        hint = "" if ip in METADATA_ADDRESSES else f"; {ALLOW_HINT}"
        raise Refused(f"refused: {where}{hint}")

    async def resolve(self, raw_host: str, port: int) -> list[IPAddress]:
        """The checked addresses of a host; a Refused error if any is not allowed.

        Every address must pass, not just the first: the connection may go to
        any of them, and a name that mixes public and private answers is a trap.
        """
        host = read_host(raw_host)
        self.check_literal(host)
        if host.address is not None:
            return [host.address]
        try:
            found = list(await self.resolver(host.name, port))
        except (OSError, UnicodeError) as exc:
            raise ToolError(
                f"the name {shorten(host.name)} could not be resolved ({exc}); check the address"
            ) from None
        if not found:
            raise ToolError(f"the name {shorten(host.name)} has no address; check the address")
        for ip in found:
            self.check_address(ip, via=host.name)
        return found
