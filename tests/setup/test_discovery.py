"""What each kind of server says about itself, read over real HTTP from the
fake servers: the model list and the window it serves, or one line saying
why not."""

from __future__ import annotations

import socket

import pytest

from noema.providers.discovery import OLLAMA_SERVED_DEFAULT, DiscoveryFailed, ServerProbe
from tests.fakes.local_servers import FakeLocalServer


async def probe(server: FakeLocalServer, provider: str, model: str | None = None,
                key: str | None = None):
    async with ServerProbe(provider, server.base_url, key) as asking:
        names = await asking.models()
        return names, await asking.window(model or names[0])


async def test_ollama_lists_its_tags_and_says_the_num_ctx_a_model_is_served_with():
    with FakeLocalServer("ollama", {"llama3.1:8b": 131072, "qwen3:4b": 40960},
                         num_ctx={"qwen3:4b": 8192}) as server:
        names, window = await probe(server, "ollama", "qwen3:4b")
        paths = [(r.method, r.path) for r in server.requests]
    assert names == ["llama3.1:8b", "qwen3:4b"]
    assert window.tokens == 8192 and "num_ctx" in window.source and window.note is None
    assert ("GET", "/api/tags") in paths and ("POST", "/api/show") in paths


async def test_ollama_without_num_ctx_is_taken_at_its_default_with_a_note():
    with FakeLocalServer("ollama", {"llama3.1:8b": 131072}) as server:
        _, window = await probe(server, "ollama")
    assert window.tokens == OLLAMA_SERVED_DEFAULT
    assert "131,072" in window.note and "OLLAMA_CONTEXT_LENGTH" in window.note


async def test_ollama_a_loaded_model_says_its_window_and_a_short_model_its_length():
    with FakeLocalServer("ollama", {"big:1": 131072, "small:1": 2048},
                         loaded={"big:1": 32768}) as server:
        async with ServerProbe("ollama", server.base_url) as asking:
            loaded, short = await asking.window("big:1"), await asking.window("small:1")
    assert loaded.tokens == 32768 and "/api/ps" in loaded.source
    assert short.tokens == 2048 and short.note is None


@pytest.mark.parametrize("flat", [False, True])
async def test_llamacpp_says_n_ctx_in_props(flat):
    with FakeLocalServer("llamacpp", {"SmolLM2-135M-Instruct.gguf": 4096},
                         props_flat=flat) as server:
        names, window = await probe(server, "llamacpp")
    assert names == ["SmolLM2-135M-Instruct.gguf"]
    assert window.tokens == 4096 and "/props" in window.source


async def test_vllm_says_max_model_len_and_a_plain_server_says_nothing():
    with FakeLocalServer("vllm", {"Qwen/Qwen3-8B": 32768}) as server:
        _, window = await probe(server, "vllm")
    assert window.tokens == 32768 and "max_model_len" in window.source
    with FakeLocalServer("openai", {"some-model": None}) as server:
        assert await probe(server, "llamacpp") == (["some-model"], None)  # /props is a 404


async def test_a_key_is_sent_and_a_refusal_says_so():
    with FakeLocalServer("vllm", {"m": 8192}, key="local-key") as server:
        names, _ = await probe(server, "vllm", key="local-key")
        assert names == ["m"]
        assert server.requests[0].headers["authorization"] == "Bearer local-key"
        with pytest.raises(DiscoveryFailed, match="refused the request .HTTP 401.: the key"):
            await probe(server, "vllm", key="wrong")


async def test_a_server_that_is_not_there_is_one_line():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    async with ServerProbe("ollama", f"http://127.0.0.1:{port}/v1") as asking:
        with pytest.raises(DiscoveryFailed) as caught:
            await asking.models()
    text = str(caught.value)
    assert "\n" not in text and f"cannot reach Ollama at http://127.0.0.1:{port}/api/tags" in text
    assert "is the server running" in text


