"""Attacks on the web page's door: the cookie, the token exchange's redirect,
caching of conversation data, and links out of save points. A real server on
127.0.0.1 (the in-process agent of tests/web_gui); requests over raw sockets
where a client library would tidy the attack away. Verdicts come from what
the server answered: status, Location, headers, the links in the page."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from html.parser import HTMLParser
from urllib.parse import urlsplit

import httpx
import pytest

from noema.interfaces.web.auth import Credentials, same_origin_path
from noema.memory import savepoints
from noema.memory.savepoints import AttemptRecord, Report, Status
from tests.web_gui.conftest import WAIT, LiveServer


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("web-attacks"))
    try:
        yield server
    finally:
        server.close()


def raw_get(live: LiveServer, target: str, cookie: str | None = None) -> tuple[int, dict]:
    """GET `target` exactly as written on the request line; the status and headers."""
    host, port = urlsplit(live.base).hostname, urlsplit(live.base).port
    lines = [f"GET {target} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
    if cookie:
        lines.append(f"Cookie: {cookie}")
    with socket.create_connection((host, port), timeout=WAIT) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers: dict[str, list[str]] = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return int(head[0].split(" ")[1]), headers


@contextlib.contextmanager
def signed_in(live: LiveServer) -> Iterator[httpx.Client]:
    """A client that went through the token exchange, holding only the cookie it gave."""
    with httpx.Client(base_url=live.base, timeout=WAIT, follow_redirects=False) as client:
        answer = client.get(f"/?token={live.server.credentials.token}")
        assert answer.status_code == 303
        yield client


# -- the cookie ----------------------------------------------------------------------------

def test_the_session_cookie_is_not_the_token_and_the_token_is_no_cookie(live):
    credentials = live.server.credentials
    with signed_in(live) as client:
        cookie = client.cookies[credentials.cookie]
        assert cookie != credentials.token and credentials.token not in cookie
        assert client.get("/api/status").status_code == 200
    # Someone who read the token file (or the printed address) and puts the
    # token itself in the cookie gets nothing: only the exchange makes a session.
    with httpx.Client(base_url=live.base, timeout=WAIT,
                      cookies={credentials.cookie: credentials.token}) as thief:
        assert thief.get("/api/status").status_code == 403
        assert thief.get("/api/history").status_code == 403


def test_a_session_of_another_start_opens_nothing(live):
    """A session is drawn by the run that opened it and kept by it alone: one
    from another start, even with the same token, is no session here."""
    other = Credentials(live.server.credentials.token)
    value, _ = other.sessions.open("an earlier start's browser")
    with httpx.Client(base_url=live.base, timeout=WAIT,
                      cookies={live.server.credentials.cookie: value}) as stale:
        assert stale.get("/api/status").status_code == 403  # an earlier run's cookie


# -- the redirect after the exchange ----------------------------------------------------------

HOSTILE_PATHS = [
    "//evil.example/", "//evil.example", "///evil.example/", "/\\evil.example/",
    "/%2F/evil.example", "/%2f%2fevil.example", "/%5Cevil.example", "/%5c%5cevil.example",
    "/%252F%252Fevil.example", "/%25252F%25252Fevil.example", "/%09/evil.example",
    "/%0d%0aSet-Cookie:%20pwned=1", "/.%2F%2Fevil.example", "/%00//evil.example",
]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_the_exchange_never_redirects_off_the_site(live, path):
    status, headers = raw_get(live, f"{path}?token={live.server.credentials.token}&next=1")
    if status == 303:
        (location,) = headers["location"]
        assert location == "/", location
        assert not any("pwned" in c for c in headers.get("set-cookie", []))
    else:  # refused before the exchange (the server's HTTP parser): no redirect at all
        assert "location" not in headers and status >= 400


@pytest.mark.parametrize(("path", "expected"), [
    ("/memory", "/memory"), ("/memory?x=1", "/memory?x=1"), ("/files/a%20b", "/files/a%20b"),
    ("/senses/%E2%9C%93", "/senses/%E2%9C%93"),
])
def test_the_exchange_still_returns_to_the_page_asked_for(live, path, expected):
    joiner = "&" if "?" in path else "?"
    status, headers = raw_get(live, f"{path}{joiner}token={live.server.credentials.token}")
    assert status == 303 and headers["location"] == [expected]


@pytest.mark.parametrize("path", ["//a", "/\\a", "/%2F/a", "http://a/", "a", "/x\x00", "/x\r\n",
                                  "/%2525252F%2525252Fa", "/%5C", "/.//a", "/a/..//b", "/a//b"])
def test_same_origin_path_refuses_what_a_browser_could_read_as_elsewhere(path):
    assert same_origin_path(path) is None


# -- caching -----------------------------------------------------------------------------------

def test_every_answer_with_conversation_data_says_no_store(live):
    with signed_in(live) as client:
        last = live.app.store.last_id() or 1
        for path in ("/api/history", "/api/status", f"/api/turn/{last}", "/", "/memory",
                     "/senses", "/settings", "/api/nothing-here"):
            answer = client.get(path)
            assert answer.headers.get_list("cache-control") == ["no-store"], path
        refused = httpx.get(f"{live.base}/api/history")  # no cookie: refused, and not kept
        assert refused.status_code == 401 and refused.headers["cache-control"] == "no-store"
        static = client.get("/static/chat.js")
        assert static.status_code == 200 and "no-store" not in static.headers.get(
            "cache-control", "")


# -- links in save points ----------------------------------------------------------------------

class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        for name, value in attrs:
            if name in ("href", "src", "action", "formaction") and value is not None:
                self.hrefs.append(value)


HOSTILE_JOURNEY = (
    "## The Journey\nSee [the source](https://evil.example/steal?d=1), "
    "<https://evil.example/auto>, [rel](//evil.example/x), [back](/\\evil.example), "
    "[js](javascript:alert(1)), [data](data:text/html,hi), [mail](mailto:x@evil.example), "
    "[up](/memory/turn/1/../../../evil.example), [ref][r] and the turn {cite:1}.\n\n"
    "[r]: https://evil.example/reference\n"
)


def test_a_save_point_holds_no_live_link_out_of_the_page(live):
    store = live.app.store
    report = Report(cited=(1,), covered=1, coverable=1, chars=100, words=20, tokens=30,
                    retries=1, chronicler="scripted/script", language="en",
                    attempts=(AttemptRecord(1, (("unknown_citation", "turn 99 does not exist"),),
                                            40, 0.1, 0.2, HOSTILE_JOURNEY + "{cite:99}"),))

    async def write():
        return savepoints.record(store, status=Status.ACCEPTED, previous=None, turn_ids=[1],
                                 text=HOSTILE_JOURNEY, report=report)

    accepted = live.call(write())
    with signed_in(live) as client:
        html = client.get("/memory").text
    assert f"save-point-{accepted.id}" in html and "the source" in html  # the text stays
    links = Links()
    links.feed(html)
    assert links.hrefs and not [h for h in links.hrefs if "evil" in h or ":" in h
                                or h.startswith("//") or "\\" in h]
    assert "/memory/turn/1" in links.hrefs and "/memory/turn/99" in links.hrefs
