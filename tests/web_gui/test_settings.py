"""The settings page at a desk and on a phone: a section saved as one form with the
file's comments kept, a bad value refused beside its field with nothing written,
a model's fields following its provider, the model picked from the list a fake
server serves, a key kept in secrets.toml and never shown."""

from __future__ import annotations

import stat

import pytest
from playwright.sync_api import expect

from tests.fakes.local_servers import FakeLocalServer

from .conftest import WAIT, screenshot

SCREENS = {"desk": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
KEY = "k3Y-9fQ2vX7LmZpR4tW8sN1bC6dH0jA5"  # a made-up key: never to be shown or put in config.toml


@pytest.fixture(params=list(SCREENS))
def screen(request, browser, live):
    """A fresh page of the session's server at a desk's or a phone's size: (name, page)."""
    phone = request.param == "phone"
    context = browser.new_context(viewport=SCREENS[request.param], is_mobile=phone,
                                  has_touch=phone)
    page = context.new_page()
    page.set_default_timeout(WAIT * 1000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(live.address)
    try:
        yield request.param, page
    finally:
        context.close()
    assert not errors, f"the page's script failed: {errors}"


@pytest.fixture
def files(live, tmp_path):
    """config.toml with a scripted model and comments; both files put back afterwards."""
    config, secrets = live.paths.config_file, live.paths.secrets_file
    kept = {p: p.read_bytes() for p in (config, secrets) if p.exists()}
    script = tmp_path / "probe.toml"
    script.write_text('[[responses]]\ntext = "ready"\n')
    config.write_text("# chosen with care\n[shell]\ntimeout_s = 60  # a command's minute\n\n"
                      f"[models.reasoning]\nprovider = \"scripted\"\nmodel = \"probe\"\n"
                      f"script = \"{script}\"\n")
    try:
        yield config, secrets
    finally:
        for path in (config, secrets):
            if path in kept:
                path.write_bytes(kept[path])
            else:
                path.unlink(missing_ok=True)


def test_a_section_is_saved_as_one_form_and_a_bad_value_is_refused_beside_its_field(
        screen, live, files):
    name, page = screen
    config, _ = files
    page.goto(f"{live.base}/settings")
    section = page.locator("#section-shell")
    expect(section.locator("h2")).to_have_text("Commands")
    expect(page.locator("#section-files h2")).to_have_text("Files the agent may touch")
    if name == "desk":
        screenshot(page, "settings")
    expect(section.locator("form.section-form")).to_have_count(1)
    expect(section.get_by_role("button", name="Save commands")).to_have_count(1)  # one per section
    advanced = section.locator("details.advanced")
    expect(advanced.locator('.field[data-key="shell.max_timeout_s"]')).to_be_hidden()  # folded

    section.locator('[name="shell.timeout_s"]').fill("90")
    section.locator('[name="shell.network"]').check()
    section.get_by_role("button", name="Save commands").click()
    expect(section.locator(".outcome")).to_contain_text("Saved: shell.network, shell.timeout_s")
    text = config.read_text()
    assert "timeout_s = 90" in text and "network = true" in text
    assert "# chosen with care" in text and "# a command's minute" in text
    assert "max_timeout_s" not in text  # what was not changed is not written

    before = config.read_bytes()
    section.locator('[name="shell.timeout_s"]').fill("120")  # fine alone…
    advanced.locator("summary").click()
    section.locator('[name="shell.max_timeout_s"]').fill("0")  # …but this is not
    section.get_by_role("button", name="Save commands").click()
    problem = section.locator('.field[data-key="shell.max_timeout_s"] .problem')
    expect(problem).to_be_visible()
    expect(problem).to_have_text("Max timeout (seconds): “0” is too small. Type a number above 0.")
    expect(problem).not_to_contain_text("Input should")
    expect(problem).not_to_contain_text("Fix it in config.toml")  # nothing was written to it
    expect(section.locator(".outcome.error")).to_contain_text("nothing was written")
    expect(section.locator('[name="shell.max_timeout_s"]')).to_have_attribute("aria-invalid", "true")
    assert config.read_bytes() == before  # neither value was written
    problem.scroll_into_view_if_needed()
    screenshot(page, f"settings-refused-{name}", full_page=False)


def test_a_secret_typed_into_a_setting_is_refused_and_not_written(screen, live, files):
    _, page = screen
    config, _ = files
    page.goto(f"{live.base}/settings")
    section = page.locator("#section-web")
    section.locator('[name="web.search_url"]').fill("sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789")
    section.get_by_role("button", name="Save the web").click()
    problem = section.locator('.field[data-key="web.search_url"] .problem')
    expect(problem).to_contain_text("secrets do not go in config.toml")
    expect(problem).not_to_contain_text("abcdefghij")  # the error never repeats it
    assert "sk-ant" not in config.read_text()


def test_the_model_follows_its_provider_and_is_picked_from_the_server_s_list(
        screen, live, files):
    name, page = screen
    config, secrets = files
    with FakeLocalServer("vllm", {"Qwen/Qwen2.5-7B-Instruct": 32768, "llama-3.1-8b": 8192},
                         key=KEY) as server:
        page.goto(f"{live.base}/settings")
        model = page.locator("#section-models-reasoning")
        expect(model.locator("h2")).to_have_text("Model")
        provider = model.locator('[name="models.reasoning.provider"]')
        expect(provider).to_have_value("scripted")
        script = model.locator('.field[data-key="models.reasoning.script"]')
        base_url = model.locator('.field[data-key="models.reasoning.base_url"]')
        key_row = model.locator('.field[data-key="models.reasoning.key"]')
        expect(script).to_be_visible()
        expect(base_url).to_be_hidden()  # nothing of a served model under a scripted one
        expect(key_row).to_be_hidden()

        model.get_by_role("button", name="Test this model").click()
        expect(model.locator(".outcome")).to_contain_text("scripted/probe answered “ready”")

        provider.select_option("vllm")
        expect(script).to_be_hidden()  # nothing of the scripted model under a served one
        expect(model.locator('.field[data-key="models.reasoning.token_delay_s"]')).to_be_hidden()
        expect(base_url).to_be_visible()
        expect(key_row).to_be_visible()
        base_url.locator("input").fill(server.base_url)
        model.locator('[name="models.reasoning.api_key_env"]').fill("VLLM_API_KEY")
        key_row.locator("input").fill(KEY)  # the fake answers only with the key
        model.get_by_role("button", name="List the server's models").click()
        served = model.locator("select.served")
        expect(served).to_be_visible()
        expect(served.locator("option")).to_have_text(
            ["probe (not served now)", "Qwen/Qwen2.5-7B-Instruct", "llama-3.1-8b", "Another name…"])
        served.select_option("llama-3.1-8b")
        window = model.locator(".served-window")  # read from the server's list (max_model_len)
        expect(window).to_contain_text("serves llama-3.1-8b with 8,192 tokens")
        # A larger window is said at once, and saving it asks first; nothing is written.
        before = config.read_bytes()
        wide = model.locator('[name="models.reasoning.context_window"]')
        wide.fill("200000")
        expect(window.locator(".window-warning")).to_contain_text(
            "200,000 is larger than the server's 8,192")
        model.get_by_role("button", name="Save model").click()
        refused = model.locator('.field[data-key="models.reasoning.context_window"] .problem')
        expect(refused).to_contain_text("serves llama-3.1-8b with 8,192 tokens, and you typed "
                                        "200,000")
        expect(refused.get_by_role("button", name="Save 200,000 anyway")).to_be_visible()
        expect(model.locator(".outcome.error")).to_contain_text("nothing was written")
        assert config.read_bytes() == before
        refused.scroll_into_view_if_needed()
        screenshot(page, f"settings-window-{name}", full_page=False)
        refused.get_by_role("button", name="Use 8192").click()
        expect(refused).to_be_hidden()
        expect(model.locator('[name="models.reasoning.context_window"]')).to_have_value("8192")
        screenshot(page, f"settings-model-{name}", full_page=False)
        model.get_by_role("button", name="Save model").click()
        expect(model.locator(".outcome")).to_contain_text("the key kept in")
        assert any(r.path == "/v1/models" and r.headers.get("authorization") == f"Bearer {KEY}"
                   for r in server.requests)

    text = config.read_text()
    assert 'provider = "vllm"' in text and 'model = "llama-3.1-8b"' in text
    assert "context_window = 8192" in text
    assert f'base_url = "{server.base_url}"' in text and 'api_key_env = "VLLM_API_KEY"' in text
    assert "script" not in text and KEY not in text  # the scripted field went with its provider
    assert "# chosen with care" in text
    assert f'VLLM_API_KEY = "{KEY}"' in secrets.read_text()
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600

    page.reload()
    key_input = page.locator('[name="models.reasoning.key"]')
    expect(key_input).to_have_value("")  # never shown again…
    expect(page.locator('.field[data-key="models.reasoning.key"] .help')).to_contain_text(
        "a key is kept in secrets.toml (VLLM_API_KEY)")  # …only said to be there
    assert KEY not in page.content()


def test_a_server_that_cannot_be_asked_leaves_the_name_to_type(page, live, files):
    page.goto(f"{live.base}/settings")
    model = page.locator("#section-models-reasoning")
    model.locator('[name="models.reasoning.provider"]').select_option("llamacpp")
    model.locator('[name="models.reasoning.base_url"]').fill("http://127.0.0.1:9/v1")
    model.get_by_role("button", name="List the server's models").click()
    state = model.locator(".served-state.error")
    expect(state).to_contain_text("cannot reach llama.cpp server")
    expect(state).to_contain_text("Type the model's name")
    expect(model.locator('[name="models.reasoning.model"]')).to_be_visible()
    expect(model.locator("select.served")).to_be_hidden()


def test_the_save_point_model_left_unset_is_the_model_above(page, live, files):
    config, _ = files
    page.goto(f"{live.base}/settings")
    chronicler = page.locator("#section-models-chronicler")
    expect(chronicler.locator('[name="models.chronicler.provider"]')).to_have_value("")
    expect(chronicler.locator('[name="models.chronicler.provider"] option').first).to_have_text(
        "(the model above)")
    expect(chronicler.locator('.field[data-key="models.chronicler.base_url"]')).to_be_hidden()
    expect(chronicler.locator('.field[data-key="models.chronicler.context_window"]')).to_be_hidden()
    chronicler.locator('[name="models.chronicler.provider"]').select_option("ollama")
    expect(chronicler.locator('.field[data-key="models.chronicler.context_window"]')).to_be_visible()
    chronicler.locator('[name="models.chronicler.provider"]').select_option("")
    chronicler.get_by_role("button", name="Save model for save points").click()
    expect(chronicler.locator(".outcome")).to_have_text("Nothing changed.")
    assert "chronicler" not in config.read_text()


def test_a_bad_value_in_the_file_is_shown_beside_its_field_and_fixed_there(page, live, files):
    config, _ = files
    config.write_text(config.read_text() + "\n[cycle]\nmax_steps = 0\n")
    page.goto(f"{live.base}/settings")
    expect(page.locator("main > p.error")).to_contain_text("the agent will not start until")
    section = page.locator("#section-cycle")
    problem = section.locator('.field[data-key="cycle.max_steps"] .problem')
    expect(problem).to_be_visible()
    expect(problem).to_have_text("Max steps: “0” is too small. Type 1 or more.")
    expect(section.locator('[name="cycle.max_steps"]')).to_have_value("0")  # as the file has it
    section.locator('[name="cycle.max_steps"]').fill("12")
    section.get_by_role("button", name="Save work on one message").click()
    expect(section.locator(".outcome")).to_contain_text("Saved: cycle.max_steps")
    assert "max_steps = 12" in config.read_text()
    page.reload()
    expect(page.locator("main > p.error")).to_have_count(0)


def test_the_folders_the_agent_may_touch_are_rows_of_a_folder_and_its_mode(page, live, files,
                                                                           tmp_path):
    config, _ = files
    page.goto(f"{live.base}/settings")
    section = page.locator("#section-files")
    rows = section.locator(".roots .root")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".root-path")).to_have_value("~/noema-workspace")  # the default
    section.get_by_role("button", name="Add a folder").click()
    rows.nth(1).locator(".root-path").fill(str(tmp_path / "notes"))
    rows.nth(1).locator(".root-mode").select_option("read-only")
    section.scroll_into_view_if_needed()
    screenshot(page, "settings-files", full_page=False)
    section.get_by_role("button", name="Save files the agent may touch").click()
    expect(section.locator(".outcome")).to_contain_text("Saved: files.roots")
    from noema.config import load_config

    roots = load_config(live.paths).files.roots
    assert [(str(r.path), r.mode) for r in roots] == [
        ("~/noema-workspace", "read-write"), (str(tmp_path / "notes"), "read-only")]

    page.reload()
    expect(rows).to_have_count(2)
    rows.nth(1).locator(".root-path").fill(".")  # no folder at all: refused beside the field
    section.get_by_role("button", name="Save files the agent may touch").click()
    expect(section.locator('.field[data-key="files.roots"] .problem')).to_contain_text(
        "files.roots.1.path")
    rows.nth(1).get_by_role("button", name="Remove").click()
    section.get_by_role("button", name="Save files the agent may touch").click()
    expect(section.locator(".outcome")).to_contain_text("Saved: files.roots")
    assert len(load_config(live.paths).files.roots) == 1


