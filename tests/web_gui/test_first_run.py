"""With no model configured, the page is `noema setup` as a form: the provider,
the server's address, the key, the model picked from the server's own list,
its window, a test call, saved at once; then the agent starts in the page's
process. Meanwhile it runs the offline demo live."""

from __future__ import annotations

import asyncio
import socket
import stat
import threading
import tomllib

import httpx
import pytest
from playwright.sync_api import expect

from noema.app import NoModelConfigured
from noema.config import Config
from noema.interfaces.web import UiServer
from noema.paths import AgentPaths
from noema.security.settings import FilesSettings, RootSettings
from tests.fakes import FakeReply, FakeToolCall
from tests.fakes.local_servers import FakeLocalServer

from .conftest import WAIT, own_ui, screenshot, sign_in

SIZES = {"desk": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
KEY = "sk-local-4f9c2e7a1b"
READY = FakeReply(text="", tool_calls=(FakeToolCall("report_ready", '{"word": "ready"}'),))


def new_agent(tmp_path) -> tuple[AgentPaths, Config]:
    """An agent with no model; its workspace and senses set in its config file,
    as the agent started after the form reads them from there."""
    paths = AgentPaths.for_agent("new", tmp_path / "home")
    paths.ensure()
    workspace = tmp_path / "ws"
    paths.config_file.write_text(f'[[files.roots]]\npath = "{workspace}"\n\n'
                                 "[perception]\nenabled = false\n")
    return paths, Config(files=FilesSettings(roots=(RootSettings(path=workspace),)))


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def problem(page, field: str):
    return page.locator(f"#setup-{field}-problem")


@pytest.mark.parametrize("size", SIZES)
def test_the_first_run_form_sets_up_a_served_model_and_the_agent_starts(browser, tmp_path,
                                                                         size):
    paths, config = new_agent(tmp_path)
    served = {"qwen2.5-7b-instruct": 32768, "llama-3.1-8b-instruct": 8192}
    with FakeLocalServer("vllm", served, key=KEY) as server, \
            own_ui(browser, paths, config, "first-run", SIZES[size]) as (ui, page, _):
        page.set_default_timeout(WAIT * 1000)
        form = page.locator("#setup")
        expect(page.get_by_role("heading", name="First, a model")).to_be_visible()
        page.get_by_label("Provider").select_option("vllm")
        address = page.get_by_label("Server address")
        expect(address).to_have_value("http://localhost:8000/v1")  # the catalogue's

        # A server that does not answer: said beside the address.
        address.fill(f"http://127.0.0.1:{closed_port()}/v1")
        form.get_by_role("button", name="List models").click()
        expect(problem(page, "base_url")).to_contain_text("cannot reach vLLM")
        expect(address).to_have_attribute("aria-invalid", "true")

        # A wrong key: the server's refusal beside the key.
        address.fill(server.base_url)
        page.get_by_label("API key").fill("sk-wrong")
        form.get_by_role("button", name="List models").click()
        expect(problem(page, "key")).to_contain_text("refused the request (HTTP 401)")
        expect(problem(page, "base_url")).to_have_text("")
        screenshot(page, f"first-run-refused-{size}", full_page=False)

        # The right key: the server's models, and the window it serves the first with.
        page.get_by_label("API key").fill(KEY)
        form.get_by_role("button", name="List models").click()
        model = page.get_by_label("Model", exact=True)
        expect(model.locator("option")).to_have_text(list(served))
        window = page.get_by_label("Context window")
        expect(window).to_have_value("32768")
        expect(page.locator("#setup-window-source")).to_contain_text("max_model_len")
        model.select_option("llama-3.1-8b-instruct")
        expect(window).to_have_value("8192")

        # A model the server does not serve is refused beside the model, nothing written.
        refused = page.evaluate("""() => noema.post('/api/first-run/save', {
            provider: 'vllm', base_url: document.getElementById('setup-base_url').value,
            key: document.getElementById('setup-key').value, model: 'ghost-70b',
            context_window: '8192'})""")
        assert refused["status"] == 400 and refused["body"]["field"] == "model"
        assert "does not serve 'ghost-70b'" in refused["body"]["error"]
        assert "models" not in tomllib.loads(paths.config_file.read_text())

        # The live call with a wrong key: the server's refusal beside the key, again.
        page.get_by_label("API key").fill("sk-wrong")
        form.get_by_role("button", name="Test").click()
        expect(problem(page, "key")).to_contain_text("the test failed")
        expect(problem(page, "key")).to_contain_text("invalid api key")

        page.get_by_label("API key").fill(KEY)
        server.script(READY)
        form.get_by_role("button", name="Test").click()
        state = page.locator("#setup-state")
        expect(state).to_contain_text("answered with a call to the tool it was offered (report_ready)")
        expect(state).to_contain_text("it is ready")

        form.get_by_role("button", name="Save").click()
        expect(state).to_contain_text("Saved: [models.reasoning]")
        expect(state).to_contain_text("The agent has started here with this model")
        expect(page.get_by_label("API key")).to_have_value("")  # not kept in the page
        expect(page.locator("#first-run-state")).to_have_text("model ready")  # the header too
        screenshot(page, f"first-run-saved-{size}", full_page=False)

        written = tomllib.loads(paths.config_file.read_text())
        assert written["models"]["reasoning"] == {
            "provider": "vllm", "model": "llama-3.1-8b-instruct", "base_url": server.base_url,
            "api_key_env": "VLLM_API_KEY", "context_window": 8192}
        assert written["files"]["roots"][0]["path"] == str(tmp_path / "ws")  # the rest kept
        assert KEY not in paths.config_file.read_text()
        assert tomllib.loads(paths.secrets_file.read_text())["VLLM_API_KEY"] == KEY
        assert stat.S_IMODE(paths.secrets_file.stat().st_mode) == 0o600
        assert KEY not in page.content()

        # The chat talks with the model the form chose, without a restart.
        assert ui.mode == "in-process"
        page.get_by_role("link", name="Open the chat").click()
        expect(page.locator(".first-run")).to_have_count(0)
        # The page's script has run: the status line shows the model's window.
        expect(page.locator("#context")).to_contain_text("/ 8,192 tokens")
        server.script(FakeReply(text="Hello from the served model."))
        page.locator("#message").fill("Hello?")
        page.locator("#message").press("Enter")
        expect(page.locator(".turn.assistant .body").last).to_have_text(
            "Hello from the served model.")
        assert server.requests[-1].body["model"] == "llama-3.1-8b-instruct"


def test_with_no_model_the_page_runs_the_offline_demo(browser, tmp_path):
    paths, config = new_agent(tmp_path)
    with own_ui(browser, paths, config, "first-run") as (_, page, _address):
        screenshot(page, "first-run")
        card = page.locator(".first-run.demo")
        card.get_by_role("button", name="Run the offline demo here").click()
        output = card.locator("#demo-output")
        # The demo's process starts Python and imports the stack first: allow for a busy machine.
        expect(output.locator("h2").first).to_have_text("1. A conversation with tools",
                                                        timeout=WAIT * 1000)
        expect(output).to_contain_text("person> Good morning! What time is it in Madrid")
        expect(output).to_contain_text("· get_current_time")
        expect(card.locator("#demo-state")).to_have_text("The demo is running…")  # live
        expect(output.locator("h2").nth(1)).to_contain_text("2. The process is killed",
                                                            timeout=WAIT * 1000)
        screenshot(page, "first-run-demo")
        card.get_by_role("button", name="Stop the demo").click()
        expect(card.locator("#demo-state")).to_contain_text("The demo ended early",
                                                            timeout=WAIT * 1000)
        expect(card.get_by_role("button", name="Run the offline demo here")).to_be_enabled()
        page.get_by_role("link", name="settings page").click()
        expect(page.locator('.field[data-key="models.reasoning.provider"]')).to_be_visible()


def test_the_setup_steps_take_no_forged_request_and_leave_a_configured_agent_alone(live):
    cookies, csrf = sign_in(live.server.credentials)
    body = {"provider": "vllm", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    with httpx.Client(base_url=live.base, cookies=cookies, timeout=WAIT) as client:
        forged = client.post("/api/first-run/save", json=body)
        assert forged.status_code == 403 and "CSRF" in forged.text
        configured = client.post("/api/first-run/save", json=body, headers=csrf)
        assert configured.status_code == 409
        assert "settings page" in configured.json()["error"]
    assert not live.paths.config_file.exists() or "9/v1" not in live.paths.config_file.read_text()


def test_an_agent_that_fails_to_start_after_saving_leaves_the_first_run_page_working(tmp_path):
    paths, config = new_agent(tmp_path)

    def broken_build(_paths, config, **_kwargs):
        if config.models.reasoning is None:
            raise NoModelConfigured("no reasoning model is configured")
        raise RuntimeError("the sandbox is missing")

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = UiServer(paths, config, port=0, build_app=broken_build)
    call = lambda coroutine: asyncio.run_coroutine_threadsafe(coroutine, loop).result(WAIT)  # noqa: E731
    try:
        call(server.start())
        assert server.mode == "first-run"
        paths.config_file.write_text(paths.config_file.read_text() + '\n[models.reasoning]\n'
                                     'provider = "vllm"\nmodel = "m"\n'
                                     'base_url = "http://127.0.0.1:9/v1"\n')
        with pytest.raises(RuntimeError, match="the sandbox is missing"):
            call(server._start_agent())
        assert server.mode == "first-run" and server.first_run and server.agent_app is None
        cookies, csrf = sign_in(server.credentials)
        with httpx.Client(base_url=server.address.split("/?")[0], timeout=WAIT,
                          cookies=cookies) as client:
            assert "First, a model" in client.get("/").text
            step = client.post("/api/first-run/models", json={"provider": "nobody"},
                               headers=csrf)
            assert step.status_code == 400 and step.json()["field"] == "provider"  # still a form
    finally:
        call(server.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)
