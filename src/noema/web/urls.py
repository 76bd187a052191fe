"""Web addresses compared as they go on the wire, and found in text.

Two spellings of an address are the same address when the request they make
is the same: the scheme and host in any case, the host in Unicode or as
punycode, the default port written or not, the fragment (never sent) present
or not, characters the client would percent-encode written raw or encoded.
The path and the query are otherwise compared byte for byte, as the client
sends them: `%2f` and `%2F` differ, and so do `?a=1&b=2` and `?b=2&a=1`. A
difference there only means a question to the person, never a way past one.

The parser is httpx's own, the one the fetch sends with, so the host judged
here is the host the request goes to (`https://a.example\\@b.example/` is
b.example to both).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..tools.errors import ToolError, shorten
from .addresses import Refused, read_host

_DEFAULT_PORTS = {"http": 80, "https": 443}

# An address in running text stops at whitespace, quotes, angle brackets,
# the datamark that stands for a space in outside text, and envelope brackets.
_IN_TEXT = re.compile(r"""https?://[^\s"'<>`ˆ⟦⟧]+""", re.I)
# Punctuation that usually ends the sentence around an address, not the address.
_TRAILING = ".,;:!?)]}'\"*_"
# A name the person wrote without a scheme, as people do: www.example.org.
_BARE_WWW = re.compile(r"(?<![\w.@/-])www\.(?:[a-z0-9-]+\.)+[a-z]{2,63}\b", re.I)


@dataclass(frozen=True, slots=True)
class Address:
    """One http(s) address, read as the client will send it."""

    scheme: str  # "http" or "https"
    host: str  # lowercase ASCII (punycode), no trailing dot; an IP address in its plain form
    port: int  # the default port of the scheme when none is written
    userinfo: str  # "user:password" before the host, as sent; usually empty
    path: str  # as sent, at least "/"
    query: str  # as sent, without the "?"; empty when there is none

    @property
    def key(self) -> str:
        """The address as one string: equal keys, equal requests."""
        port = "" if _DEFAULT_PORTS[self.scheme] == self.port else f":{self.port}"
        user = f"{self.userinfo}@" if self.userinfo else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = f"?{self.query}" if self.query else ""
        return f"{self.scheme}://{user}{host}{port}{self.path}{query}"


class BadAddress(ToolError):
    """An address whose spelling parsers read differently: refused, never guessed at."""


_SCHEME = re.compile(r"^(https?)://", re.I)
_PORT = re.compile(r"^[0-9]{1,5}$")


def check_spelling(text: str, what: str = "the address") -> None:
    """Refuse a URL or redirect target that parsers would not read alike.

    A backslash before the query is a '/' to a browser and to some servers
    (`/\\127.0.0.1/` is then a link to another host) and a plain character
    to others; a tab or a line break is dropped by some and kept by others.
    Either way the request could go where the check did not look.
    """
    head = re.split(r"[?#]", text, maxsplit=1)[0]
    if "\\" in head:
        raise BadAddress(f"{what} {shorten(text)!r} has a backslash, which one client reads "
                         "as '/' and another as a character; write it with '/' only")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise BadAddress(f"{what} {shorten(text)!r} has a control character (a tab or a "
                         "line break); percent-encode it")


def check_authority(text: str) -> None:
    """Refuse an absolute http(s) URL whose authority is malformed or deceptive.

    The authority must be a host, optionally `:port` with a port from 1 to
    65535; an empty host, port 0 and a user name or password before '@' are
    refused (`https://bank.example@evil.example/` goes to evil.example).
    """
    text = text.strip()
    check_spelling(text)
    scheme = _SCHEME.match(text)
    if scheme is None:
        raise BadAddress(f"{shorten(text)} is not an http:// or https:// address; only web "
                         "pages can be fetched")
    authority = re.split(r"[/?#]", text[scheme.end():], maxsplit=1)[0]
    if "@" in authority:
        raise BadAddress(f"{shorten(text)} has a user name or password before '@'; the fetch "
                         "sends none, and such an address hides its real host: write the "
                         "address without it")
    if authority.startswith("["):
        host, bracket, rest = authority[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise BadAddress(f"{shorten(text)} has a malformed IPv6 address in brackets")
        port = rest[1:] if rest else None
    else:
        host, colon, port = authority.partition(":")
        port = port if colon else None
    if not host:
        raise BadAddress(f"{shorten(text)} names no host")
    if " " in authority:
        raise BadAddress(f"{shorten(text)!r} has a space in its host, which no host name has")
    if port is not None and port != "":  # an empty port means the default one
        if not _PORT.match(port) or not 1 <= int(port) <= 65535:
            raise BadAddress(f"{shorten(text)} has port {shorten(port, 20)!r}; a port is a "
                             "number from 1 to 65535")


def read_address(text: str) -> Address | None:
    """`text` as an http(s) address, or None if it is not one the fetch could send."""
    import httpx2  # not at start: an idle agent need not hold an HTTP client

    try:
        url = httpx2.URL(text.strip())
        raw_host = url.raw_host.decode("ascii")
    except (httpx2.InvalidURL, ValueError, UnicodeError):
        return None
    if url.scheme not in _DEFAULT_PORTS or not raw_host:
        return None
    raw_path = url.raw_path.decode("ascii")
    path = raw_path.split("?", 1)[0] or "/"
    return Address(
        scheme=url.scheme, host=host_key(raw_host), port=url.port or _DEFAULT_PORTS[url.scheme],
        userinfo=url.userinfo.decode("ascii"), path=path, query=url.query.decode("ascii"),
    )


def host_key(raw: str) -> str:
    """A host as compared here: lowercase, no trailing dot, an address in its plain form.

    A host with a percent sign is kept as written: decoding it would judge a
    name other than the one the client looks up.
    """
    name = raw.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if "%" in name or not name:
        return name
    try:
        found = read_host(name)
    except Refused:  # a garbled address spelling: compared as written
        return name
    return str(found.address) if found.address is not None else found.name


def addresses_in(text: str) -> set[str]:
    """The keys of every http(s) address written in `text`.

    Where punctuation ends an address, the address with and without it is
    kept: both were written there, and only one was meant.
    """
    found: set[str] = set()
    for match in _IN_TEXT.finditer(text):
        candidate = match.group(0)
        while candidate:
            address = read_address(candidate)
            if address is not None:
                found.add(address.key)
            if candidate[-1] not in _TRAILING:
                break
            candidate = candidate[:-1]
    return found


def hosts_named_in(text: str) -> set[str]:
    """Hosts written in `text`: those of its http(s) addresses and bare www. names."""
    hosts = {a.host for a in map(read_address, addresses_in(text)) if a is not None}
    hosts.update(host_key(match.group(0)) for match in _BARE_WWW.finditer(text))
    return hosts
