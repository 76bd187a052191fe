"""Bad configuration gets a message that names the key and the fix."""

import os
import stat

import pytest

from noema import config as configuration
from noema.config import ConfigError, load_config, load_secrets, set_value
from noema.paths import AgentPaths


@pytest.fixture
def paths(tmp_path):
    return AgentPaths.for_agent("ana", tmp_path).ensure()


def write(paths, text):
    paths.config_file.write_text(text, encoding="utf-8")


def problems(paths, environ=None):
    with pytest.raises(ConfigError) as caught:
        load_config(paths, environ or {})
    return "\n".join(caught.value.problems)


def test_no_file_means_defaults_and_no_model(paths):
    config = load_config(paths, {})
    assert not config.has_model and config.agent.language == "en"


def test_a_full_file_loads(paths):
    write(paths, """
[agent]
language = "es"
timezone = "Europe/Madrid"
[models.reasoning]
provider = "openai"
model = "gpt-4o-mini"
[models.chronicler]
provider = "ollama"
model = "llama3.1:8b"
""")
    config = load_config(paths, {})
    assert config.models.reasoning.model == "gpt-4o-mini"
    assert config.chronicler.provider == "ollama"


def test_a_misspelt_key_is_named_with_a_suggestion(paths):
    write(paths, "[agent]\nlanguaje = 'es'\n")
    text = problems(paths)
    assert "agent.languaje: unknown setting. Did you mean 'language'?" in text


def test_a_missing_key_says_where_to_add_it(paths):
    write(paths, "[models.reasoning]\nprovider = 'openai'\n")
    text = problems(paths)
    assert "models.reasoning.model: required" in text
    assert "under [models.reasoning]" in text and "NOEMA__MODELS__REASONING__MODEL" in text


def test_a_wrong_value_says_what_was_given(paths):
    write(paths, "[cycle]\nmax_steps = 0\n[agent]\ntimezone = 'Mars/Olympus'\n")
    text = problems(paths)
    assert "cycle.max_steps" in text and "(got 0)" in text
    assert "'Mars/Olympus' is not an IANA time zone" in text


def test_an_unknown_provider_lists_the_known_ones(paths):
    write(paths, "[models.reasoning]\nprovider = 'openia'\nmodel = 'x'\n")
    text = problems(paths)
    assert "unknown provider 'openia'" in text and "openai" in text


def test_broken_toml_is_reported_as_such(paths):
    write(paths, "[agent\nlanguage = 'es'\n")
    assert "not valid TOML" in problems(paths)


def test_environment_overrides_the_file(paths):
    write(paths, "[models.reasoning]\nprovider = 'openai'\nmodel = 'gpt-4o'\n")
    config = load_config(paths, {"NOEMA__MODELS__REASONING__MODEL": "gpt-4o-mini",
                                 "NOEMA__CYCLE__MAX_STEPS": "7"})
    assert config.models.reasoning.model == "gpt-4o-mini" and config.cycle.max_steps == 7
    assert "cycle.max_steps" in problems(paths, {"NOEMA__CYCLE__MAX_STEPS": "many"})


def test_secrets_come_from_the_file_and_the_environment_wins(paths):
    paths.secrets_file.write_text('OPENAI_API_KEY = "from-file"\nOTHER = "x"\n')
    os.chmod(paths.secrets_file, 0o644)
    secrets = load_secrets(paths, {"OPENAI_API_KEY": "from-env"})
    assert secrets["OPENAI_API_KEY"] == "from-env" and secrets["OTHER"] == "x"
    assert "chmod 600" in configuration.secrets_file_warning(paths)
    os.chmod(paths.secrets_file, stat.S_IRUSR | stat.S_IWUSR)
    assert configuration.secrets_file_warning(paths) is None


def test_set_value_validates_before_writing_and_keeps_comments(paths):
    write(paths, "# my settings\n[agent]\nlanguage = 'en'  # for now\n")
    set_value(paths, "agent.language", "es")
    text = paths.config_file.read_text()
    assert "# my settings" in text and "# for now" in text and '"es"' in text
    set_value(paths, "cycle.max_steps", "12")
    assert load_config(paths, {}).cycle.max_steps == 12
    with pytest.raises(ConfigError, match="cycle.max_steps"):
        set_value(paths, "cycle.max_steps", "-1")
    assert load_config(paths, {}).cycle.max_steps == 12  # the bad value never landed
    with pytest.raises(ConfigError, match="secrets do not go in config.toml"):
        set_value(paths, "models.reasoning.api_key", "sk-123")


def test_show_never_contains_secrets(paths):
    write(paths, "[models.reasoning]\nprovider = 'openai'\nmodel = 'gpt-4o'\n")
    shown = configuration.show(load_config(paths, {"OPENAI_API_KEY": "sk-secret"}))
    assert "gpt-4o" in shown and "sk-secret" not in shown


def test_agent_names_are_checked():
    with pytest.raises(ValueError, match="not usable"):
        AgentPaths.for_agent("../etc")
