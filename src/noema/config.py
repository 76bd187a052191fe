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
from collections.abc import Mapping
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
from .security.settings import AutonomySettings, FilesSettings, HandsSettings, ShellSettings
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
        return Config.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ConfigError(source, [_explain(err) for err in exc.errors()]) from None


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
        return f"{key}: required. Add `{leaf} = ...` {where} in config.toml or set {env}."
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


def set_value(paths: AgentPaths, key: str, raw: str) -> Config:
    """Set `key` (dotted) to `raw` in config.toml, keeping comments; validated first."""
    parts = key.split(".")
    if not all(parts):
        raise ConfigError(key, [f"{key!r} is not a dotted key such as models.reasoning.model"])
    if parts[-1] in {"api_key", "key", "token"} or looks_secret(raw):
        raise ConfigError(key, [
            f"{key}: secrets do not go in config.toml; put them in {paths.secrets_file} "
            "(mode 600) or in the environment."
        ])
    import tomlkit  # only `noema config set` and `show` write TOML

    path = paths.config_file
    document = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    table: Any = document
    for part in parts[:-1]:
        if part not in table:
            table[part] = tomlkit.table()
        table = table[part]
        if not isinstance(table, dict):
            raise ConfigError(key, [f"{key}: {part!r} is a value, not a section"])
    table[parts[-1]] = parse_value(raw)
    config = validate(tomllib.loads(tomlkit.dumps(document)), f"{path} (after setting {key})")
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".toml.tmp")
    temporary.write_text(tomlkit.dumps(document), encoding="utf-8")
    os.replace(temporary, path)
    return config


def show(config: Config) -> str:
    """The effective configuration as TOML (no secrets belong in it; anything
    that looks like one, pasted by mistake, is masked)."""
    import tomlkit  # only `noema config set` and `show` write TOML

    data = config.model_dump(mode="json", exclude_none=True)
    return mask_secrets(tomlkit.dumps(data))
