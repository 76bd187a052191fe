"""Configuration: one TOML file per agent, environment overrides, secrets apart.

`~/.noema/agents/<name>/config.toml` holds the settings. Any key can be
overridden from the environment as `NOEMA__SECTION__KEY=value` (double
underscores between levels, e.g. `NOEMA__MODELS__REASONING__MODEL=gpt-4o`).
API keys are never in the config file: they come from the environment or
from `secrets.toml` beside it, and are never printed or logged.

Every error names the key, what is wrong with it, and how to fix it.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator

from .paths import AgentPaths
from .perception.settings import PerceptionSettings
from .perception.webhook_settings import WebhookSettings
from .providers.settings import ModelSettings
from .memory.settings import MemorySettings
from .orchestrator.settings import ReflexSettings
from .security.settings import (
    AutonomySettings,
    FilesSettings,
    HandsSettings,
    ShellSettings,
    no_folder_can_be_made_in,
)
from .toolservers.settings import McpSettings
from .docs.settings import DocsSettings
from .web.settings import WebSettings
from .channels.mail.settings import MailSettings
from .channels.telegram.settings import TelegramSettings

ENV_PREFIX = "NOEMA__"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class AgentSection(_Section):
    """Who the agent is to the person."""

    language: Literal["en", "es"] = "en"
    timezone: str | None = None

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"{value!r} is not an IANA time zone (try 'Europe/Madrid' or 'UTC')"
                ) from None
        return value


class ModelsSection(_Section):
    """The model that reasons and the one that writes the chronicle."""

    reasoning: ModelSettings | None = None
    chronicler: ModelSettings | None = None  # defaults to the reasoning model


class CycleSection(_Section):
    max_steps: int = Field(24, ge=1, le=500, description="model calls allowed in one cycle")


class StorageSection(_Section):
    # "process": survives a killed process; "power": also a power cut (slower).
    durability: Literal["process", "power"] = "process"


class Config(_Section):
    """The whole configuration of one agent."""

    agent: AgentSection = AgentSection()
    models: ModelsSection = ModelsSection()
    cycle: CycleSection = CycleSection()
    storage: StorageSection = StorageSection()
    files: FilesSettings = FilesSettings()
    shell: ShellSettings = ShellSettings()
    autonomy: AutonomySettings = AutonomySettings()
    perception: PerceptionSettings = PerceptionSettings()
    reflexes: ReflexSettings = ReflexSettings()
    memory: MemorySettings = MemorySettings()
    mcp: McpSettings = McpSettings()
    webhook: WebhookSettings = WebhookSettings()
    docs: DocsSettings = DocsSettings()
    web: WebSettings = WebSettings()
    mail: MailSettings = MailSettings()
    telegram: TelegramSettings = TelegramSettings()

    @property
    def hands(self) -> HandsSettings:
        return HandsSettings(files=self.files, shell=self.shell, autonomy=self.autonomy)

    @property
    def has_model(self) -> bool:
        return self.models.reasoning is not None

    @property
    def chronicler(self) -> ModelSettings | None:
        return self.models.chronicler or self.models.reasoning


class ConfigError(Exception):
    """The configuration cannot be used; `problems` are complete sentences, in
    which anything that looks like a secret is masked."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = [mask_secrets(p) for p in problems]
        listed = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"the configuration in {source} has problems:\n{listed}")


# -- secrets never shown ---------------------------------------------------------

# Prefixes of keys and tokens people paste by mistake (OpenAI, Anthropic,
# Slack, GitHub, GitLab, AWS, Google, Hugging Face, npm, PyPI, Stripe).
_KEY_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-|sk_|rk_|pk_live_|xox[abposr]-|gh[pousr]_|github_pat_|glpat-|"
    r"AKIA|ASIA|AIza|hf_|npm_|pypi-)[A-Za-z0-9_\-]{8,}"
)
_LONG_TOKEN = re.compile(r"[A-Za-z0-9_\-+=.]{28,}")
_MIN_ENTROPY = 3.5  # bits per character: random keys have 4.5 to 6, words and names less
_NAME_SEPARATORS = re.compile(r"[-_.]")
_MIN_RANDOM_RUN = 16  # characters without a separator: no word of a name is that long