def test_a_list_is_a_field_an_item_and_a_bad_item_is_refused_beside_itself(screen, live, files):
    import tomllib

    name, page = screen
    config, _ = files
    page.goto(f"{live.base}/settings")
    page.locator('.field[data-key="files.deny"]').scroll_into_view_if_needed()
    screenshot(page, f"settings-deny-{name}", full_page=False)  # a long list, an item a field
    telegram = page.locator("#section-telegram")
    ids = telegram.locator('.field[data-key="telegram.chat_ids"]')
    expect(ids.locator(".entry")).to_have_count(0)
    ids.get_by_role("button", name="Add a chat id").click()
    ids.get_by_role("textbox", name="Chat ids, item 1").fill("123456789")
    ids.get_by_role("textbox", name="Chat ids, item 1").press("Enter")  # Enter opens the next
    ids.get_by_role("textbox", name="Chat ids, item 2").fill("-1001234567890")
    telegram.get_by_role("button", name="Save telegram").click()
    expect(telegram.locator(".outcome")).to_contain_text("Saved: telegram.chat_ids")
    assert tomllib.loads(config.read_text())["telegram"]["chat_ids"] == [123456789, -1001234567890]
    assert "# chosen with care" in config.read_text()

    web = page.locator("#section-web")
    web.locator("details.advanced summary").click()
    hosts = web.locator('.field[data-key="web.trusted_hosts"]')
    for host in ("docs.python.org", "https://bad host/", "*.example.org"):
        hosts.get_by_role("button", name="Add a host").click()
        hosts.locator(".entry-value").last.fill(host)
    before = config.read_bytes()
    web.get_by_role("button", name="Save the web").click()
    entries = hosts.locator(".entry")
    problem = entries.nth(1).locator(".problem")
    expect(problem).to_be_visible()
    expect(problem).to_contain_text("'https://bad host/' is not a host name")
    expect(entries.nth(1).locator(".entry-value")).to_have_attribute("aria-invalid", "true")
    expect(entries.nth(0).locator(".problem")).to_be_hidden()  # the good ones say nothing
    expect(entries.nth(2).locator(".problem")).to_be_hidden()
    expect(web.locator(".outcome.error")).to_contain_text("nothing was written")
    assert config.read_bytes() == before
    hosts.scroll_into_view_if_needed()
    screenshot(page, f"settings-list-refused-{name}", full_page=False)

    entries.nth(1).get_by_role("button", name="Remove item 2").click()
    expect(entries).to_have_count(2)
    expect(entries.nth(1).locator(".entry-value")).to_have_accessible_name("Trusted hosts, item 2")
    web.get_by_role("button", name="Save the web").click()
    expect(web.locator(".outcome")).to_contain_text("Saved: web.trusted_hosts")
    assert tomllib.loads(config.read_text())["web"]["trusted_hosts"] == [
        "docs.python.org", "*.example.org"]

    page.reload()  # the lists come back as their items
    values = page.locator('.field[data-key="telegram.chat_ids"] .entry-value')
    expect(values).to_have_count(2)
    expect(values.nth(1)).to_have_value("-1001234567890")
    ids = page.locator('.field[data-key="telegram.chat_ids"]')
    ids.get_by_role("button", name="Add a chat id").click()
    ids.get_by_role("textbox", name="Chat ids, item 3").fill("my group")
    page.get_by_role("button", name="Save telegram").click()
    expect(ids.locator(".entry").nth(2).locator(".problem")).to_contain_text(
        "'my group' is not a whole number")
    ids.scroll_into_view_if_needed()
    screenshot(page, f"settings-list-number-{name}", full_page=False)


