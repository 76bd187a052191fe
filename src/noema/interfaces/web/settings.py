"""The settings form, generated from the configuration's pydantic models.

Every leaf of `Config` becomes a field named by its dotted key, typed from
its annotation (a checkbox for a flag, a choice for a fixed set, a number, or
a TOML value for lists and tables). A field is saved alone through
`config.set_value`, the function behind `noema config set`: it validates the
whole configuration first, keeps the file's comments, and refuses secrets.
"""

from __future__ import annotations

import asyncio
import enum
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from ... import config as configuration
from ...config import Config, ConfigError
from ...paths import AgentPaths
from ...providers.base import Message, MessageRole, ModelRequest, ProviderError, TextDelta

TEST_TIMEOUT = 30.0  # seconds a connection test may take
MODEL_PROVIDER_KEYS = frozenset({"models.reasoning.provider", "models.chronicler.provider"})


@dataclass(frozen=True, slots=True)
class FormField:
    key: str  # dotted, as `noema config set` takes it
    label: str
    widget: str  # "checkbox", "select", "number", "text", "toml"
    value: str
    choices: tuple[str, ...] = ()
    help: str = ""
    checked: bool = False


@dataclass(frozen=True, slots=True)
class FormSection:
    key: str
    title: str
    fields: list[FormField] = field(default_factory=list)


def form(config: Config) -> list[FormSection]:
    """One section per top-level table, its leaves (nested tables flattened) as fields."""
    sections = []
    for name, info in Config.model_fields.items():
        model = _model_of(info.annotation)
        value = getattr(config, name)
        if model is None:
            continue
        title = (model.__doc__ or name).strip().splitlines()[0]
        sections.append(FormSection(name, title, list(_fields(model, value, name))))
    return sections


def _fields(model: type[BaseModel], value: BaseModel | None, prefix: str):
    for name, info in model.model_fields.items():
        key = f"{prefix}.{name}"
        current = getattr(value, name) if value is not None else None
        nested = _model_of(info.annotation)
        if nested is not None:
            yield from _fields(nested, current, key)
            continue
        yield _field(key, name, info.annotation, current, info.description or "")


def _field(key: str, name: str, annotation: Any, current: Any, help: str) -> FormField:
    label = name.replace("_", " ")
    inner = _without_none(annotation)
    if key in MODEL_PROVIDER_KEYS:  # a key of the provider table: offered as a choice
        from ...providers.catalog import PROVIDERS

        return FormField(key, label, "select", "" if current is None else str(current),
                         tuple(PROVIDERS), help)
    if inner is bool:
        return FormField(key, label, "checkbox", "true", help=help, checked=bool(current))
    if typing.get_origin(inner) is Literal:
        return FormField(key, label, "select", "" if current is None else str(current),
                         tuple(str(c) for c in typing.get_args(inner)), help)
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        return FormField(key, label, "select", "" if current is None else str(current.value),
                         tuple(str(m.value) for m in inner), help)
    if inner in (int, float):
        return FormField(key, label, "number", "" if current is None else str(current), help=help)
    if inner in (str, Path):
        return FormField(key, label, "text", "" if current is None else str(current), help=help)
    return FormField(key, label, "toml", _toml(current), help=help)


def _toml(value: Any) -> str:
    if value is None:
        return ""
    return _inline(json.loads(json.dumps(value, default=_plain)))


def _inline(value: Any) -> str:
    """A TOML inline value: one line that `config set` reads back as it was."""
    if isinstance(value, dict):
        items = ", ".join(f"{_key(k)} = {_inline(v)}" for k, v in value.items() if v is not None)
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a TOML basic string


def _key(name: str) -> str:
    return name if name.replace("_", "").replace("-", "").isalnum() else json.dumps(name)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _without_none(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def _model_of(annotation: Any) -> type[BaseModel] | None:
    inner = _without_none(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def current(paths: AgentPaths) -> Config:
    """The configuration as the file and the environment give it now (ConfigError if bad)."""
    return configuration.load_config(paths)


def save(paths: AgentPaths, key: str, raw: str) -> None:
    """`noema config set KEY RAW`: validated, comments kept; ConfigError says what is wrong."""
    configuration.set_value(paths, key, raw)


async def test_connection(paths: AgentPaths, role: Literal["reasoning", "chronicler"]) -> str:
    """A real, minimal call to the configured model; the first words it answers."""
    from ...providers.catalog import build_provider

    config = current(paths)
    settings = config.models.reasoning if role == "reasoning" else config.chronicler
    if settings is None:
        raise ProviderError(f"no {role} model is configured")
    provider = build_provider(settings, configuration.load_secrets(paths))
    request = ModelRequest((Message(MessageRole.USER, "Reply with the single word: ready"),),
                           max_tokens=8)
    words: list[str] = []

    async def call() -> None:
        async for piece in provider.stream(request):
            if isinstance(piece, TextDelta):
                words.append(piece.text)

    try:
        await asyncio.wait_for(call(), TEST_TIMEOUT)
    except TimeoutError:
        raise ProviderError(f"{settings.provider}/{settings.model} did not answer within "
                            f"{TEST_TIMEOUT:.0f} s") from None
    finally:
        closer = getattr(provider, "aclose", None)
        if closer is not None:
            await closer()
    answer = "".join(words).strip()[:200] or "(an empty answer)"
    return f"{settings.provider}/{settings.model} answered: {answer}"


__all__ = ["ConfigError", "FormField", "FormSection", "current", "form", "save", "test_connection"]


def which_rule(paths: AgentPaths, channel: str, sender: str, key: str, text: str,
               authorised: bool) -> str:
    """Which configured urgency rule an event like this would meet, in words.
    ValueError when the event itself is not valid (a bad channel name…)."""
    import time
    import uuid

    from ...orchestrator.urgency import UrgencyRules
    from ...perception.events import Event

    rules = current(paths).reflexes.rules
    now = time.time()
    event = Event(id=uuid.uuid4().hex[:16], channel=channel, sender=sender or "tester",
                  authorised=authorised, occurred_at=now, received_at=now, key=key, text=text)
    verdict = UrgencyRules.from_settings(rules).classify(event)
    if not verdict.from_rule:
        how = ("its own urgency hint" if verdict.hinted
               else "the sensor's default urgency")
        return f"No rule of {len(rules)} matches; {how} applies."
    rule = rules[verdict.rule]
    shown = ", ".join(f"{name}={value!r}" for name, value in
                      rule.model_dump(exclude_none=True, exclude_defaults=True).items())
    bypass = "; it is delivered even while the sensor is silenced" if verdict.bypass_stopped_sensor else ""
    return f"Rule {verdict.rule + 1} ({shown}) matches: {verdict.urgency.value}{bypass}."