def looks_secret(text: str) -> bool:
    """Whether a value looks like a key or token rather than a name."""
    return bool(_KEY_PREFIXED.search(text)) or any(
        _random_looking(m.group()) for m in _LONG_TOKEN.finditer(text))


def mask_secrets(text: str) -> str:
    """The text with every secret-looking value replaced by its first characters
    and a mark, so an error can say what went wrong without repeating a key."""
    text = _KEY_PREFIXED.sub(_masked, text)
    return _LONG_TOKEN.sub(lambda m: _masked(m) if _random_looking(m.group()) else m.group(), text)


def _masked(match: re.Match[str]) -> str:
    return match.group()[:3] + "…[hidden: looks like a secret]"


def _random_looking(token: str) -> bool:
    if not (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)):
        return False
    # A model's name is words and versions between separators
    # (Qwen2.5-Coder-32B-Instruct-AWQ); a key is one long random run.
    if max(len(run) for run in _NAME_SEPARATORS.split(token)) < _MIN_RANDOM_RUN:
        return False
    counts = Counter(token)
    entropy = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    return entropy >= _MIN_ENTROPY


# -- loading ---------------------------------------------------------------------


def read_config_file(path: Path) -> dict[str, Any]:
    """The raw TOML table of a config file ({} if there is none)."""
    try:
        return tomllib.loads(_read_text(path))
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), [f"it is not valid TOML: {exc}. Fix the syntax there."]) from None


def _read_text(path: Path) -> str:
    """A settings file's text; a ConfigError saying why it cannot be read
    (FileNotFoundError passes, for the caller to decide)."""
    try:
        return path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise ConfigError(str(path), [f"{path} is a folder, not a file. Move it away; "
                                      "the file holds TOML settings."]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), [
            f"it is not UTF-8 text (byte {exc.start} cannot be read as UTF-8). "
            "Save it as UTF-8."]) from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(str(path), [f"it cannot be read ({exc.strerror}). Check its "
                                      "permissions: it must be readable by you."]) from None


def environment_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """Nested settings from NOEMA__A__B=value variables."""
    found: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or len(name) == len(ENV_PREFIX):
            continue
        keys = [k.lower() for k in name[len(ENV_PREFIX) :].split("__")]
        table = found
        for key in keys[:-1]:
            table = table.setdefault(key, {})
            if not isinstance(table, dict):
                break
        else:
            table[keys[-1]] = parse_value(raw)
    return found


