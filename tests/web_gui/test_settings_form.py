"""Saving one section of the settings page, without a browser: only what changed is
written, a model's fields follow its provider, an emptied field goes back to its
default, a key goes to secrets.toml alone, and a refusal writes nothing."""

from __future__ import annotations

import stat
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from noema.config import load_config
from noema.interfaces.web.settings import SaveRefused, form, save_section, toml_string
from noema.paths import AgentPaths

KEY = "k3Y-9fQ2vX7LmZpR4tW8sN1bC6dH0jA5"


@pytest.fixture
def paths(tmp_path):
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    paths.root.mkdir(parents=True)
    script = tmp_path / "s.toml"
    script.write_text('[[responses]]\ntext = "hi"\n')
    paths.config_file.write_text(f'# mine\n[models.reasoning]\nprovider = "scripted"\n'
                                 f'model = "probe"\nscript = "{script}"\n')
    return paths


def _values(paths, section):
    found = next(s for s in form(load_config(paths)) if s.key == section)
    return {f.key: ("true" if f.checked else "false") if f.widget == "checkbox" else f.value
            for f in found.fields if f.widget != "secret"}


def test_only_what_changed_is_written_and_comments_stay(paths):
    values = _values(paths, "shell") | {"shell.timeout_s": "90"}
    saved = save_section(paths, "shell", values)
    assert saved.changed == ("shell.timeout_s",)
    text = paths.config_file.read_text()
    assert "# mine" in text and tomllib.loads(text)["shell"] == {"timeout_s": 90}
    assert save_section(paths, "shell", values).changed == ()  # saved again: nothing new


def test_a_new_provider_takes_the_old_provider_s_fields_away(paths):
    values = _values(paths, "models.reasoning") | {
        "models.reasoning.provider": "vllm", "models.reasoning.base_url": "http://127.0.0.1:9/v1"}
    saved = save_section(paths, "models.reasoning", values)
    assert "models.reasoning.script" in saved.changed
    table = tomllib.loads(paths.config_file.read_text())["models"]["reasoning"]
    assert table == {"provider": "vllm", "model": "probe", "base_url": "http://127.0.0.1:9/v1"}


def test_an_emptied_field_goes_back_to_its_default(paths):
    save_section(paths, "cycle", {"cycle.max_steps": "30"})
    save_section(paths, "cycle", {"cycle.max_steps": ""})
    assert not tomllib.loads(paths.config_file.read_text()).get("cycle")
    assert load_config(paths).cycle.max_steps == 24


def test_a_bad_value_is_named_beside_its_field_and_nothing_is_written(paths):
    before = paths.config_file.read_bytes()
    with pytest.raises(SaveRefused) as refused:
        save_section(paths, "shell", {"shell.timeout_s": "90", "shell.max_timeout_s": "soon"})
    assert list(refused.value.problems) == ["shell.max_timeout_s"]
    said = refused.value.problems["shell.max_timeout_s"][0]
    assert said == "Max timeout (seconds): “soon” is not a number. Type a number, like 600."
    assert paths.config_file.read_bytes() == before


@pytest.mark.parametrize(("typed", "words"), [
    ("abc", "Max steps: “abc” is not a whole number. Type a whole number, like 24."),
    ("0", "Max steps: “0” is too small. Type 1 or more."),
    ("9000", "Max steps: “9000” is too large. Type 500 or less."),
    ("2.5", "Max steps: “2.5” is not a whole number. Type a whole number, like 24."),
])
def test_a_refused_value_says_in_words_which_field_what_is_wrong_and_what_to_type(
        paths, typed, words):
    before = paths.config_file.read_bytes()
    with pytest.raises(SaveRefused) as refused:
        save_section(paths, "cycle", {"cycle.max_steps": typed})
    assert refused.value.problems == {"cycle.max_steps": [words]}
    said = str(refused.value)
    assert "Input should" not in said and "unable to parse" not in said
    assert "Fix it in config.toml" not in said and "NOEMA__" not in said  # nothing was written
    assert paths.config_file.read_bytes() == before


