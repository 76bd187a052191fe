"""Each browser has its own session: its own cookie and CSRF token from its own
token exchange, listed, and ended alone (a sign-out, or from another browser),
without a restart. A real server on 127.0.0.1 (the in-process agent of
tests/web_gui), over HTTP."""

from __future__ import annotations

import re

import httpx

from noema.interfaces.web.auth import MAX_SESSIONS, Sessions
from tests.security.attacks.test_web_auth_attacks import live, signed_in  # noqa: F401
from tests.web_gui.conftest import LiveServer


def csrf_of(client: httpx.Client) -> dict[str, str]:
    """The CSRF header of the page this browser was served."""
    token = re.search(r'name="csrf-token" content="([0-9a-f]+)"', client.get("/").text)
    assert token is not None
    return {"x-csrf-token": token.group(1)}


def test_two_browsers_get_two_sessions_with_their_own_csrf(live: LiveServer):
    with signed_in(live) as ana, signed_in(live) as bo:
        name = live.server.credentials.cookie
        assert ana.cookies[name] != bo.cookies[name]
        ana_csrf, bo_csrf = csrf_of(ana), csrf_of(bo)
        assert ana_csrf != bo_csrf
        # One browser's CSRF token is no use with the other's cookie.
        refused = bo.post("/api/stop", headers=ana_csrf)
        assert refused.status_code == 403 and "CSRF" in refused.text
        assert bo.post("/api/stop", headers=bo_csrf).status_code == 200


def test_signing_out_ends_this_browser_alone_and_forgets_its_cookie(live: LiveServer):
    with signed_in(live) as ana, signed_in(live) as bo:
        out = ana.post("/api/sign-out", headers=csrf_of(ana))
        assert out.status_code == 200 and out.json()["signed_out"]
        assert "Max-Age=0" in out.headers["set-cookie"]
        assert ana.get("/api/status").status_code in (401, 403)  # its cookie opens nothing
        assert bo.get("/api/status").status_code == 200


def test_a_browser_lists_the_sessions_and_ends_another(live: LiveServer):
    with signed_in(live) as ana, signed_in(live) as bo:
        listed = ana.get("/api/sessions").json()["sessions"]
        mine = [s for s in listed if s["current"]]
        assert len(mine) == 1 and len(listed) >= 2
        bo_number = next(s["number"] for s in bo.get("/api/sessions").json()["sessions"]
                         if s["current"])
        ended = ana.post(f"/api/sessions/{bo_number}/end", headers=csrf_of(ana))
        assert ended.status_code == 200 and f"Session {bo_number}" in ended.json()["text"]
        refused = bo.get("/")
        assert refused.status_code == 403 and "session has ended" in refused.text
        assert ana.get("/api/status").status_code == 200
        again = ana.post(f"/api/sessions/{bo_number}/end", headers=csrf_of(ana))
        assert again.status_code == 404


def test_ending_a_session_is_an_action_that_needs_the_csrf_token(live: LiveServer):
    with signed_in(live) as ana, signed_in(live) as bo:
        bo_number = next(s["number"] for s in bo.get("/api/sessions").json()["sessions"]
                         if s["current"])
        assert ana.post(f"/api/sessions/{bo_number}/end").status_code == 403
        assert bo.get("/api/status").status_code == 200


def test_sessions_are_kept_by_hash_and_capped():
    sessions = Sessions()
    opened = [sessions.open(f"browser {n}", now=float(n)) for n in range(MAX_SESSIONS + 3)]
    assert len(sessions.listing()) == MAX_SESSIONS
    assert sessions.find(opened[0][0]) is None  # the ones unused longest went first
    assert sessions.find(opened[-1][0]) is opened[-1][1]
    assert all(value not in repr(vars(sessions)) for value, _ in opened)  # no cookie is kept


def test_an_ended_session_s_open_stream_gets_nothing_more(live: LiveServer):
    from noema.providers.scripted import say

    with signed_in(live) as ana, signed_in(live) as bo:
        number = next(s["number"] for s in bo.get("/api/sessions").json()["sessions"]
                      if s["current"])
        live.script(say("a reply the ended browser must not see"))
        with bo.stream("GET", "/live") as stream:
            lines = stream.iter_lines()
            for line in lines:
                if '"welcome"' in line:
                    break
            assert ana.post(f"/api/sessions/{number}/end", headers=csrf_of(ana)).is_success
            assert ana.post("/api/say", json={"text": "said after the end"},
                            headers=csrf_of(ana)).is_success
            rest = list(lines)  # the stream ends at the next message, unsent
        live.idle()
    assert not any("said after the end" in line or "must not see" in line for line in rest)
