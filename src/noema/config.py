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
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic
import tomlkit
from pydantic import BaseModel, ConfigDict, Field, field_validator

from .paths import AgentPaths
from .perception.settings import PerceptionSettings
from .providers.settings import ModelSettings
from .memory.settings import MemorySettings
from .orchestrator.settings import ReflexSettings
from .security.settings import AutonomySettings, FilesSettings, HandsSettings, ShellSettings

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
    """The configuration cannot be used; `problems` are complete sentences."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        listed = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"the configuration in {source} has problems:\n{listed}")


# -- loading ---------------------------------------------------------------------


def read_config_file(path: Path) -> dict[str, Any]:
    """The raw TOML table of a config file ({} if there is none)."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), [f"it is not valid TOML: {exc}. Fix the syntax there."]) from None


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
    models = {
        role: _anchor_script(settings, paths.root)
        for role in ("reasoning", "chronicler")
        if (settings := getattr(config.models, role)) is not None
    }
    return config.model_copy(update={"models": config.models.model_copy(update=models)})


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
    secrets: dict[str, str] = {}
    path = paths.secrets_file
    if path.exists():
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(str(path), [f"it is not valid TOML: {exc}"]) from None
        secrets.update({str(k): str(v) for k, v in raw.items() if not isinstance(v, dict)})
    secrets.update(environ)
    return secrets


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
    if parts[-1] in {"api_key", "key", "token"}:
        raise ConfigError(key, [
            f"{key}: secrets do not go in config.toml; put them in {paths.secrets_file} "
            "(mode 600) or in the environment."
        ])
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
    """The effective configuration as TOML (no secrets are ever in it)."""
    data = config.model_dump(mode="json", exclude_none=True)
    return tomlkit.dumps(data)