def test_a_window_larger_than_the_server_s_is_refused_until_the_person_says_so(paths):
    before = paths.config_file.read_bytes()
    values = _values(paths, "models.reasoning") | {
        "models.reasoning.provider": "vllm", "models.reasoning.base_url": "http://127.0.0.1:9/v1",
        "models.reasoning.model": "qwen", "models.reasoning.context_window": "200000"}
    with pytest.raises(SaveRefused) as refused:
        save_section(paths, "models.reasoning", values, served_window=128_000)
    assert refused.value.ask == "larger_window"
    (said,) = refused.value.problems["models.reasoning.context_window"]
    assert "serves qwen with 128,000 tokens, and you typed 200,000" in said
    assert "Use 128000" in said
    assert paths.config_file.read_bytes() == before  # nothing written without a word

    save_section(paths, "models.reasoning", values | {"models.reasoning.context_window": "128000"},
                 served_window=128_000)  # the server's own window: no question
    assert load_config(paths).models.reasoning.context_window == 128_000
    save_section(paths, "models.reasoning", values, served_window=128_000, larger_window=True)
    assert load_config(paths).models.reasoning.context_window == 200_000  # asked, and answered


def test_a_key_of_another_section_is_refused(paths):
    before = paths.config_file.read_bytes()
    with pytest.raises(SaveRefused, match="each section is saved alone"):
        save_section(paths, "shell", {"cycle.max_steps": "3"})
    assert paths.config_file.read_bytes() == before


def test_a_key_goes_to_secrets_toml_alone(paths):
    values = _values(paths, "models.reasoning") | {"models.reasoning.provider": "openai"}
    saved = save_section(paths, "models.reasoning", values, key=KEY)
    assert saved.secret == "OPENAI_API_KEY"
    assert KEY not in paths.config_file.read_text()
    assert tomllib.loads(paths.secrets_file.read_text()) == {"OPENAI_API_KEY": KEY}
    assert stat.S_IMODE(paths.secrets_file.stat().st_mode) == 0o600


def test_a_key_without_a_variable_to_hold_it_is_refused_and_nothing_is_written(paths):
    before = paths.config_file.read_bytes()
    values = _values(paths, "models.reasoning") | {
        "models.reasoning.provider": "vllm", "models.reasoning.base_url": "http://127.0.0.1:9/v1"}
    with pytest.raises(SaveRefused) as refused:
        save_section(paths, "models.reasoning", values, key=KEY)
    assert list(refused.value.problems) == ["models.reasoning.api_key_env"]
    assert paths.config_file.read_bytes() == before and not paths.secrets_file.exists()


def test_the_save_point_model_unset_is_taken_out(paths):
    values = _values(paths, "models.chronicler") | {
        "models.chronicler.provider": "ollama", "models.chronicler.model": "qwen3:4b"}
    save_section(paths, "models.chronicler", values)
    assert load_config(paths).models.chronicler.model == "qwen3:4b"
    save_section(paths, "models.chronicler", {"models.chronicler.provider": ""})
    assert load_config(paths).models.chronicler is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=40))
def test_text_is_kept_as_text_whatever_it_looks_like(paths, text):
    """A name typed into a text field is that text, never a number, a flag or TOML."""
    assert tomllib.loads("v = " + toml_string(text))["v"] == text
    try:
        save_section(paths, "mail", {"mail.display_name": text})
    except SaveRefused as refused:  # only a text that looks like a key is refused
        assert "secrets do not go in config.toml" in str(refused)
        return
    shown = load_config(paths).mail.display_name
    assert (shown or "") == text.strip()


async def test_a_kept_key_goes_only_to_the_address_it_is_kept_for(paths):
    from noema.config import write_secret
    from noema.interfaces.web.settings import served_models
    from noema.providers.discovery import DiscoveryFailed
    from tests.fakes.local_servers import FakeLocalServer

    with FakeLocalServer("vllm", {"llama-3.1-8b": 8192}, key=KEY) as server:
        paths.config_file.write_text(f'[models.reasoning]\nprovider = "vllm"\nmodel = "m"\n'
                                     f'base_url = "{server.base_url}"\napi_key_env = "VLLM_KEY"\n')
        write_secret(paths, "VLLM_KEY", KEY)
        assert await served_models(paths, "vllm", server.base_url, "VLLM_KEY", "") == \
            ["llama-3.1-8b"]
        elsewhere = server.base_url.replace("127.0.0.1", "localhost")  # another address
        with pytest.raises(DiscoveryFailed, match="key is missing or wrong"):
            await served_models(paths, "vllm", elsewhere, "VLLM_KEY", "")
        assert await served_models(paths, "vllm", elsewhere, "VLLM_KEY", KEY) == ["llama-3.1-8b"]
        # The fake records only what passed its key check: the address the key was not
        # kept for was asked without it (refused above), the others with it.
        assert [r.headers.get("authorization") for r in server.requests] == [f"Bearer {KEY}"] * 2


