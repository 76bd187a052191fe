"""One secret, one purpose: a secret name that two settings use for different
things is refused with both settings named, in the configuration, on the
settings page and in the first-run setup, before any secret is written."""

from __future__ import annotations

import tomllib

import pytest

from noema.config import ConfigError, load_config
from noema.interfaces.web.settings import SaveRefused, form, save_section
from noema.paths import AgentPaths
from noema.setup_flow import Answers, SetupFailed, write

WEBHOOK = '[webhook]\nenabled = true\n'
TOKEN = "webhook-token-of-the-person-0123"


@pytest.fixture
def paths(tmp_path):
    paths = AgentPaths.for_agent("ana", tmp_path / "home").ensure()
    paths.secrets_file.write_text(f'NOEMA_WEBHOOK_TOKEN = "{TOKEN}"\n')
    paths.secrets_file.chmod(0o600)
    return paths


def test_a_model_key_named_as_the_webhook_token_is_refused_with_both_named(paths):
    paths.config_file.write_text(WEBHOOK + '[models.reasoning]\nprovider = "openai"\n'
                                 'model = "gpt-4o"\napi_key_env = "NOEMA_WEBHOOK_TOKEN"\n')
    with pytest.raises(ConfigError) as refused:
        load_config(paths, {})
    said = str(refused.value)
    assert ("models.reasoning.api_key_env: the secret NOEMA_WEBHOOK_TOKEN is also named by "
            "webhook.person_token_secret (the webhook's token for the person)") in said
    assert "webhook.person_token_secret: the secret NOEMA_WEBHOOK_TOKEN is also named by " \
           "models.reasoning.api_key_env (the reasoning model's key)" in said


@pytest.mark.parametrize("config, first, second", [
    ('[models.reasoning]\nprovider = "openai"\nmodel = "m"\n'
     '[telegram]\nchat_ids = [1]\ntoken_secret = "OPENAI_API_KEY"\n',  # the provider's default
     "models.reasoning.api_key_env", "telegram.token_secret"),
    (WEBHOOK + '[webhook.sources]\nalertmanager = "NOEMA_WEBHOOK_TOKEN"\n',
     "webhook.person_token_secret", "webhook.sources.alertmanager"),
    ('[web]\nsearch = "brave"\nsearch_key_env = "MAIL_PASSWORD"\n'
     '[mail]\nimap_host = "imap.example.org"\nusername = "ana"\naddress = "ana@example.org"\n'
     'password_env = "MAIL_PASSWORD"\n', "web.search_key_env", "mail.password_env"),
])
def test_every_pair_of_purposes_is_refused(paths, config, first, second):
    paths.config_file.write_text(config)
    with pytest.raises(ConfigError) as refused:
        load_config(paths, {})
    assert f"{first}: the secret" in str(refused.value) and second in str(refused.value)


def test_two_models_may_share_one_key_and_an_off_feature_claims_nothing(paths):
    paths.config_file.write_text(
        '[models.reasoning]\nprovider = "openai"\nmodel = "gpt-4o"\n'
        '[models.chronicler]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n'
        '[telegram]\ntoken_secret = "OPENAI_API_KEY"\n')  # no chat: the bot is off
    assert load_config(paths, {}).models.chronicler.model == "gpt-4o-mini"


def test_the_settings_page_refuses_it_beside_the_field_and_keeps_the_token(paths):
    paths.config_file.write_text(WEBHOOK + '[models.reasoning]\nprovider = "openai"\n'
                                 'model = "gpt-4o"\n')
    before = paths.config_file.read_bytes()
    section = next(s for s in form(load_config(paths, {})) if s.key == "models.reasoning")
    values = {f.key: f.value for f in section.fields if f.widget not in ("secret", "checkbox")}
    values["models.reasoning.api_key_env"] = "NOEMA_WEBHOOK_TOKEN"
    with pytest.raises(SaveRefused) as refused:
        save_section(paths, "models.reasoning", values, key="sk-a-model-key-0123456789")
    beside = refused.value.problems["models.reasoning.api_key_env"]
    assert any("webhook.person_token_secret" in p for p in beside), refused.value.problems
    assert paths.config_file.read_bytes() == before
    assert tomllib.loads(paths.secrets_file.read_text()) == {"NOEMA_WEBHOOK_TOKEN": TOKEN}


def test_the_first_run_setup_refuses_it_before_writing_the_key(paths):
    paths.config_file.write_text(WEBHOOK)
    answers = Answers("openai", "gpt-4o", api_key_env="NOEMA_WEBHOOK_TOKEN",
                      key="sk-a-model-key-0123456789")
    with pytest.raises(SetupFailed, match="webhook.person_token_secret"):
        write(paths, answers)
    assert tomllib.loads(paths.secrets_file.read_text()) == {"NOEMA_WEBHOOK_TOKEN": TOKEN}
    assert "models" not in tomllib.loads(paths.config_file.read_text())


def test_a_key_typed_alone_never_replaces_another_setting_s_secret(paths):
    """Nothing changes but the key: the file already names the model's default
    variable for the Telegram bot too; the key typed is refused, the bot's
    token kept."""
    paths.secrets_file.write_text('OPENAI_API_KEY = "123456:the-bot-token-of-the-person"\n')
    paths.config_file.write_text('[models.reasoning]\nprovider = "openai"\nmodel = "gpt-4o"\n'
                                 '[telegram]\nchat_ids = [1]\ntoken_secret = "OPENAI_API_KEY"\n')
    section = next(s for s in form(file_config(paths)) if s.key == "models.reasoning")
    values = {f.key: f.value for f in section.fields if f.widget not in ("secret", "checkbox")}
    with pytest.raises(SaveRefused) as refused:
        save_section(paths, "models.reasoning", values, key="sk-a-model-key-0123456789")
    beside = refused.value.problems["models.reasoning.api_key_env"]
    assert "telegram.token_secret (the Telegram bot's token)" in beside[0]
    assert "bot-token-of-the-person" in paths.secrets_file.read_text()


def file_config(paths):
    """The file as the page reads it, past the clash the agent itself refuses."""
    from noema.config import Config, read_config_file

    return Config.model_validate(read_config_file(paths.config_file))
