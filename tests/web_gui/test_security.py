"""Who may use the page: the token, the cookie, CSRF, other sites, the address."""

from __future__ import annotations

import json
import stat

import httpx
import pytest
from playwright.sync_api import expect

from noema.interfaces.web import PublicAddress, check_address
from noema.interfaces.web.auth import TOKEN_FILE, Credentials
from noema.memory.turns import TurnKind
from noema.providers.scripted import say

from .conftest import WAIT


@pytest.fixture
def client(live):
    with httpx.Client(base_url=live.base, timeout=WAIT, follow_redirects=False) as client:
        yield client


@pytest.fixture
def signed_in(live, client):
    """A client holding a session of its own (its CSRF token as `client.csrf`)."""
    value, session = live.server.credentials.sessions.open("a test client")
    client.cookies.set(live.server.credentials.cookie, value)
    client.csrf = session.csrf
    return client


def _user_texts(live) -> list[str]:
    store = live.app.store
    return [t.content for t in store.range(1, store.last_id()) if t.kind is TurnKind.USER]


def test_without_the_token_every_page_and_the_stream_are_refused(client):
    for path in ("/", "/live", "/api/history", "/api/status", "/static/chat.js"):
        response = client.get(path)
        assert response.status_code == 401, path
        assert "access token" in response.text
    assert client.post("/api/say", json={"text": "hi"}).status_code == 401


def test_a_wrong_token_is_refused(live, client):
    assert client.get("/?token=not-the-token").status_code == 403
    client.cookies.set(live.server.credentials.cookie, "not-the-token")
    assert client.get("/").status_code == 403
    assert client.get("/live").status_code == 403


def test_the_token_becomes_a_strict_http_only_cookie(live, client):
    response = client.get(f"/memory?token={live.server.credentials.token}")
    assert response.status_code == 303
    assert response.headers["location"] == "/memory"  # the token leaves the address
    cookie = response.headers["set-cookie"]
    credentials = live.server.credentials
    value = cookie.split(";", 1)[0].removeprefix(f"{credentials.cookie}=")
    assert credentials.sessions.find(value) is not None  # a session of its own
    assert credentials.token not in cookie  # the cookie is drawn, never the token itself
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


def test_each_agent_s_page_has_its_own_cookie():
    # Cookies ignore the port: two agents' pages on one machine must not evict each other.
    ana, bo = Credentials.fresh(scope="/home/x/agents/ana"), Credentials.fresh(scope="/x/bo")
    assert ana.cookie != bo.cookie and ana.cookie.startswith("noema_ui_")
    assert Credentials.fresh(scope="/x/bo").cookie == bo.cookie  # stable across runs


def test_the_token_is_kept_for_the_owner_only(live):
    path = live.paths.root / TOKEN_FILE
    assert path.read_text().strip() == live.server.credentials.token
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_every_response_carries_a_strict_content_security_policy(signed_in, client):
    for response in (signed_in.get("/"), signed_in.get("/static/chat.js"),
                     httpx.get(f"{client.base_url}/")):
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "default-src 'none'" in policy
        assert "unsafe-inline" not in policy
    page = signed_in.get("/").text
    assert "<script>" not in page and " on" not in page.split("<body", 1)[1].split(">", 1)[0]


def test_an_action_without_the_csrf_token_is_refused_and_nothing_is_sent(live, signed_in):
    before = _user_texts(live)
    response = signed_in.post("/api/say", json={"text": "forged"})
    assert response.status_code == 403 and "CSRF" in response.text
    response = signed_in.post("/api/say", json={"text": "forged"},
                              headers={"x-csrf-token": "0" * 64})
    assert response.status_code == 403
    assert _user_texts(live) == before


