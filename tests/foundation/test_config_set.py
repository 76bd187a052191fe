"""`noema config set`: several pairs in one call, a section built step by step,
values that look like options, and which names are secrets."""

from __future__ import annotations

import os
import stat
import tomllib

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noema.cli import cli
from noema.config import (AssignmentError, ConfigError, is_secret_name, load_config,
                          parse_assignments, set_value, set_values, write_model, write_secret)
from noema.paths import AgentPaths


@pytest.fixture
def paths(tmp_path):
    return AgentPaths.for_agent("default", tmp_path).ensure()


def noema(paths: AgentPaths, *args: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOEMA", "OPENAI"))}
    home = paths.root.parent.parent
    return CliRunner().invoke(cli, ["--home", str(home), *args], env=env)


def on_disk(paths: AgentPaths) -> dict:
    return tomllib.loads(paths.config_file.read_text())


def test_the_two_commands_of_the_issue_work_in_either_order(paths):
    first = noema(paths, "config", "set", "models.reasoning.provider", "openai")
    assert first.exit_code == 0, first.output
    assert "note: models.reasoning.model is not set yet" in first.output
    check = noema(paths, "config", "check")
    assert check.exit_code == 1 and "models.reasoning.model: required" in check.output
    second = noema(paths, "config", "set", "models.reasoning.model", "gpt-4o-mini")
    assert second.exit_code == 0 and "note:" not in second.output
    assert on_disk(paths)["models"]["reasoning"] == {"provider": "openai", "model": "gpt-4o-mini"}
    assert load_config(paths, {}).models.reasoning.model == "gpt-4o-mini"


def test_several_pairs_in_one_call_are_written_together(paths):
    paths.config_file.write_text("# mine\n[cycle]\nmax_steps = 24  # enough\n")
    done = noema(paths, "config", "set", "models.reasoning.provider=ollama",
                 "models.reasoning.model=llama3.1:8b", "models.reasoning.context_window=8192",
                 "cycle.max_steps=12")
    assert done.exit_code == 0 and "note:" not in done.output, done.output
    text = paths.config_file.read_text()
    assert "# mine" in text and "# enough" in text
    config = load_config(paths, {})
    assert config.models.reasoning.context_window == 8192 and config.cycle.max_steps == 12


def test_one_bad_pair_writes_none_of_them(paths):
    done = noema(paths, "config", "set", "agent.language=es", "cycle.max_steps=0")
    assert done.exit_code == 1 and "cycle.max_steps" in done.output
    assert not paths.config_file.exists()


def test_a_value_like_an_option_is_a_value(paths):
    refused = noema(paths, "config", "set", "cycle.max_steps", "-5")
    assert refused.exit_code == 1
    assert "greater than or equal to 1 (got -5)" in refused.output  # the validator saw it
    named = noema(paths, "config", "set", "models.reasoning.provider=ollama",
                  "models.reasoning.model", "-tiny")  # three words: not a KEY VALUE pair
    assert named.exit_code == 2 and "is not KEY=VALUE" in named.output
    done = noema(paths, "config", "set", "models.reasoning", "{provider = 'ollama', model = '-tiny'}")
    assert done.exit_code == 0, done.output
    done = noema(paths, "config", "set", "memory.trigger_fraction", "-0.5")
    assert done.exit_code == 1 and "got -0.5" in done.output


def test_a_section_with_defaults_is_not_left_broken(paths):
    # [memory] is valid as it stands: a change that breaks it is refused, not noted
    with pytest.raises(ConfigError, match="min_block_turns cannot exceed"):
        set_values(paths, [("memory.min_block_turns", "100000")])
    assert not paths.config_file.exists()


def test_a_section_check_is_a_note_while_the_section_is_being_built(paths):
    edit = set_values(paths, [("models.reasoning.provider", "openai-compatible"),
                              ("models.reasoning.model", "local")])
    assert edit.config is None
    assert any("has no default address; set base_url" in note for note in edit.notes)
    edit = set_values(paths, [("models.reasoning.base_url", "http://127.0.0.1:8000/v1")])
    assert edit.notes == () and edit.config.models.reasoning.base_url.endswith("/v1")
    # once finished, the section is guarded like any other
    with pytest.raises(ConfigError, match="script and token_delay_s apply only"):
        set_values(paths, [("models.reasoning.script", "s.toml")])


def test_an_unfinished_section_does_not_block_other_settings(paths):
    set_values(paths, [("models.chronicler.provider", "ollama")])
    edit = set_values(paths, [("agent.language", "es")])
    assert [n.split(" is ")[0] for n in edit.notes] == ["models.chronicler.model"]
    assert on_disk(paths)["agent"]["language"] == "es"


def test_the_strict_form_refuses_what_the_step_by_step_form_notes(paths):
    with pytest.raises(ConfigError, match="models.reasoning.model: required"):
        set_value(paths, "models.reasoning.provider", "openai")
    assert not paths.config_file.exists()


def test_the_pairs_are_read_as_written():
    assert parse_assignments(["a.b", "c=d"]) == [("a.b", "c=d")]
    assert parse_assignments(["a.b=1", "c.d=[1, 2]"]) == [("a.b", "1"), ("c.d", "[1, 2]")]
    assert parse_assignments(["a.b=x=y"]) == [("a.b", "x=y")]
    with pytest.raises(AssignmentError, match="more than once"):
        parse_assignments(["a.b=1", "a.b=2"])
    with pytest.raises(AssignmentError, match="at least one"):
        parse_assignments([])


@pytest.mark.parametrize("name", ["api_key", "token", "password", "secret", "bot_token",
                                  "smtp_password", "client_secret", "private_key"])
def test_secret_names_are_refused(paths, name):
    assert is_secret_name(name)
    with pytest.raises(ConfigError, match="secrets do not go in config.toml"):
        set_values(paths, [(f"mail.{name}", "hunter2")])
    assert not paths.config_file.exists()


@pytest.mark.parametrize("name", ["key", "password_env", "token_secret", "search_key_env",
                                  "person_token_secret", "max_output_tokens", "api_key_env"])
def test_names_that_say_where_a_secret_is_are_settings(name):
    assert not is_secret_name(name)


def test_a_key_named_key_is_an_ordinary_setting(paths):
    # an urgency rule's `key` is a pattern, not a credential
    edit = set_values(paths, [("reflexes.rules", "[{ channel = 'log.*', key = 'disk', "
                                                 "urgency = 'urgent' }]")])
    assert edit.notes == () and edit.config.reflexes.rules[0].key == "disk"


def test_a_new_model_replaces_the_section_and_keeps_how_it_was_called(paths):
    paths.config_file.write_text("# top\n[models.reasoning]\nprovider = 'scripted'\nmodel = 's'\n"
                                 "script = 's.toml'\ntimeout_s = 30\n")
    config = write_model(paths, "reasoning", {"provider": "ollama", "model": "qwen3:4b",
                                              "context_window": 8192, "base_url": None})
    assert config.models.reasoning.timeout_s == 30 and config.models.reasoning.script is None
    assert "# top" in paths.config_file.read_text()
    with pytest.raises(ConfigError):
        write_model(paths, "reasoning", {"provider": "nobody", "model": "x"})
    assert on_disk(paths)["models"]["reasoning"]["model"] == "qwen3:4b"


def test_a_secret_is_written_for_the_person_only(paths):
    paths.secrets_file.write_text('OTHER = "kept"\n')
    write_secret(paths, "OPENAI_API_KEY", "sk-test-1234")
    assert stat.S_IMODE(paths.secrets_file.stat().st_mode) == 0o600
    assert tomllib.loads(paths.secrets_file.read_text()) == {"OTHER": "kept",
                                                             "OPENAI_API_KEY": "sk-test-1234"}
    with pytest.raises(ConfigError, match="not a variable name"):
        write_secret(paths, "not a name", "x")


SECTION = {"provider": "openai-compatible", "model": "local", "context_window": "8192",
           "base_url": "http://127.0.0.1:8000/v1", "timeout_s": "30"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(sorted(SECTION)), bad_at=st.integers(0, len(SECTION)))
def test_a_section_set_key_by_key_in_any_order_ends_valid(tmp_path_factory, order, bad_at):
    """Each step is written (with notes while the section is unfinished); a bad
    value slipped in anywhere is refused and leaves the file as it was."""
    paths = AgentPaths.for_agent("default", tmp_path_factory.mktemp("home")).ensure()
    for step, name in enumerate(order):
        if step == bad_at:
            before = paths.config_file.read_bytes() if paths.config_file.exists() else None
            with pytest.raises(ConfigError, match="models.reasoning.timeout_s"):
                set_values(paths, [("models.reasoning.timeout_s", "-1")])
            after = paths.config_file.read_bytes() if paths.config_file.exists() else None
            assert after == before
        edit = set_values(paths, [(f"models.reasoning.{name}", SECTION[name])])
        assert (edit.config is None) == bool(edit.notes)
        assert bool(edit.notes) == (step < len(order) - 1 and not {"provider", "model",
                                                                   "base_url"} <= set(order[:step + 1]))
    reasoning = load_config(paths, {}).models.reasoning
    assert (reasoning.model, reasoning.context_window, reasoning.timeout_s) == ("local", 8192, 30)


KNOWN = ["agent", "language", "models", "reasoning", "provider", "model", "files", "roots",
         "cycle", "max_steps", "memory", "shell", "sandbox", "mcp", "servers", "key", "token"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.lists(st.sampled_from(KNOWN) | st.text(min_size=0, max_size=6),
                              min_size=1, max_size=4), min_size=1, max_size=3),
       values=st.lists(st.sampled_from(["1", "-5", "[1, 2]", "{a = 1}", "true", "'x'", "{",
                                        "ollama", "", "\n", "[[x]]"]) | st.text(max_size=12),
                       min_size=3, max_size=3))
def test_any_keys_and_values_are_written_or_refused_in_words(tmp_path_factory, keys, values):
    paths = AgentPaths.for_agent("default", tmp_path_factory.mktemp("home")).ensure()
    paths.config_file.write_text("[[files.roots]]\npath = '/tmp/ws'\n[agent]\nlanguage = 'en'\n")
    before = paths.config_file.read_bytes()
    pairs = [(".".join(parts), value) for parts, value in zip(keys, values)]
    try:
        edit = set_values(paths, pairs)
    except ConfigError as exc:
        assert exc.problems and paths.config_file.read_bytes() == before
    else:
        assert (edit.config is None) == bool(edit.notes)
        tomllib.loads(paths.config_file.read_text())  # still TOML
