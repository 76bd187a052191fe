"""Attacks on the page fetch: addresses that are not globally reachable in any
disguise, and a proxy used as a second resolver. Verdicts come from what the
connector and the proxy were asked to reach, and what the site received."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.tools.errors import ToolError
from noema.web import WebSettings
from noema.web.addresses import NOT_GLOBAL, Refused, refusal
from noema.web.fetch import Fetcher
from tests.fakes.connect_proxy import TunnelProxy
from tests.fakes.web_server import ARTICLE, WebServer, page, tls_contexts
from tests.tools.test_web_ssrf import PUBLIC, Connector, Resolver

PUBLIC6 = ipaddress.ip_address("2606:4700:4700::1111")  # looks public; never contacted
HTML = frozenset({"text/html"})


@pytest.fixture(scope="module")
def site():
    with WebServer() as server:
        server.routes[("GET", "/article.html")] = page("text/html", ARTICLE)
        yield server


# -- globally reachable, or refused ------------------------------------------------------

@pytest.mark.parametrize(("address", "says"), [
    ("fec0::1", "site-local"),
    ("feff:ffff::1", "site-local"),
    ("64:ff9b:1::808:808", "local-use NAT64"),
    ("64:ff9b::a00:1", "NAT64 address of 10.0.0.1 is a private address"),
    ("64:ff9b::7f00:1", "loopback"),
    ("::ffff:10.0.0.1", "IPv4-mapped address of 10.0.0.1"),
    ("::ffff:169.254.169.254", "cloud metadata"),
    ("::10.0.0.1", "IPv4-compatible"),
    ("::8.8.8.8", "IPv4-compatible"),
    ("2002:a00:1::1", "6to4 address of 10.0.0.1"),
    ("2002:c0a8:101::1", "6to4 address of 192.168.1.1"),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo address of 10.0.0.1"),
    ("ff0e::1", "multicast"),
    ("224.0.0.251", "multicast"),
    ("239.255.255.250", "multicast"),
    ("5f00::1", "SRv6"),
    ("3fff::1", "documentation"),
    ("2001:db8::1", ""),
    ("100::1", ""),
    ("fd12:3456::1", "private"),
    ("fe80::1", "link-local"),
    ("100.64.0.1", "shared"),
    ("192.0.0.8", "IETF protocol"),
    ("198.18.0.1", "private"),
    ("0.1.2.3", ""),
    ("255.255.255.255", ""),
])
def test_addresses_not_globally_reachable_are_refused(address, says):
    why = refusal(ipaddress.ip_address(address))
    assert why is not None and says in why


@pytest.mark.parametrize("address", [
    "8.8.8.8", "93.184.215.14", "2606:4700:4700::1111", "2a00:1450:4001::1",
    "64:ff9b::808:808", "::ffff:8.8.8.8", "2002:808:808::1",
])
def test_globally_reachable_addresses_pass(address):
    assert refusal(ipaddress.ip_address(address)) is None


def test_every_range_python_misjudges_is_named():
    """NOT_GLOBAL is the list of what `is_global` gets wrong: if a later Python
    fixes one, the entry costs nothing; if one is missing, the fetch opens."""
    for net, _ in NOT_GLOBAL:
        assert refusal(net[1]) is not None


v4 = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)


@settings(max_examples=400, deadline=None)
@given(v4)
def test_an_ipv4_address_passes_only_if_globally_reachable(ip):
    allowed = refusal(ip) is None
    named = any(ip.version == net.version and ip in net for net, _ in NOT_GLOBAL)
    assert allowed == (ip.is_global and not named and
                       str(ip) not in ("169.254.169.254", "169.254.170.2", "100.100.100.200"))


@settings(max_examples=400, deadline=None)
@given(v4, st.sampled_from(["mapped", "nat64", "6to4"]))
def test_an_ipv6_address_carrying_a_refused_ipv4_address_is_refused(ip, scheme):
    if scheme == "mapped":
        carried = ipaddress.IPv6Address(0xFFFF << 32 | int(ip))
    elif scheme == "nat64":
        carried = ipaddress.IPv6Address(0x0064FF9B << 96 | int(ip))
    else:
        carried = ipaddress.IPv6Address(0x2002 << 112 | int(ip) << 80 | 1)
    if refusal(ip) is not None:
        assert refusal(carried) is not None


@pytest.mark.parametrize("answer", [["fec0::5"], [str(PUBLIC), "fec0::5"], ["64:ff9b::a00:5"],
                                    ["::ffff:127.0.0.1"]])
async def test_a_name_resolving_to_a_refused_address_is_never_dialled(site, answer):
    connector = Connector()
    fetcher = Fetcher(WebSettings(), resolver=Resolver({"site.example": [answer]}),
                      connect=connector)
    with pytest.raises(Refused):
        await fetcher.fetch(f"http://site.example:{site.port}/article.html", HTML)
    assert connector.dialled == []


# -- through a proxy: the checked address, never the name --------------------------------

def through(proxy: TunnelProxy, resolver: Resolver, **more) -> Fetcher:
    return Fetcher(WebSettings(proxy=proxy.url), resolver=resolver, **more)


async def test_the_proxy_is_asked_for_the_checked_address_not_the_name(site):
    resolver = Resolver({"site.example": [[str(PUBLIC)]]})
    with TunnelProxy() as proxy:
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        fetched = await through(proxy, resolver).fetch(
            f"http://site.example:{site.port}/article.html", HTML)
    assert b"four metres" in fetched.body
    # Plain HTTP goes as a proxy request to the address; the name is only its Host.
    assert proxy.asked == [f"GET http://{PUBLIC}:{site.port}/article.html HTTP/1.1"]
    assert proxy.hosts == [f"site.example:{site.port}"]
    _, _, headers, _ = site.requests[-1]
    assert headers["Host"] == f"site.example:{site.port}"


async def test_plain_http_passes_a_proxy_that_tunnels_only_to_443(site):
    """Squid's default: CONNECT only to its SSL ports. Plain HTTP is a proxy
    request there, never a tunnel, so it is not refused."""
    resolver = Resolver({"site.example": [[str(PUBLIC)]]})
    with TunnelProxy(refuse_ports=frozenset({site.port})) as proxy:
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        fetched = await through(proxy, resolver).fetch(
            f"http://site.example:{site.port}/article.html", HTML)
    assert b"four metres" in fetched.body
    assert [line.split()[0] for line in proxy.asked] == ["GET"]


async def test_plain_http_through_a_proxy_with_a_login_sends_it(site):
    resolver = Resolver({"site.example": [[str(PUBLIC)]]})
    with TunnelProxy(login=("ana", "s3cret")) as proxy:
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        fetched = await through(proxy, resolver).fetch(
            f"http://site.example:{site.port}/article.html", HTML)
    assert b"four metres" in fetched.body
    _, _, headers, _ = site.requests[-1]
    assert "Proxy-Authorization" not in headers  # the proxy's login stops at the proxy


async def test_a_redirect_through_the_proxy_is_a_new_checked_proxy_request(site):
    site.routes[("GET", "/moved")] = lambda query, body: (
        302, {"Location": "http://other.example/article.html"}, b"")
    resolver = Resolver({"site.example": [[str(PUBLIC)]], "other.example": [["10.0.0.8"]]})
    with TunnelProxy() as proxy:
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        proxy.route["10.0.0.8"] = "127.0.0.1"  # a canary: must never be asked for
        with pytest.raises(Refused, match="other.example resolves to 10.0.0.8"):
            await through(proxy, resolver).fetch(f"http://site.example:{site.port}/moved",
                                                 HTML)
    assert proxy.asked == [f"GET http://{PUBLIC}:{site.port}/moved HTTP/1.1"]


async def test_an_ipv6_target_is_bracketed_in_the_proxy_request(site):
    resolver = Resolver({"six.example": [[str(PUBLIC6)]]})
    with TunnelProxy() as proxy:
        proxy.route[f"[{PUBLIC6}]"] = "127.0.0.1"
        for url in (f"http://six.example:{site.port}/article.html",
                    f"http://[{PUBLIC6}]:{site.port}/article.html"):
            fetched = await through(proxy, resolver).fetch(url, HTML)
            assert b"four metres" in fetched.body
    assert proxy.asked == [f"GET http://[{PUBLIC6}]:{site.port}/article.html HTTP/1.1"] * 2
    _, _, headers, _ = site.requests[-1]
    assert headers["Host"] == f"[{PUBLIC6}]:{site.port}"


async def test_a_name_that_rebinds_cannot_reach_a_private_address_through_the_proxy(site):
    """The name answers public, then private: it is resolved once per
    connection, here, and the proxy only ever dials what was checked."""
    resolver = Resolver({"rebind.example": [[str(PUBLIC)], ["10.0.0.7"]]})
    with TunnelProxy() as proxy:
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        proxy.route["10.0.0.7"] = "127.0.0.1"  # a canary: must never be asked for
        fetcher = through(proxy, resolver)
        await fetcher.fetch(f"http://rebind.example:{site.port}/article.html", HTML)
        with pytest.raises(Refused, match="10.0.0.7 is a private address"):
            await fetcher.fetch(f"http://rebind.example:{site.port}/article.html", HTML)
    assert proxy.asked == [f"GET http://{PUBLIC}:{site.port}/article.html HTTP/1.1"]
    assert not any("rebind.example" in line for line in proxy.asked)


async def test_https_through_the_proxy_keeps_the_name_for_tls(tmp_path):
    server_tls, client_tls = tls_contexts("secure.example.org", tmp_path)
    resolver = Resolver({"secure.example.org": [[str(PUBLIC)]]})
    with WebServer(tls=server_tls) as server, TunnelProxy() as proxy:
        server.routes[("GET", "/article.html")] = page("text/html", ARTICLE)
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        fetched = await through(proxy, resolver, verify=client_tls).fetch(
            f"https://secure.example.org:{server.port}/article.html", HTML)
        assert b"four metres" in fetched.body
        assert proxy.asked == [f"CONNECT {PUBLIC}:{server.port} HTTP/1.1"]


async def test_socks5_is_asked_for_the_address_with_its_login(site):
    resolver = Resolver({"site.example": [[str(PUBLIC)]]})
    with TunnelProxy("socks5", login=("ana", "s3cret")) as proxy:
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        fetched = await through(proxy, resolver).fetch(
            f"http://site.example:{site.port}/article.html", HTML)
    assert b"four metres" in fetched.body
    assert proxy.asked == [f"SOCKS {PUBLIC}:{site.port}"]


async def test_a_proxy_refusing_the_tunnel_is_a_clear_error(site):
    resolver = Resolver({"site.example": [[str(PUBLIC)]]})
    with TunnelProxy(refuse_ports=frozenset({site.port})) as proxy:
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        with pytest.raises(ToolError, match="refused a tunnel .*port 443"):
            await through(proxy, resolver).fetch(
                f"https://site.example:{site.port}/article.html", HTML)


async def test_an_https_proxy_is_verified_and_still_only_tunnels_to_the_address(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "proxy").mkdir()
    site_tls, client_tls = tls_contexts("secure.example.org", tmp_path / "site")
    proxy_tls, _ = tls_contexts("localhost", tmp_path / "proxy")
    client_tls.load_verify_locations(cafile=str(tmp_path / "proxy" / "cert.pem"))
    resolver = Resolver({"secure.example.org": [[str(PUBLIC)]]})
    with WebServer(tls=site_tls) as server, TunnelProxy("https", tls=proxy_tls) as proxy:
        server.routes[("GET", "/article.html")] = page("text/html", ARTICLE)
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        url = proxy.url.replace("127.0.0.1", "localhost")  # the name its certificate holds
        fetcher = Fetcher(WebSettings(proxy=url), resolver=resolver, verify=client_tls)
        fetched = await fetcher.fetch(
            f"https://secure.example.org:{server.port}/article.html", HTML)
        assert b"four metres" in fetched.body
        assert proxy.asked == [f"CONNECT {PUBLIC}:{server.port} HTTP/1.1"]


async def test_plain_http_through_an_https_proxy_is_a_proxy_request_over_tls(site, tmp_path):
    proxy_tls, client_tls = tls_contexts("localhost", tmp_path)
    resolver = Resolver({"site.example": [[str(PUBLIC)]]})
    with TunnelProxy("https", tls=proxy_tls) as proxy:
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        url = proxy.url.replace("127.0.0.1", "localhost")
        fetcher = Fetcher(WebSettings(proxy=url), resolver=resolver, verify=client_tls)
        fetched = await fetcher.fetch(f"http://site.example:{site.port}/article.html", HTML)
    assert b"four metres" in fetched.body
    assert proxy.asked == [f"GET http://{PUBLIC}:{site.port}/article.html HTTP/1.1"]


async def test_a_proxy_asking_for_a_login_says_where_it_goes(site):
    resolver = Resolver({"site.example": [[str(PUBLIC)]]})
    with TunnelProxy(login=("ana", "s3cret")) as proxy:
        proxy.route[str(PUBLIC)] = "127.0.0.1"
        bare = proxy.url.replace("ana:s3cret@", "")
        with pytest.raises(ToolError, match=r"asks for a login.*\[web\] proxy"):
            await Fetcher(WebSettings(proxy=bare), resolver=resolver).fetch(
                f"http://site.example:{site.port}/article.html", HTML)