def test_a_file_with_a_bad_value_is_still_shown_and_fixed_from_its_section(paths):
    from noema.config import ConfigError
    from noema.interfaces.web.settings import read

    paths.config_file.write_text("[cycle]\nmax_steps = 0  # too few\n[shell]\ntimeout_s = 5\n")
    with pytest.raises(ConfigError):
        load_config(paths)
    reading = read(paths)
    assert reading.wrong == {"cycle.max_steps": "0"}  # set aside, shown as the file has it
    assert reading.config.shell.timeout_s == 5  # the rest as the file says
    assert any(p.startswith("cycle.max_steps:") for p in reading.problems)
    cycle = next(s for s in form(reading.config, wrong=reading.wrong) if s.key == "cycle")
    assert cycle.by_key()["cycle.max_steps"].value == "0"
    from noema.interfaces.web.settings import in_words

    fields = {f.key: f for f in cycle.fields}
    assert in_words(list(reading.errors), fields) == {  # beside its field, in words
        "cycle.max_steps": ["Max steps: “0” is too small. Type 1 or more."]}
    with pytest.raises(SaveRefused) as refused:  # another section cannot be saved over it…
        save_section(paths, "shell", {"shell.timeout_s": "7"})
    assert refused.value.problems == {"": [
        "Max steps: “0” is too small. Type 1 or more. This is in “Work on one message”: fix it "
        "there first, then save this section."]}
    save_section(paths, "cycle", {"cycle.max_steps": "12"})  # …its own fixes it
    assert load_config(paths).cycle.max_steps == 12
    assert "# too few" in paths.config_file.read_text()


async def test_a_bare_address_is_asked_with_the_path_its_api_is_under(paths):
    from noema.interfaces.web.settings import answers, served_models
    from tests.fakes.local_servers import FakeLocalServer

    with FakeLocalServer("vllm", {"llama-3.1-8b": 8192}) as server:
        bare = server.base_url.removesuffix("/v1")
        assert answers("vllm", bare, "", "").base_url == server.base_url
        assert await served_models(paths, "vllm", bare, "", "") == ["llama-3.1-8b"]


@pytest.mark.parametrize("text, calls, says", [
    ("ready", True, "scripted/probe answered “ready” and called the tool it was offered "
                    "(report_ready): it is ready."),
    ("", True, "scripted/probe answered with a call to the tool it was offered (report_ready), "
               "without words: it is ready."),
    ("ready", False, "scripted/probe answered “ready” but did not call the tool it was offered "
                     "(report_ready)"),
    ("", False, "scripted/probe answered, but with no words and no tool call."),
])
async def test_the_model_test_says_what_the_model_answered(paths, tmp_path, text, calls, says):
    from noema.interfaces.web.settings import test_connection

    script = tmp_path / "tools.toml"
    script.write_text(f'[[responses]]\ntext = "{text}"\n' + (
        '[[responses.tool_calls]]\nname = "report_ready"\narguments = { word = "ready" }\n'
        if calls else ""))
    paths.config_file.write_text(f'[models.reasoning]\nprovider = "scripted"\nmodel = "probe"\n'
                                 f'script = "{script}"\n')
    said = await test_connection(paths, "reasoning")
    assert said.startswith(says) and "(nothing)" not in said


def test_a_list_is_written_as_a_toml_list_and_each_bad_item_is_named_by_its_place(paths):
    sent = toml_list(["docs.python.org", "", "http://bad host/", "*.example.org", "a/b"])
    before = paths.config_file.read_bytes()
    with pytest.raises(SaveRefused) as refused:
        save_section(paths, "web", {"web.trusted_hosts": sent})
    # Places in the form, the blank field counted: the page puts each beside its field.
    assert sorted(refused.value.problems) == ["web.trusted_hosts.2", "web.trusted_hosts.4"]
    assert "'http://bad host/' is not a host name" in refused.value.problems[
        "web.trusted_hosts.2"][0]
    assert paths.config_file.read_bytes() == before
    saved = save_section(paths, "web", {"web.trusted_hosts": toml_list(
        ["docs.python.org", "", "*.example.org"])})
    assert saved.changed == ("web.trusted_hosts",)
    text = paths.config_file.read_text()
    assert tomllib.loads(text)["web"]["trusted_hosts"] == ["docs.python.org", "*.example.org"]
    assert "# mine" in text
    web = next(s for s in form(load_config(paths)) if s.key == "web")
    assert web.by_key()["web.trusted_hosts"].entries == ("docs.python.org", "*.example.org")