def test_an_action_from_another_origin_is_refused_even_with_the_csrf_token(live, signed_in):
    before = _user_texts(live)
    headers = {"x-csrf-token": signed_in.csrf, "origin": "http://evil.example"}
    assert signed_in.post("/api/stop", headers=headers).status_code == 403
    headers = {"x-csrf-token": signed_in.csrf, "sec-fetch-site": "cross-site"}
    assert signed_in.post("/api/say", json={"text": "forged"}, headers=headers).status_code == 403
    assert _user_texts(live) == before


def test_a_foreign_host_name_is_refused(signed_in):
    # A page on another name that resolves here (DNS rebinding) gets nothing.
    assert signed_in.get("/", headers={"host": "evil.example"}).status_code == 400


def test_a_bad_request_gets_a_clear_error(live, signed_in):
    headers = {"x-csrf-token": signed_in.csrf}
    response = signed_in.post("/api/say", content=b"{not json", headers=headers)
    assert response.status_code == 400 and "JSON" in response.json()["error"]
    response = signed_in.post("/api/answer", json={"approval": "one"}, headers=headers)
    assert response.status_code == 400 and "approval number" in response.json()["error"]
    assert signed_in.get("/api/turn/999999").status_code == 404


def test_a_cross_site_form_post_from_the_browser_is_refused(browser, live):
    """A page on another site, in a browser that holds the cookie, posts to the agent."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(live.address)  # this browser is signed in
        evil = (f'<form method="post" action="{live.base}/api/say" enctype="text/plain">'
                '<input name=\'{"text": "from evil", "x": "\' value=\'"}\'>'
                '<button id="go">go</button></form>')
        page.route("http://evil.example/", lambda route: route.fulfill(
            status=200, content_type="text/html", body=evil))
        page.goto("http://evil.example/")
        with page.expect_response(f"{live.base}/api/say") as posted:
            page.click("#go")
        assert posted.value.status in (401, 403)
        expect(page.locator("body")).to_contain_text("refused" if posted.value.status == 403
                                                     else "access token")
    finally:
        context.close()
    assert "from evil" not in " ".join(_user_texts(live))


def test_a_public_address_is_refused_unless_allowed():
    for host in ("0.0.0.0", "192.168.1.10", "::", "example.com"):
        with pytest.raises(PublicAddress):
            check_address(host, allow_remote=False)
    check_address("127.0.0.1", allow_remote=False)
    check_address("::1", allow_remote=False)
    check_address("0.0.0.0", allow_remote=True)


def _events(lines, until):
    """(id, message) pairs from a stream's lines until `until(message)` is true."""
    seen, current = [], None
    for line in lines:
        if line.startswith("id: "):
            current = int(line[4:])
        elif line.startswith("data: "):
            message = json.loads(line[6:])
            seen.append((current, message))
            if until(message):
                return seen
    raise AssertionError(f"the stream ended; saw {[m['type'] for _, m in seen]}")


def test_the_live_stream_resumes_from_last_event_id_without_loss_or_repeat(live, signed_in):
    text = " ".join(f"piece{i}" for i in range(40))
    live.script(say(text))
    with signed_in.stream("GET", "/live") as response:
        first = response.iter_lines()
        (start, welcome), = _events(first, lambda m: m["type"] == "welcome")
        assert welcome["complete"]
        sent = signed_in.post("/api/say", json={"text": "stream please"},
                              headers={"x-csrf-token": signed_in.csrf})
        assert sent.status_code == 200, sent.text
        before = _events(first, lambda m: m["type"] == "text" and "piece5" in m["delta"])
    # The page lost its connection mid-answer; the browser reconnects with the last id.
    resume = before[-1][0]
    with signed_in.stream("GET", "/live", headers={"last-event-id": str(resume)}) as response:
        after = _events(response.iter_lines(), lambda m: m["type"] == "cycle_ended")
    assert after[0][1]["type"] == "welcome" and after[0][1]["complete"]
    seqs = [i for i, m in before + after[1:]]
    assert seqs == list(range(start + 1, seqs[-1] + 1))  # every broadcast once, in order
    deltas = "".join(m["delta"] for _, m in before + after if m["type"] == "text")
    assert deltas == text
    live.idle()
