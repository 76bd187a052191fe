"""The settings page's "List models" and window steps, over HTTP: a server the
person types cannot redirect them to another address, so no internal answer
fills the list and nothing is posted back to it."""

from __future__ import annotations

import httpx

from tests.fakes.local_servers import FakeLocalServer
from tests.fakes.web_server import WebServer, redirect

from .conftest import WAIT, sign_in


def test_list_models_refuses_a_redirect_to_another_address(live):
    cookies, csrf = sign_in(live.server.credentials)
    with FakeLocalServer("ollama", {"intranet-only:latest": 8192}) as internal, \
            WebServer() as typed:
        root = internal.base_url.removesuffix("/v1")
        typed.routes[("GET", "/api/tags")] = redirect(f"{root}/api/tags", 307)
        typed.routes[("POST", "/api/show")] = redirect(f"{root}/api/show", 307)
        with httpx.Client(base_url=live.base, cookies=cookies, timeout=WAIT) as client:
            listed = client.post("/api/settings/models", headers=csrf, json={
                "provider": "ollama", "base_url": typed.url("/v1")})
            window = client.post("/api/settings/window", headers=csrf, json={
                "provider": "ollama", "base_url": typed.url("/v1"),
                "model": "intranet-only:latest"})
        assert listed.status_code == 502
        assert "redirected to another address" in listed.json()["error"]
        assert "intranet-only" not in listed.text
        assert window.status_code == 502 and "intranet-only:latest" not in window.json()["error"]
        assert internal.requests == []