def test_a_list_of_numbers_takes_whole_numbers_only(paths):
    with pytest.raises(SaveRefused) as refused:
        save_section(paths, "telegram", {"telegram.chat_ids": toml_list(["12", "my group"])})
    assert refused.value.problems == {
        "telegram.chat_ids.1": ["'my group' is not a whole number, like 123456789."]}
    save_section(paths, "telegram", {"telegram.chat_ids": toml_list([" 12 ", "-100345"])})
    assert tomllib.loads(paths.config_file.read_text())["telegram"]["chat_ids"] == [12, -100345]


def test_a_list_the_page_did_not_send_as_a_list_is_refused(paths):
    with pytest.raises(SaveRefused) as refused:
        save_section(paths, "mail", {"mail.allow_from": "me@example.org"})
    assert list(refused.value.problems) == ["mail.allow_from"]


def toml_list(texts):
    """What the page sends for a list: each field's text, as a TOML list of strings."""
    return "[" + ", ".join(toml_string(t) for t in texts) + "]"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=20), max_size=5))
def test_a_list_s_items_are_kept_as_text_whatever_they_look_like(paths, texts):
    try:
        save_section(paths, "mail", {"mail.known_recipients": toml_list(texts)})
    except SaveRefused as refused:  # only a text that looks like a key is refused
        assert "secrets do not go in config.toml" in str(refused)
        return
    kept = [t.strip().lower() for t in texts if t.strip()]
    assert list(load_config(paths).mail.known_recipients) == kept


def test_log_files_are_rows_of_fields_saved_as_tables_and_unchanged_rows_are_not_written(
        paths, tmp_path):
    section = next(s for s in form(load_config(paths)) if s.key == "perception")
    logs = section.by_key()["perception.logs"]
    assert logs.widget == "tables" and logs.tables is not None
    assert [c.name for c in logs.tables.columns][:2] == ["path", "channel"]
    app_log = tmp_path / "app.log"
    sent = f'[{{ path = {toml_string(str(app_log))}, channel = "applog", window = "5m" }}]'
    saved = save_section(paths, "perception", {"perception.logs": sent})
    assert saved.changed == ("perception.logs",)
    (written,) = load_config(paths).perception.logs
    assert (written.path, written.channel, written.window) == (app_log, "applog", 300.0)

    again = _values(paths, "perception")  # the rows as the form shows them, defaults spelt out
    assert save_section(paths, "perception", again).changed == ()  # the same meaning: unwritten

    before = paths.config_file.read_bytes()
    with pytest.raises(SaveRefused) as refused:
        save_section(paths, "perception", {"perception.logs": sent.replace('"5m"', '"soon"')})
    (said,) = refused.value.problems["perception.logs"]
    assert said.startswith("Log files, log file 1, Window: ")
    assert paths.config_file.read_bytes() == before


def test_a_validator_s_sentence_names_its_field_once(paths):
    with pytest.raises(SaveRefused) as refused:
        save_section(paths, "web", {"web.search_url": "ftp://example.org/search"})
    (said,) = refused.value.problems["web.search_url"]
    assert said.startswith("Search url must be an address starting with http")


def test_a_rule_s_fields_say_which_are_needed_and_which_match_anything(paths):
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    from noema.interfaces.web.routes import HERE

    section = next(s for s in form(load_config(paths)) if s.key == "reflexes")
    rules = section.by_key()["reflexes.rules"]
    columns = {c.name: c for c in rules.tables.columns}
    assert columns["urgency"].required and columns["urgency"].kind == "select"
    assert columns["authorised"].choices == ("true", "false") and not columns["authorised"].required
    macros = Environment(loader=FileSystemLoader(HERE / "templates"),
                         autoescape=select_autoescape(default=True)).get_template("settings.html")
    page = macros.make_module({"problems": {}, "sections": [], "kinds": {}, "addresses": {},
                               "agent": "ana", "csrf": "", "page": "settings"})
    row = str(page.table_row(rules, rules.tables, None, 1))
    assert '<option value="">(choose one)</option>' in row  # the urgency a rule gives
    assert '<option value="">(any)</option>' in row  # authorised or not: either matches