def parse_value(raw: str) -> Any:
    """A TOML literal if the text is one (numbers, booleans, arrays), else the text."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def validate(data: Mapping[str, Any], source: str) -> Config:
    """A Config from raw data, or a ConfigError naming each bad key and its fix."""
    try:
        config = Config.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ConfigError(source, [_explain(err) for err in exc.errors()]) from None
    clashes = secret_clashes(config)
    if clashes:
        raise ConfigError(source, clashes)
    return config


@dataclass(frozen=True, slots=True)
class SecretUse:
    """A setting that names a secret: the name, the setting, and what the secret is for."""

    name: str
    key: str  # the dotted setting, e.g. "webhook.person_token_secret"
    purpose: str  # settings of one purpose may share a secret (two models, one key)
    words: str  # what it holds, for the person


def secret_uses(config: Config) -> list[SecretUse]:
    """Every secret the configuration names, for the features that are on."""
    uses: list[SecretUse] = []
    for role in ("reasoning", "chronicler"):
        settings = getattr(config.models, role)
        if settings is not None and settings.resolved_key_env:
            uses.append(SecretUse(settings.resolved_key_env, f"models.{role}.api_key_env",
                                  "model key", f"the {role} model's key"))
    web = config.web
    if web.search is not None and web.resolved_key_env:
        uses.append(SecretUse(web.resolved_key_env, "web.search_key_env", "search key",
                              "the web search's key"))
    if config.mail.configured:
        uses.append(SecretUse(config.mail.password_env, "mail.password_env", "mail password",
                              "the mail account's password"))
    if config.telegram.configured:
        uses.append(SecretUse(config.telegram.token_secret, "telegram.token_secret",
                              "telegram token", "the Telegram bot's token"))
    hook = config.webhook
    if hook.enabled:
        uses.append(SecretUse(hook.person_token_secret, "webhook.person_token_secret",
                              "webhook person", "the webhook's token for the person"))
        for source, name in hook.sources.items():
            uses.append(SecretUse(name, f"webhook.sources.{source}", f"webhook {source}",
                                  f"the webhook's token for {source}"))
    return uses


def secret_clashes(config: Config) -> list[str]:
    """One problem per setting whose secret another setting uses for something
    else (a model's key that is the webhook's token would hand the token to the
    model's server, and saving the key would replace the token), naming both."""
    by_name: dict[str, list[SecretUse]] = {}
    for use in secret_uses(config):
        by_name.setdefault(use.name, []).append(use)
    problems = []
    for name, uses in by_name.items():
        if len({use.purpose for use in uses}) < 2:
            continue
        for use in uses:
            others = [o for o in uses if o.purpose != use.purpose]
            listed = " and ".join(f"{o.key} ({o.words})" for o in others)
            problems.append(
                f"{use.key}: the secret {name} is also named by {listed}; one secret cannot be "
                f"both {use.words} and {others[0].words}: give {use.key} a name of its own")
    return problems


def load_config(paths: AgentPaths, environ: Mapping[str, str] | None = None) -> Config:
    """The agent's configuration: its file, then environment overrides."""
    environ = os.environ if environ is None else environ
    data = merge(read_config_file(paths.config_file), environment_overrides(environ))
    has_env = any(k.startswith(ENV_PREFIX) for k in environ)
    source = str(paths.config_file) + (" and NOEMA__ variables" if has_env else "")
    config = validate(data, source)
    unusable = root_problems(config.files)
    if unusable:
        raise ConfigError(source, unusable)
    models = {
        role: _anchor_script(settings, paths.root)
        for role in ("reasoning", "chronicler")
        if (settings := getattr(config.models, role)) is not None
    }
    return config.model_copy(update={"models": config.models.model_copy(update=models)})


def root_problems(files: FilesSettings) -> list[str]:
    """Roots that cannot be used as folders: a file, or a read-write root that
    cannot be created where it is named (links are followed, as the tools do)."""
    problems = []
    for index, root in enumerate(files.roots):
        key = f"files.roots.{index}.path"
        path = Path(os.path.realpath(os.path.expanduser(str(root.path))))
        named = f"{root.path}" + (f" ({path})" if str(path) != str(root.path) else "")
        if path.exists():
            if not path.is_dir():
                problems.append(f"{key}: {named} is a file, not a folder. Name a folder.")
            continue
        if root.mode == "read-only":
            continue  # nothing to read yet; the agent is told when it looks
        parent = next(p for p in path.parents if p.exists())
        if not parent.is_dir():
            problems.append(f"{key}: {named} cannot be created: {parent} is a file. "
                            "Name a folder elsewhere.")
        elif not os.access(parent, os.W_OK | os.X_OK):
            problems.append(f"{key}: {named} cannot be created: you may not write in "
                            f"{parent}. Create it yourself or name another folder.")
        elif (why := no_folder_can_be_made_in(parent)) is not None:  # root may write anywhere
            problems.append(f"{key}: {named} cannot be created: {why}. "
                            "Name a folder elsewhere.")
    return problems


def unknown_tools(levels: Mapping[str, str], known: list[str]) -> list[str]:
    """A problem for each name under [autonomy.tools] that names no tool, with
    the closest known name: a misspelt name would leave its level unapplied."""
    problems = []
    for name in levels:
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        problems.append(f"autonomy.tools.{name}: there is no tool named {name!r}, so its "
                        f"level would never apply.{hint} The tools: {', '.join(sorted(known))}.")
    return problems


def _anchor_script(settings: ModelSettings, root: Path) -> ModelSettings:
    # A relative script path means relative to the agent's folder.
    if settings.script is None or settings.script.is_absolute():
        return settings
    return settings.model_copy(update={"script": root / settings.script})


def _explain(err: Mapping[str, Any]) -> str:
    key = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
    section, _, leaf = key.rpartition(".")
    kind = err["type"]
    env = ENV_PREFIX + "__".join(key.upper().split("."))
    if kind == "extra_forbidden":
        known = _known_keys(err["loc"][:-1])
        close = difflib.get_close_matches(leaf, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return (
            f"{key}: unknown setting.{hint} Known keys here: {', '.join(sorted(known)) or 'none'}."
        )
    if kind == "missing":
        where = f"under [{section}]" if section else "at the top"
        return (f"{key}: required. Add `{leaf} = ...` {where} in config.toml (noema config "
                f"set {key}=...) or set {env}.")
    got = err.get("input")
    shown = f" (got {got!r})" if not isinstance(got, dict) and got is not None else ""
    return f"{key}: {err['msg']}{shown}. Fix it in config.toml or with {env}."


def _known_keys(loc: tuple) -> list[str]:
    model: Any = Config
    for part in loc:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        model = _model_of(field.annotation)
    return list(getattr(model, "model_fields", {}))


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


# -- secrets ---------------------------------------------------------------------


def load_secrets(paths: AgentPaths, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """API keys and tokens: the secrets file, overridden by the environment."""
    environ = os.environ if environ is None else environ
    secrets = read_secrets_file(paths.secrets_file)
    secrets.update(environ)
    return secrets


def read_secrets_file(path: Path) -> dict[str, str]:
    """The secrets file as names and values ({} if there is none); a ConfigError
    that names what is wrong and never shows a value."""
    try:
        text = _read_text(path)
    except FileNotFoundError:
        return {}
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib says where, never what: the line may hold a key.
        raise ConfigError(str(path), [f"it is not valid TOML: {exc}. Each line is "
                                      'NAME = "value", e.g. OPENAI_API_KEY = "sk-…"']) from None
    wrong = [name for name, value in raw.items() if not isinstance(value, str)]
    if wrong:
        raise ConfigError(str(path), [
            f"{name}: a secret must be a quoted text (NAME = \"value\"), not "
            f"{_kind_of(raw[name])}" for name in wrong])
    return dict(raw)


def _kind_of(value: Any) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    return "a date or time"


def secrets_file_warning(paths: AgentPaths) -> str | None:
    """A warning if other users could read the secrets file."""
    path = paths.secrets_file
    if path.exists() and path.stat().st_mode & 0o077:
        return f"{path} can be read by other users; run: chmod 600 {path}"
    return None


# -- editing ---------------------------------------------------------------------

# Names whose value is a secret itself. Names that say where a secret is
# (`password_env`, `token_secret`, `search_key_env`) and names that merely end
# in `key` (an event's `key`) are settings like any other.
_SECRET_NAMES = frozenset({
    "api_key", "apikey", "token", "password", "passwd", "passphrase", "secret",
    "client_secret", "private_key", "access_token", "auth_token", "credentials",
})
_SECRET_SUFFIXES = ("_api_key", "_apikey", "_token", "_password", "_passwd", "_passphrase",
                    "_private_key", "_client_secret")


def is_secret_name(name: str) -> bool:
    """Whether a setting of this name would hold a secret's value."""
    name = name.lower()
    return name in _SECRET_NAMES or name.endswith(_SECRET_SUFFIXES)


@dataclass(frozen=True, slots=True)
class Edit:
    """What `noema config set` wrote, and what the file still lacks."""

    config: Config | None  # None while a section being built is unfinished
    notes: tuple[str, ...] = ()  # one sentence per key a section being built still needs


class AssignmentError(ValueError):
    """`config set` words that are not KEY VALUE or KEY=VALUE; says how to write them."""


def parse_assignments(words: Sequence[str]) -> list[tuple[str, str]]:
    """The (key, raw value) pairs of `config set`: `KEY VALUE`, or any number of
    `KEY=VALUE` words; AssignmentError saying how to write them otherwise."""
    if not words:
        raise AssignmentError("name at least one KEY=VALUE to set, e.g. agent.language=es")
    if len(words) == 2 and "=" not in words[0]:
        return [(words[0].strip(), words[1])]
    pairs: list[tuple[str, str]] = []
    for word in words:
        key, equals, raw = word.partition("=")
        if not equals:
            raise AssignmentError(
                f"{mask_secrets(word)!r} is not KEY=VALUE: give one KEY VALUE pair, or only "
                "KEY=VALUE words (e.g. agent.language=es cycle.max_steps=12)")
        pairs.append((key.strip(), raw))
    seen = Counter(key for key, _ in pairs)
    twice = sorted(key for key, count in seen.items() if count > 1)
    if twice:
        raise AssignmentError(f"{', '.join(twice)} given more than once; keep one")
    return pairs


def set_value(paths: AgentPaths, key: str, raw: str) -> Config:
    """Set `key` (dotted) to `raw` in config.toml, keeping comments; the whole
    file is validated first and nothing is written unless it is valid."""
    edit = set_values(paths, [(key, raw)], unfinished=False)
    assert edit.config is not None  # unfinished=False refuses anything short of valid
    return edit.config


def set_values(paths: AgentPaths, pairs: Sequence[tuple[str, str]], *,
               unfinished: bool = True, remove: Sequence[str] = ()) -> Edit:
    """Set each dotted key to its raw value in config.toml at once, keeping comments;
    each key of `remove` (a value or a whole table) is taken out, back to its default.

    The whole file is validated after the change. A wrong value anywhere is a
    ConfigError and nothing is written. With `unfinished`, a section the
    person is building step by step (one that was absent or already
    incomplete) may still lack required keys: the file is written and each
    missing key becomes a note, and the agent refuses to start until it is set.
    """
    import tomlkit  # only `noema config set` and `show` write TOML

    for key, raw in pairs:
        parts = key.split(".")
        if not all(parts):
            raise ConfigError(key, [f"{key!r} is not a dotted key such as models.reasoning.model"])
        if is_secret_name(parts[-1]) or looks_secret(raw):
            raise ConfigError(key, [
                f"{key}: secrets do not go in config.toml; put them in {paths.secrets_file} "
                "(mode 600) or in the environment, and name the variable in the setting "
                "made for it (e.g. api_key_env)."
            ])
    path = paths.config_file
    before = read_config_file(path)
    document = tomlkit.parse(_read_text(path)) if path.exists() else tomlkit.document()
    for key in remove:
        *sections, leaf = key.split(".")
        holder: Any = document
        for part in sections:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and leaf in holder:
            del holder[leaf]
    for key, raw in pairs:
        *sections, leaf = key.split(".")
        table: Any = document
        for part in sections:
            if part not in table:
                table[part] = tomlkit.table()
            table = table[part]
            if not isinstance(table, dict):
                raise ConfigError(key, [f"{key}: {part!r} is a value, not a section"])
        table[leaf] = parse_value(raw)
    text = tomlkit.dumps(document)
    changed = [key for key, _ in pairs] + list(remove)
    source = f"{path} (after setting {', '.join(changed)})"
    errors = _errors(tomllib.loads(text))
    building = _unfinished(before) if unfinished else (lambda loc: False)
    notes = [e for e in errors if _is_gap(e) and building(_section_of(e))]
    refused = [e for e in errors if e not in notes]
    if refused:
        raise ConfigError(source, [_explain(e) for e in refused])
    config = None if notes else validate(tomllib.loads(text), source)
    _replace(path, text)
    return Edit(config, tuple(_note(e) for e in notes))


# Settings of how a model is called, not of which model: a new model choice
# keeps them.
_KEPT_WITH_A_NEW_MODEL = ("timeout_s", "connect_timeout_s", "max_retries", "max_output_tokens",
                          "temperature")


def write_model(paths: AgentPaths, role: Literal["reasoning", "chronicler"],
                settings: Mapping[str, Any]) -> Config:
    """Replace `[models.<role>]` with `settings` (how the old one called its
    model is kept), comments elsewhere kept; the whole file must validate,
    else a ConfigError and nothing is written."""
    text, config = _with_model(paths, role, settings)
    _replace(paths.config_file, text)
    return config


def check_model(paths: AgentPaths, role: Literal["reasoning", "chronicler"],
                settings: Mapping[str, Any]) -> Config:
    """What `write_model` would make of the file, checked and not written: a
    ConfigError before anything else (a secret) is written for it."""
    return _with_model(paths, role, settings)[1]


def _with_model(paths: AgentPaths, role: Literal["reasoning", "chronicler"],
                settings: Mapping[str, Any]) -> tuple[str, Config]:
    import tomlkit  # only `noema config set`, `setup` and `show` write TOML

    path = paths.config_file
    document = tomlkit.parse(_read_text(path)) if path.exists() else tomlkit.document()
    models = document.get("models")
    if models is None:
        document["models"] = models = tomlkit.table()
    elif not isinstance(models, dict):
        raise ConfigError(str(path), ["models: a value, not a section; remove it and try again"])
    old = models.get(role)
    table = tomlkit.table()
    for name, value in settings.items():
        if value is not None:
            table[name] = value
    if isinstance(old, dict):
        for name in _KEPT_WITH_A_NEW_MODEL:
            if name in old and name not in settings:
                table[name] = old[name]
    models[role] = table
    text = tomlkit.dumps(document)
    return text, validate(tomllib.loads(text), f"{path} (with the new [models.{role}])")


def check_besides_model(paths: AgentPaths, role: Literal["reasoning", "chronicler"]) -> None:
    """A ConfigError if the file has problems outside `[models.<role>]`, the
    section a new model choice replaces (it may be unfinished or wrong)."""
    data = read_config_file(paths.config_file)
    models = data.get("models")
    if isinstance(models, dict):
        data = {**data, "models": {k: v for k, v in models.items() if k != role}}
    validate(data, str(paths.config_file))
    read_secrets_file(paths.secrets_file)


def write_secret(paths: AgentPaths, name: str, value: str) -> None:
    """Put `name = "value"` in secrets.toml (mode 600 from its first byte),
    keeping its other lines."""
    import tomlkit

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ConfigError(str(paths.secrets_file), [f"{name!r} is not a variable name"])
    path = paths.secrets_file
    read_secrets_file(path)  # a broken file is reported, not overwritten
    document = tomlkit.parse(_read_text(path)) if path.exists() else tomlkit.document()
    document[name] = value
    _replace(path, tomlkit.dumps(document))


def _errors(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    try:
        Config.model_validate(data)
    except pydantic.ValidationError as exc:
        return [dict(e) for e in exc.errors()]
    return []


def _loc(err: Mapping[str, Any]) -> tuple:
    return tuple(p for p in err["loc"] if not str(p).startswith("function-"))


def _section_model(loc: tuple) -> Any:
    """The settings model of the table `loc` leads to; None for one value."""
    model: Any = Config
    for part in loc:
        if isinstance(part, int):
            continue  # an element of an array of tables
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return None
        model = _model_of(field.annotation)
    return model


def _names_a_section(loc: tuple) -> bool:
    return _section_model(loc) is not None


def _section_of(err: Mapping[str, Any]) -> tuple:
    loc = _loc(err)
    return loc if _names_a_section(loc) else loc[:-1]


def _is_gap(err: Mapping[str, Any]) -> bool:
    """A required key not given yet, or a section's own check of what its keys
    need together (a base_url its provider has no default for)."""
    return err["type"] == "missing" or _names_a_section(_loc(err))


def _unfinished(before: Mapping[str, Any]) -> Callable[[tuple], bool]:
    """Which sections a person may be building: one that failed validation
    before this change, or one with required keys that the file did not have
    yet. A section that was valid before, or one whose defaults are valid (such
    as [memory]), is never left broken by a change."""
    failing = {_section_of(e) for e in _errors(before)}

    def absent(loc: tuple) -> bool:
        table: Any = before
        for part in loc:
            if isinstance(part, int):
                if not isinstance(table, list) or part >= len(table):
                    return True
            elif not isinstance(table, dict) or part not in table:
                return True
            table = table[part]
        return False

    def building(loc: tuple) -> bool:
        if loc in failing:
            return True
        model = _section_model(loc)
        required = model is not None and any(f.is_required() for f in model.model_fields.values())
        return required and absent(loc)

    return building


def _note(err: Mapping[str, Any]) -> str:
    loc = _loc(err)
    key = ".".join(str(p) for p in loc)
    if err["type"] == "missing":
        section = ".".join(str(p) for p in loc[:-1])
        return (f"{key} is not set yet: [{section}] is unfinished, and the agent starts once "
                f"it is (noema config set {key}=...)")
    message = str(err["msg"]).removeprefix("Value error, ")
    return f"[{key}] is unfinished: {message}"


def _replace(path: Path, text: str) -> None:
    """Write the file whole or not at all: a temporary file, readable by the
    person only from its creation on, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)  # a leftover of a killed run
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                             0o600)
        with open(descriptor, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def show(config: Config) -> str:
    """The effective configuration as TOML (no secrets belong in it; anything
    that looks like one, pasted by mistake, is masked)."""
    import tomlkit  # only `noema config set` and `show` write TOML

    data = config.model_dump(mode="json", exclude_none=True)
    return mask_secrets(tomlkit.dumps(data))