async def test_a_server_serving_nothing_says_how_to_get_a_model():
    with FakeLocalServer("ollama", {}) as server:
        async with ServerProbe("ollama", server.base_url) as asking:
            with pytest.raises(DiscoveryFailed, match="serves no model yet .`ollama pull"):
                await asking.models()


async def test_an_answer_in_another_shape_is_refused_in_words():
    with FakeLocalServer("llamacpp", {"m": 4096}) as server:  # no /api/tags on llama.cpp
        async with ServerProbe("ollama", server.base_url) as asking:
            with pytest.raises(DiscoveryFailed, match="answered HTTP 404 to GET"):
                await asking.models()


async def test_anthropic_is_asked_with_its_own_headers_at_its_own_path():
    with FakeLocalServer("openai", {"claude-sonnet-4-5": None}) as server:
        root = server.base_url.removesuffix("/v1")  # Anthropic's address has no /v1
        async with ServerProbe("anthropic", root, "sk-ant-test") as asking:
            names, window = await asking.models(), await asking.window("claude-sonnet-4-5")
        asked = server.requests[0]
    assert names == ["claude-sonnet-4-5"] and window is None  # the catalogue's figure holds
    assert asked.path == "/v1/models" and asked.headers["x-api-key"] == "sk-ant-test"
    assert asked.headers["anthropic-version"] and "authorization" not in asked.headers


# -- redirects: within the server's own origin only ----------------------------------------

def redirecting_site(routes: dict):
    from tests.fakes.web_server import WebServer

    site = WebServer()
    site.routes.update(routes)
    return site


async def test_a_redirect_to_another_origin_is_refused_and_carries_no_key():
    from tests.fakes.web_server import redirect

    with FakeLocalServer("vllm", {"internal-secret-model": 8192}) as internal:
        elsewhere = f"{internal.base_url}/models"
        with redirecting_site({("GET", "/v1/models"): redirect(elsewhere, 307)}) as site:
            async with ServerProbe("vllm", site.url("/v1"), "kept-key") as asking:
                with pytest.raises(DiscoveryFailed, match="redirected to another address") as e:
                    await asking.models()
        assert internal.requests == []  # neither the probe nor the key went there
    assert "internal-secret-model" not in str(e.value)
    assert f"another address ({internal.base_url.removesuffix('/v1')});" in str(e.value)


async def test_anthropic_s_key_does_not_follow_a_redirect_either():
    from tests.fakes.web_server import redirect

    with FakeLocalServer("openai", {"claude-internal": None}) as internal:
        with redirecting_site({("GET", "/v1/models"): redirect(
                f"{internal.base_url}/models", 307)}) as site:
            async with ServerProbe("anthropic", site.url(""), "sk-ant-kept") as asking:
                with pytest.raises(DiscoveryFailed, match="redirected to another address"):
                    await asking.models()
            assert site.requests[0][2]["x-api-key"] == "sk-ant-kept"  # sent to its own server
        assert internal.requests == []


async def test_ollama_never_posts_back_what_another_origin_answered():
    from tests.fakes.web_server import redirect

    with FakeLocalServer("ollama", {"from-the-intranet": 8192}) as internal:
        with redirecting_site({("GET", "/api/tags"): redirect(
                f"{internal.base_url.removesuffix('/v1')}/api/tags", 302)}) as site:
            async with ServerProbe("ollama", site.url("/v1")) as asking:
                with pytest.raises(DiscoveryFailed, match="redirected to another address"):
                    await asking.models()
            assert [(m, p) for m, p, _, _ in site.requests] == [("GET", "/api/tags")]
        assert internal.requests == []


async def test_a_redirect_within_the_server_is_followed():
    import json

    from tests.fakes.web_server import page, redirect

    listing = json.dumps({"data": [{"id": "m", "max_model_len": 4096}]})
    with redirecting_site({("GET", "/v1/models"): redirect("/api/v1/models", 308),
                           ("GET", "/api/v1/models"): page("application/json", listing)}) as site:
        async with ServerProbe("vllm", site.url("/v1")) as asking:
            assert await asking.models() == ["m"]
