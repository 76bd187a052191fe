"""A model server's redirect is never followed: not by the chat, not by the
setup's model test, so a key (Anthropic's `x-api-key` as much as a bearer
token) never reaches another address; the person reads what to do."""

from __future__ import annotations

import pytest

from noema.providers.base import ProviderError
from noema.providers.settings import ModelSettings
from noema.setup_flow import live_test_of
from tests.fakes.web_server import WebServer, redirect

CASES = {  # provider, the path its requests go to, the variable of its key
    "anthropic": ("/v1/messages", "ANTHROPIC_API_KEY"),
    "openai-compatible": ("/v1/chat/completions", "LOCAL_KEY"),
}


@pytest.mark.parametrize("provider", CASES)
@pytest.mark.parametrize("status", [302, 307, 308])
async def test_the_model_test_does_not_follow_a_redirect_with_the_key(provider, status):
    path, env = CASES[provider]
    with WebServer() as elsewhere, WebServer() as server:
        server.routes[("POST", path)] = redirect(elsewhere.url(path), status)
        base = server.url("/v1" if provider != "anthropic" else "")
        settings = ModelSettings(provider=provider, model="m", base_url=base, api_key_env=env)
        with pytest.raises(ProviderError, match=rf"answered with a redirect \(HTTP {status}\)"):
            await live_test_of(settings, {env: "sk-kept-secret"})
        assert len(server.requests) == 1  # asked once, at its own address
        assert elsewhere.requests == []  # and never elsewhere, key or no key


ERROR_PAGE = (b"<!DOCTYPE html><html><head><title>500 Internal Server Error</title><style>"
              b"body{font:9pt}</style></head><body><h1>Internal Server Error</h1><pre>Traceback "
              b"(most recent call last):\n  File \"app.py\", line 3</pre></body></html>")


@pytest.mark.parametrize("provider", CASES)
async def test_an_error_sent_as_a_web_page_is_told_in_plain_words(provider):
    path, env = CASES[provider]
    with WebServer() as server:
        server.routes[("POST", path)] = lambda q, b: (500, {"Content-Type": "text/html"},
                                                      ERROR_PAGE)
        base = server.url("/v1" if provider != "anthropic" else "")
        settings = ModelSettings(provider=provider, model="m", base_url=base, api_key_env=env)
        with pytest.raises(ProviderError) as failed:
            await live_test_of(settings, {env: "sk-kept-secret"})
    said = str(failed.value)
    assert "HTTP 500: Internal Server Error, sent as a web page" in said, said
    assert "<" not in said and "Traceback" not in said and "font" not in said