def test_the_senses_log_files_are_rows_of_fields_not_toml(sized, live, files, tmp_path):
    import tomllib

    name, page = sized
    config, _ = files
    page.goto(f"{live.base}/settings")
    section = page.locator("#section-perception")
    logs = section.locator('.field[data-key="perception.logs"]')
    expect(logs.locator("textarea:visible")).to_have_count(0)  # no TOML to type
    logs.get_by_role("button", name="Add a log file").click()
    row = logs.locator(".table-rows .table-row").last
    expect(row.locator("legend")).to_have_text("Log file 1")
    row.get_by_label("Path").fill(str(tmp_path / "app.log"))
    row.get_by_label("Channel").fill("log.app")
    row.locator("details.row-more summary").click()
    row.get_by_label("Window").fill("5m")
    row.scroll_into_view_if_needed()
    screenshot(page, f"settings-senses-{name}", full_page=False)
    section.get_by_role("button", name="Save senses").click()
    expect(section.locator(".outcome")).to_contain_text("Saved: perception.logs")
    table = tomllib.loads(config.read_text())["perception"]["logs"]
    assert table == [{"path": str(tmp_path / "app.log"), "channel": "log.app", "window": "5m"}]
    assert "# chosen with care" in config.read_text()

    before = config.read_bytes()
    row.get_by_label("Window").fill("soon")
    section.get_by_role("button", name="Save senses").click()
    problem = logs.locator(".field-problem")
    expect(problem).to_contain_text("Log files, log file 1, Window:")
    expect(problem).to_contain_text("Cannot read 'soon' as a duration")
    assert config.read_bytes() == before
    row.get_by_role("button", name="Remove this log file").click()
    section.get_by_role("button", name="Save senses").click()
    expect(section.locator(".outcome")).to_contain_text("Saved: perception.logs")
    assert "logs" not in tomllib.loads(config.read_text()).get("perception", {})
