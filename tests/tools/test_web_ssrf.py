"""The fetch never reaches a private address: not by name, not by redirect,
not by any spelling, not by a DNS answer that changes after the check.

No range is allowed here. The one real server listens on 127.0.0.1; tests
that need a "public" host resolve a public-looking name through a resolver
they control and connect through a connector that maps that public address
to the loopback server, so nothing ever leaves the machine.
"""

from __future__ import annotations

import ipaddress
import json
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.perception.untrusted import SessionDelimiter
from noema.providers.base import ToolCall
from noema.tools.errors import ToolError
from noema.tools.registry import ToolContext, ToolRegistry
from noema.web import WebSettings
from noema.web.tools import web_tools
from noema.web.addresses import AddressGuard, Refused, read_host, refusal
from noema.web.fetch import Fetcher, direct_connect, verify_peer
from tests.fakes.connect_proxy import TunnelProxy
from tests.fakes.web_server import ARTICLE, WebServer, page, redirect, tls_contexts

PUBLIC = ipaddress.ip_address("93.184.215.14")  # looks public; never contacted


class Resolver:
    """DNS under the test's control: each name answers from a list, in turn."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def __call__(self, name: str, port: int):
        self.asked.append(name)
        replies = self.answers.get(name)
        if not replies:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        reply = replies.pop(0) if len(replies) > 1 else replies[0]
        return [ipaddress.ip_address(a) for a in reply]


class Connector:
    """Connects the public-looking address to the loopback server, and records
    every address it was asked to connect to."""

    def __init__(self) -> None:
        self.dialled: list[str] = []

    async def __call__(self, ip, port, timeout):
        import httpcore2

        self.dialled.append(str(ip))
        if ip != PUBLIC:
            raise AssertionError(f"the fetch tried to connect to {ip}")
        return await httpcore2.AnyIOBackend().connect_tcp("127.0.0.1", port, timeout=timeout)


@pytest.fixture(scope="module")
def web():
    with WebServer() as server:
        server.routes.update({
            ("GET", "/article.html"): page("text/html", ARTICLE),
            ("GET", "/to-loopback"): redirect("http://127.0.0.1/admin"),
            ("GET", "/to-metadata"): redirect("http://169.254.169.254/latest/meta-data/", 301),
            ("GET", "/to-decimal"): redirect("http://2130706433/"),
            ("GET", "/to-private-name"): redirect("/article.html"),
            ("GET", "/to-slash-backslash"): redirect("/\\127.0.0.1/admin"),
            ("GET", "/to-backslashes"): redirect("\\\\127.0.0.1/admin"),
            ("GET", "/to-userinfo"): redirect("http://news.example.org@127.0.0.1/admin"),
            ("GET", "/to-port-zero"): redirect("http://news.example.org:0/admin"),
        })
        yield server


def tools(resolver=None, connector=None) -> ToolRegistry:
    resolver = resolver or Resolver({})
    connector = connector or Connector()
    made = web_tools(WebSettings(), {}, SessionDelimiter("0123456789ab"),
                     resolver=resolver, connect=connector)
    return ToolRegistry(made)


async def fetch(reg: ToolRegistry, url: str):
    call = ToolCall("c1", "web_get_content", json.dumps({"url": url}))
    return await reg.call(call, ToolContext("c1", 1, 1))


async def assert_refused(url: str, why: str, **kw) -> str:
    result = await fetch(tools(**kw), url)
    assert result.is_error, result.content
    assert result.content.startswith("Error: refused: "), result.content
    assert why in result.content, result.content
    return result.content


@pytest.mark.parametrize("url, why", [
    ("http://127.0.0.1/", "127.0.0.1 is a loopback address"),
    ("http://127.0.0.1:8080/admin", "127.0.0.1 is a loopback address"),
    ("http://10.0.0.5/", "10.0.0.5 is a private address"),
    ("http://172.16.3.4/", "172.16.3.4 is a private address"),
    ("http://192.168.1.1/", "192.168.1.1 is a private address"),
    ("http://169.254.10.1/", "169.254.10.1 is a link-local address"),
    ("http://100.64.1.2/", "100.64.1.2 is a shared (carrier-grade NAT) address"),
    ("http://224.0.0.251/", "224.0.0.251 is a multicast address"),
    ("http://240.0.0.1/", "240.0.0.1 is a reserved address"),
    ("http://0.0.0.0/", "0.0.0.0 is an unspecified address"),
    ("http://0/", "0.0.0.0 is an unspecified address"),
    ("http://[::]/", ":: is an unspecified address"),
    ("http://[::1]:8000/", "::1 is a loopback address"),
    ("http://[fe80::1%25eth0]/", "fe80::1 is a link-local address"),
    ("http://[fd12:3456::1]/", "fd12:3456::1 is a private address"),
    ("http://[ff02::1]/", "ff02::1 is a multicast address"),
    # Other spellings of 127.0.0.1: decimal, octal, hex, short, trailing dot, percent-encoded.
    ("http://2130706433/", "127.0.0.1 is a loopback address"),
    ("http://0177.0.0.1/", "127.0.0.1 is a loopback address"),
    ("http://0x7f.1/", "127.0.0.1 is a loopback address"),
    ("http://0x7f000001/", "127.0.0.1 is a loopback address"),
    ("http://127.1/", "127.0.0.1 is a loopback address"),
    ("http://127.0.0.1./", "127.0.0.1 is a loopback address"),
    ("http://%31%32%37.0.0.1/", "127.0.0.1 is a loopback address"),
    ("http://012.0.0.5/", "10.0.0.5 is a private address"),
    # IPv6 forms that carry a private IPv4 address.
    ("http://[::ffff:127.0.0.1]/", "is an IPv4-mapped address of 127.0.0.1 is a loopback"),
    ("http://[::ffff:7f00:1]/", "is an IPv4-mapped address of 127.0.0.1"),
    ("http://[::ffff:10.0.0.5]/", "of 10.0.0.5 is a private address"),
    ("http://[::10.0.0.5]/", "is an IPv4-compatible address of 10.0.0.5"),
    ("http://[2002:a00:5::1]/", "is a 6to4 address of 10.0.0.5"),
    ("http://[64:ff9b::a00:5]/", "is a NAT64 address of 10.0.0.5"),
    ("http://[64:ff9b::127.0.0.1]/", "is a NAT64 address of 127.0.0.1"),
    ("http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/", "is a Teredo address of 10.0.0.1"),
    ("http://[::ffff:0:7f00:1]/", "is an IPv4-translated address of 127.0.0.1 is a loopback"),
    ("http://[::ffff:0:10.0.0.5]/", "is an IPv4-translated address of 10.0.0.5"),
    ("http://[64:ff9b:1::7f00:1]/", "is a NAT64 address of 127.0.0.1"),
    ("http://[2002:7f00:1::1]/", "is a 6to4 address of 127.0.0.1"),
    # IPv6 outside the one range the internet routes, whatever Python's table says.
    ("http://[::ffff:0:0:0:1]/", "is a reserved address"),
    ("http://[100::1]/", "is a reserved address"),
    ("http://[4000::1]/", "is a reserved address"),
    # Cloud metadata, by address and by name.
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address"),
    ("http://[fd00:ec2::254]/", "fd00:ec2::254 is a cloud metadata address"),
    ("http://metadata.google.internal/computeMetadata/v1/", "is a cloud metadata service"),
    ("http://localhost:9000/", "localhost resolves to 127.0.0.1 is a loopback address"),
])
async def test_addresses_in_every_spelling_are_refused(url, why):
    connector = Connector()
    message = await assert_refused(url, why, connector=connector)
    assert connector.dialled == []
    if "metadata" not in why:
        assert "the person can allow it with [web] allow_ranges" in message


@pytest.mark.parametrize("answer, why", [
    (["127.0.0.1"], "intranet.example.com resolves to 127.0.0.1 is a loopback address"),
    (["10.1.2.3"], "resolves to 10.1.2.3 is a private address"),
    (["::1"], "resolves to ::1 is a loopback address"),
    (["::ffff:192.168.0.1"], "IPv4-mapped address of 192.168.0.1"),
    (["169.254.169.254"], "169.254.169.254 is a cloud metadata address"),
    (["0.0.0.0"], "0.0.0.0 is an unspecified address"),
    ([str(PUBLIC), "10.0.0.7"], "resolves to 10.0.0.7 is a private address"),  # any one bad
])
async def test_names_that_resolve_to_refused_addresses_are_refused(answer, why):
    resolver = Resolver({"intranet.example.com": [answer]})
    connector = Connector()
    await assert_refused("http://intranet.example.com./page", why, resolver=resolver,
                         connector=connector)
    assert connector.dialled == []


async def test_a_public_name_is_fetched_through_the_checked_address(web):
    resolver = Resolver({"news.example.org": [[str(PUBLIC)]]})
    connector = Connector()
    result = await fetch(tools(resolver, connector), web.url("/article.html", "news.example.org"))
    assert not result.is_error, result.content
    assert "fourˆmetres" in result.content
    assert connector.dialled == [str(PUBLIC)]
    method, path, headers, _ = web.requests[-1]
    assert headers["Host"] == f"news.example.org:{web.port}"  # the name, not the address


@pytest.mark.parametrize("path, why", [
    ("/to-loopback", "127.0.0.1 is a loopback address"),
    ("/to-metadata", "169.254.169.254 is a cloud metadata address"),
    ("/to-decimal", "127.0.0.1 is a loopback address"),
])
async def test_redirects_to_refused_addresses_are_refused(web, path, why):
    resolver = Resolver({"news.example.org": [[str(PUBLIC)]]})
    connector = Connector()
    await assert_refused(web.url(path, "news.example.org"), why, resolver=resolver,
                         connector=connector)
    assert connector.dialled == [str(PUBLIC)]  # only the first hop was dialled


@pytest.mark.parametrize("url, why", [
    ("http://news.example.org\\@127.0.0.1/", "has a backslash"),
    ("http://127.0.0.1\\.news.example.org/", "has a backslash"),
    ("http:\\\\127.0.0.1/", "has a backslash"),
    ("http://news.example.org/a\\b", "has a backslash"),
    ("http://news.example.org:0/", "has port '0'; a port is a number from 1 to 65535"),
    ("http://news.example.org:+80/", "has port '+80'"),
    ("http://news.example.org:99999/", "has port '99999'"),
    ("http://news.example.org@127.0.0.1/", "has a user name or password before '@'"),
    ("http://user:secret@news.example.org/", "has a user name or password before '@'"),
    ("http:///etc/passwd", "names no host"),
    ("http://:8080/", "names no host"),
    ("http://[]/", "names no host"),
    ("http://[::1]x/", "malformed IPv6 address"),
    ("http://news.example .org/", "has a space in its host"),
    ("http://news.example.org/\tadmin", "has a control character"),
])
async def test_malformed_authorities_are_refused_with_their_reason(url, why):
    resolver = Resolver({"news.example.org": [[str(PUBLIC)]]})
    connector = Connector()
    result = await fetch(tools(resolver, connector), url)
    assert result.is_error and why in result.content, result.content
    assert resolver.asked == [] and connector.dialled == []


@pytest.mark.parametrize("path, why", [
    ("/to-slash-backslash", "the redirect to '/\\\\127.0.0.1/admin' has a backslash"),
    ("/to-backslashes", "has a backslash"),
    ("/to-userinfo", "has a user name or password before '@'"),
    ("/to-port-zero", "has port '0'"),
])
async def test_a_redirect_spelled_to_be_read_two_ways_is_refused(web, path, why):
    resolver = Resolver({"news.example.org": [[str(PUBLIC)]]})
    connector = Connector()
    result = await fetch(tools(resolver, connector), web.url(path, "news.example.org"))
    assert result.is_error and why in result.content, result.content
    assert connector.dialled == [str(PUBLIC)]  # only the first hop
    assert [p for _, p, _, _ in web.requests].count(path) >= 1
    assert not any(p.endswith("admin") for _, p, _, _ in web.requests)


async def test_a_redirect_to_a_name_that_now_resolves_privately_is_refused(web):
    # The same name answers public for the first hop, loopback for the redirect.
    resolver = Resolver({"news.example.org": [[str(PUBLIC)], ["127.0.0.1"]]})
    connector = Connector()
    await assert_refused(web.url("/to-private-name", "news.example.org"),
                         "news.example.org resolves to 127.0.0.1 is a loopback address",
                         resolver=resolver, connector=connector)
    assert connector.dialled == [str(PUBLIC)]


async def test_a_dns_answer_that_changes_after_the_check_never_reaches_loopback(web):
    # Rebinding: public at the first question, loopback at any later one. The
    # name is resolved once per connection and the checked address is dialled.
    resolver = Resolver({"rebind.example.net": [[str(PUBLIC)], ["127.0.0.1"]]})
    connector = Connector()
    reg = tools(resolver, connector)
    first = await fetch(reg, web.url("/article.html", "rebind.example.net"))
    assert not first.is_error, first.content
    assert resolver.asked == ["rebind.example.net"]  # one resolution, no second look
    assert connector.dialled == [str(PUBLIC)]
    second = await fetch(reg, web.url("/article.html", "rebind.example.net"))
    assert second.is_error and "resolves to 127.0.0.1 is a loopback address" in second.content
    assert connector.dialled == [str(PUBLIC)]


async def test_the_connected_socket_is_checked_against_the_address_dialled(web):
    # A connection whose peer is not the checked address is closed before
    # anything is sent; one that is passes.
    import httpcore2

    stream = await httpcore2.AnyIOBackend().connect_tcp("127.0.0.1", web.port, timeout=2.0)
    with pytest.raises(Refused, match="reached 127.0.0.1 instead"):
        await verify_peer(stream, PUBLIC)
    stream = await direct_connect(ipaddress.ip_address("127.0.0.1"), web.port, 2.0)
    await stream.aclose()


async def test_an_allowed_range_opens_only_that_range():
    guard = AddressGuard((ipaddress.ip_network("10.0.0.0/8"),))
    guard.check_address(ipaddress.ip_address("10.9.8.7"))
    guard.check_address(ipaddress.ip_address("::ffff:10.9.8.7"))
    with pytest.raises(Refused, match="192.168.1.1 is a private address"):
        guard.check_address(ipaddress.ip_address("192.168.1.1"))
    open_all = (ipaddress.ip_network("169.254.0.0/16"),)
    metadata = ipaddress.ip_address("169.254.169.254")
    assert refusal(metadata, open_all) is not None  # metadata stays shut
    assert refusal(ipaddress.ip_address("169.254.1.1"), open_all) is None


_TEREDO_SERVER = int(ipaddress.IPv4Address("65.54.227.120"))
EMBEDDINGS = {  # each form an IPv4 address takes inside an IPv6 one, built by hand
    "mapped": lambda v4: 0xFFFF << 32 | v4,
    "translated": lambda v4: 0xFFFF << 48 | v4,
    "NAT64": lambda v4: 0x64FF9B << 96 | v4,
    "local-use NAT64": lambda v4: 0x64FF9B0001 << 80 | v4,
    "6to4": lambda v4: 0x2002 << 112 | v4 << 80,
    "Teredo": lambda v4: 0x20010000 << 96 | _TEREDO_SERVER << 64 | (v4 ^ 0xFFFFFFFF),
    "IPv4-compatible": lambda v4: v4,
}


@settings(max_examples=300)
@given(st.integers(min_value=0, max_value=2**32 - 1), st.sampled_from(sorted(EMBEDDINGS)))
def test_an_ipv6_address_carrying_an_ipv4_one_is_refused_when_that_one_is(v4, form):
    inner = ipaddress.IPv4Address(v4)
    outer = ipaddress.IPv6Address(EMBEDDINGS[form](v4))
    why = refusal(outer)
    if refusal(inner) is not None:
        assert why is not None, (form, outer)
        if v4 > 1:  # ::0 and ::1 are the unspecified and loopback addresses themselves
            assert f"of {inner}" in why, why
    elif form not in ("local-use NAT64", "IPv4-compatible"):  # never routed, whatever inside
        assert why is None, why


async def test_an_ipv4_translated_loopback_is_refused_through_the_proxy_too(web):
    with TunnelProxy() as proxy:
        proxy.route["[::ffff:0:7f00:1]"] = "127.0.0.1"
        result = await fetch(proxied(proxy, Resolver({})), f"http://[::ffff:0:7f00:1]:{web.port}/")
    assert result.is_error and "IPv4-translated address of 127.0.0.1" in result.content
    assert proxy.asked == []


def test_public_addresses_pass_and_spellings_are_read_as_the_stack_reads_them():
    assert refusal(PUBLIC) is None
    assert refusal(ipaddress.ip_address("2606:4700::1111")) is None
    assert refusal(ipaddress.ip_address("::ffff:93.184.215.14")) is None
    assert read_host("0x5d.0xb8.0xd7.0x0e").address == PUBLIC
    assert read_host("EXAMPLE.com.").name == "example.com"
    assert read_host("example.com").address is None


async def test_unresolvable_names_and_bad_addresses_are_clear_errors():
    result = await fetch(tools(), "http://nowhere.invalid/")
    assert result.is_error and "could not be resolved" in result.content
    result = await fetch(tools(), "http://08.0.0.1/")
    assert result.is_error and "not a valid IPv4 address" in result.content
    with pytest.raises(ToolError):
        await AddressGuard().resolve("[::1", 80)


def proxied(proxy, resolver) -> ToolRegistry:
    """Tools that go through a tunnelling proxy (tests/fakes/connect_proxy.py)."""
    settings = WebSettings(proxy=proxy.url)
    return ToolRegistry(web_tools(settings, {}, SessionDelimiter("0123456789ab"),
                                  resolver=resolver))


async def test_a_proxy_is_used_and_the_target_is_still_checked_here(web):
    resolver = Resolver({"news.example.org": [[str(PUBLIC)]],
                         "intranet.example.com": [["10.0.0.9"]]})
    with TunnelProxy() as proxy:
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        reg = proxied(proxy, resolver)
        result = await fetch(reg, f"http://news.example.org:{web.port}/article.html")
        assert not result.is_error, result.content
        assert "fourˆmetres" in result.content
        # The proxy was asked for the checked address; it has the name only as the Host.
        assert proxy.asked == [f"GET http://{PUBLIC}:{web.port}/article.html HTTP/1.1"]
        _, _, headers, _ = web.requests[-1]
        assert headers["Host"] == f"news.example.org:{web.port}"
        before = len(web.requests)
        for url, why in [
            ("http://10.0.0.5/", "10.0.0.5 is a private address"),
            ("http://0x7f.1/", "127.0.0.1 is a loopback address"),
            ("http://intranet.example.com/", "intranet.example.com resolves to 10.0.0.9"),
        ]:
            refused = await fetch(reg, url)
            assert refused.is_error and why in refused.content
        assert len(web.requests) == before and len(proxy.asked) == 1  # never asked for them


async def test_a_redirect_through_the_proxy_is_checked_too(web):
    resolver = Resolver({"news.example.org": [[str(PUBLIC)]]})
    with TunnelProxy() as proxy:
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        result = await fetch(proxied(proxy, resolver),
                             f"http://news.example.org:{web.port}/to-loopback")
    assert result.is_error and "127.0.0.1 is a loopback address" in result.content


async def test_https_goes_to_the_checked_address_with_the_name_for_tls_and_host(tmp_path):
    # The certificate is for the name only: the handshake succeeds only if the
    # TLS name (SNI and verification) is the URL's name, not the dialled address.
    server_tls, client_tls = tls_contexts("secure.example.org", tmp_path)
    with WebServer(tls=server_tls) as server:
        server.routes[("GET", "/article.html")] = page("text/html", ARTICLE)
        resolver = Resolver({"secure.example.org": [[str(PUBLIC)]]})
        connector = Connector()
        fetcher = Fetcher(WebSettings(), resolver=resolver, connect=connector, verify=client_tls)
        fetched = await fetcher.fetch(
            f"https://secure.example.org:{server.port}/article.html", frozenset({"text/html"}))
        assert b"four metres" in fetched.body
        assert connector.dialled == [str(PUBLIC)]
        _, _, headers, _ = server.requests[-1]
        assert headers["Host"] == f"secure.example.org:{server.port}"
        with pytest.raises(ToolError, match="CERTIFICATE_VERIFY_FAILED"):  # a wrong name fails TLS
            other = Resolver({"other.example.org": [[str(PUBLIC)]]})
            await Fetcher(WebSettings(), resolver=other, connect=Connector(),
                          verify=client_tls).fetch(
                f"https://other.example.org:{server.port}/article.html", frozenset({"text/html"}))
