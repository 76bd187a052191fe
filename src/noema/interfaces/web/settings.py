"""The settings page: one form per section of the configuration, saved whole.

Each section is a table of `Config` (a model choice is one of its own) under
a heading a person understands; its leaves (nested tables flattened) are
fields typed from their annotations (a checkbox for a flag, a choice for a
fixed set, a number, text, a field an item for a list of texts or numbers,
rows for the folders, or a TOML value for the other lists and tables). The
few keys a person usually changes come first; the rest are folded away.

A section is saved through `config.set_values`, the function behind `noema
config set`: only what changed is written, the whole file is validated with
the change and nothing is written unless it is valid; an emptied field goes
back to its default; a list's items are each checked alone, so a refusal
stands beside its item. A model's key goes to `secrets.toml` (mode 600) with
`config.write_secret`, never to `config.toml`, and is never shown.
"""

from __future__ import annotations

import enum
import json
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from ... import config as configuration
from ... import setup_flow
from ...config import Config, ConfigError
from ...paths import AgentPaths
from ...providers.base import ProviderError
from ...providers.catalog import PROVIDERS, ProviderKind
from ...providers.settings import ModelSettings
from ...setup_flow import PROBE_TOOL, Answers
from . import settings_tables, settings_words

ROLES = ("reasoning", "chronicler")
KEY_FIELD = "key"  # the model sections' secret: written to secrets.toml, never shown


@dataclass(frozen=True, slots=True)
class Heading:
    """How a section is shown: its title, a sentence, and its everyday keys."""

    title: str
    intro: str
    common: tuple[str, ...]  # leaf keys shown first; the others are folded away


_MODEL_COMMON = ("provider", "model", "base_url", KEY_FIELD, "api_key_env", "context_window",
                 "script")
HEADINGS: Mapping[str, Heading] = {
    "models.reasoning": Heading("Model", "The model that reasons and answers you.",
                                _MODEL_COMMON),
    "models.chronicler": Heading(
        "Model for save points", "The model that writes the chronicle when the conversation "
        "grows long. Left unset, the model above does it.", _MODEL_COMMON),
    "files": Heading("Files the agent may touch", "The folders the file tools and commands may "
                     "read or change, and the names they never see.", ("roots", "deny")),
    "autonomy": Heading("What the agent does without asking", "Which tools run on their own, "
                        "which ask you first, which never run.",
                        ("default", "tools", "approval_timeout_s")),
    "shell": Heading("Commands", "How the agent's commands run: in a sandbox, with or without "
                     "the network, for how long.", ("sandbox", "network", "timeout_s")),
    "agent": Heading("Language and time", "The language the agent speaks and the time zone it "
                     "reads times in.", ("language", "timezone")),
    "cycle": Heading("Work on one message", "How many model calls one piece of work may take.",
                     ("max_steps",)),
    "perception": Heading("Senses", "Log files and folders the agent watches, and how their "
                          "events are condensed.", ("enabled", "logs", "folders")),
    "reflexes": Heading("Interruptions", "Which events may interrupt the agent, and what your "
                        "message does while it works.", ("rules", "message_while_busy")),
    "memory": Heading("Memory", "When the conversation is condensed into save points, and how "
                      "old turns are found again.",
                      ("trigger_fraction", "keep_recent_turns", "embeddings")),
    "mail": Heading("Mail", "One mail account the agent hears and writes from. Off while no "
                    "server is named.", ("imap_host", "smtp_host", "username", "password_env",
                                         "address", "allow_from")),
    "telegram": Heading("Telegram", "A bot you talk to. Off while no chat is named.",
                        ("chat_ids", "token_secret")),
    "web": Heading("The web", "Searching and reading web pages.",
                   ("search", "search_url", "search_key_env", "fetch")),
    "docs": Heading("Documents", "Folders whose documents are indexed for search.",
                    ("folders",)),
    "mcp": Heading("Tool servers", "MCP servers whose tools the agent is offered.",
                   ("servers",)),
    "webhook": Heading("Webhook", "An address where your scripts and monitoring post events.",
                       ("enabled", "listen", "sources")),
    "storage": Heading("Storage", "How hard the stores insist that a write reached the disk.",
                       ("durability",)),
}

# Fields of a model choice that only some kinds of provider read; the form
# shows and writes only those of the chosen provider.
_SERVED = (ProviderKind.OPENAI_COMPATIBLE, ProviderKind.ANTHROPIC)
_MODEL_KINDS: Mapping[str, tuple[ProviderKind, ...]] = {
    "script": (ProviderKind.SCRIPTED,),
    "token_delay_s": (ProviderKind.SCRIPTED,),
    "base_url": _SERVED,
    "api_key_env": _SERVED,
    KEY_FIELD: _SERVED,
    "temperature": _SERVED,
    "timeout_s": _SERVED,
    "connect_timeout_s": _SERVED,
    "max_retries": _SERVED,
}


@dataclass(frozen=True, slots=True)
class FormField:
    key: str  # dotted, as `noema config set` takes it
    label: str
    widget: str  # "checkbox", "select", "number", "text", "toml", "model", "secret", "roots",
    # "list" (of texts, or of whole numbers when not `quoted`: one field an item)
    value: str
    choices: tuple[str, ...] = ()
    help: str = ""
    checked: bool = False
    quoted: bool = False  # its value (a list's items) is text: a TOML string, whatever it looks like
    common: bool = True  # shown first; False: folded away under "More settings"
    kinds: tuple[str, ...] = ()  # model sections: the provider kinds that read it (() all)
    items: tuple[tuple[str, str], ...] = ()  # "roots": each folder and its mode
    entries: tuple[str, ...] = ()  # "list": each item as text
    tables: settings_tables.Tables | None = None  # "tables": a list of tables as rows

    @property
    def noun(self) -> tuple[str, str]:
        """A list's item, for its "Add …" button, and an example for its blank field."""
        return _NOUNS.get(self.key, ("an item", ""))

    @property
    def leaf(self) -> str:
        return self.key.rpartition(".")[2]


@dataclass(frozen=True, slots=True)
class FormSection:
    key: str  # the table, dotted ("files", "models.reasoning")
    title: str
    intro: str = ""
    fields: list[FormField] = field(default_factory=list)
    provider: str = ""  # model sections: the provider chosen now

    @property
    def is_model(self) -> bool:
        return self.key.startswith("models.")

    @property
    def common(self) -> list[FormField]:
        return [f for f in self.fields if f.common]

    @property
    def advanced(self) -> list[FormField]:
        return [f for f in self.fields if not f.common]

    def by_key(self) -> dict[str, FormField]:
        return {f.key: f for f in self.fields}


class SaveRefused(ValueError):
    """A section was not saved; `problems` maps a field's key ("" for the
    section) to what is wrong with it and how to fix it. `ask` names a
    question the person may answer to save it as it is ("larger_window")."""

    def __init__(self, problems: Mapping[str, list[str]], ask: str | None = None) -> None:
        self.problems = dict(problems)
        self.ask = ask
        super().__init__("; ".join(p for ps in self.problems.values() for p in ps))


# -- the form -------------------------------------------------------------------


def form(config: Config, secrets: Mapping[str, str] | None = None,
         wrong: Mapping[str, str] | None = None) -> list[FormSection]:
    """The sections in the order of `HEADINGS`, then any other table of `Config`.
    `secrets` (names and values) only says whether a model's key is present;
    `wrong` holds values set aside as bad, shown in their fields as the file has them."""
    sections = _sections(config, {} if secrets is None else secrets)
    if not wrong:
        return sections
    return [FormSection(s.key, s.title, s.intro, [
        _as_in_file(f, wrong[f.key]) if f.key in wrong else f
        for f in s.fields], s.provider) for s in sections]


def _as_in_file(f: FormField, value: str) -> FormField:
    """A field showing the bad value the file holds; a list that is not one is text to fix."""
    shown = replace(f, value=value, checked=value == "true")
    if f.widget != "list":
        return shown
    parsed = configuration.parse_value(value)
    if isinstance(parsed, list) and all(isinstance(v, (str, int)) for v in parsed):
        return replace(shown, entries=tuple(str(v) for v in parsed))
    return replace(shown, widget="toml")


def _sections(config: Config, secrets: Mapping[str, str]) -> list[FormSection]:
    sections = {role_key: _model_section(role_key, getattr(config.models, role_key[7:]), secrets)
                for role_key in ("models.reasoning", "models.chronicler")}
    for name, info in Config.model_fields.items():
        model = _model_of(info.annotation)
        if model is None or name == "models":
            continue
        heading = HEADINGS.get(name)
        title = heading.title if heading else (model.__doc__ or name).strip().splitlines()[0]
        common = heading.common if heading else ()
        fields = [f if f.key.removeprefix(f"{name}.") in common else _folded(f)
                  for f in _fields(model, getattr(config, name), name)]
        sections[name] = FormSection(name, title, heading.intro if heading else "", fields)
    order = list(HEADINGS) + [k for k in sections if k not in HEADINGS]
    return [sections[k] for k in order if k in sections]


def _folded(f: FormField) -> FormField:
    return replace(f, common=False)


def _model_section(key: str, settings: ModelSettings | None,
                   secrets: Mapping[str, str]) -> FormSection:
    heading = HEADINGS[key]
    provider = settings.provider if settings is not None else ""
    fields: list[FormField] = []
    for name, info in ModelSettings.model_fields.items():
        current = getattr(settings, name) if settings is not None else (
            None if info.is_required() else info.default)
        dotted = f"{key}.{name}"
        if name == "provider":
            item = FormField(dotted, "Provider", "select", provider, tuple(PROVIDERS),
                             "Where the model runs.", quoted=True)
        elif name == "model":
            item = FormField(dotted, "Model", "model", "" if current is None else str(current),
                             help="Chosen from the models the server serves.", quoted=True)
        else:
            item = _field(dotted, name, info.annotation, current, info.description or "")
        fields.append(_for_kinds(item, name))
        if name == "api_key_env":
            fields.append(_for_kinds(_key_field(key, settings, secrets), KEY_FIELD))
    return FormSection(key, heading.title, heading.intro, fields, provider)


def _for_kinds(item: FormField, name: str) -> FormField:
    kinds = tuple(k.value for k in _MODEL_KINDS.get(name, ()))
    return replace(item, common=name in _MODEL_COMMON, kinds=kinds)


def _key_field(key: str, settings: ModelSettings | None,
               secrets: Mapping[str, str]) -> FormField:
    env = settings.resolved_key_env if settings is not None else None
    if env and (os.environ.get(env) or "").strip():
        state = f"a key is set in the environment ({env}); one typed here goes to secrets.toml"
    elif env and (secrets.get(env) or "").strip():
        state = f"a key is kept in secrets.toml ({env}); type a new one to replace it"
    elif env:
        state = f"no key yet: one typed here is kept in secrets.toml as {env}"
    else:
        state = "a key typed here is kept in secrets.toml, never in config.toml"
    return FormField(f"{key}.{KEY_FIELD}", "API key", "secret", "", help=state)


def _fields(model: type[BaseModel], value: BaseModel | None, prefix: str):
    for name, info in model.model_fields.items():
        key = f"{prefix}.{name}"
        current = getattr(value, name) if value is not None else None
        nested = _model_of(info.annotation)
        if nested is not None:
            yield from _fields(nested, current, key)
            continue
        item = _field(key, name, info.annotation, current, info.description or "")
        if key == "files.roots":  # a list of folders, edited as one row each
            item = replace(item, widget="roots", items=tuple(
                (str(root.path), str(root.mode)) for root in current or ()))
        elif (rows := settings_tables.row_model(info.annotation)) is not None:
            item = replace(item, widget="tables",
                           tables=settings_tables.tables(key, rows, current, _label))
        elif (kind := _item_type(info.annotation)) is not None:
            item = replace(item, widget="list", quoted=kind is str,
                           entries=tuple(str(v) for v in current or ()))
        yield item


def _row_models() -> dict[str, type[BaseModel]]:
    """Each list edited as rows of tables, by its dotted key, and its table's model."""
    found: dict[str, type[BaseModel]] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            nested = _model_of(info.annotation)
            if nested is not None:
                walk(nested, f"{prefix}{name}.")
            elif (rows := settings_tables.row_model(info.annotation)) is not None:
                found[f"{prefix}{name}"] = rows

    walk(Config, "")
    return found


def _item_type(annotation: Any) -> type | None:
    """str or int for a list of texts or of whole numbers, edited an item a field."""
    inner = _without_none(annotation)
    if typing.get_origin(inner) not in (tuple, list):
        return None
    args = [a for a in typing.get_args(inner) if a is not Ellipsis]
    return args[0] if len(args) == 1 and args[0] in (str, int) else None


# What a list holds, for its "Add …" button, and an example of one.
_NOUNS: Mapping[str, tuple[str, str]] = {
    "files.deny": ("a name", "*.secret"),
    "mail.allow_from": ("an address", "you@example.org"),
    "mail.known_recipients": ("an address", "someone@example.org"),
    "telegram.chat_ids": ("a chat id", "123456789"),
    "web.allow_ranges": ("a range", "10.0.0.0/8"),
    "web.trusted_hosts": ("a host", "docs.example.org"),
}


# Names whose words alone would not say what they hold.
_LABELS = {"base_url": "Server address", "api_key_env": "Variable holding the key",
           "context_window": "Context window (tokens)",
           "max_output_tokens": "Longest answer (tokens)", "roots": "Folders",
           "deny": "Never shown", "default": "Every other tool", "tools": "Per tool",
           "logs": "Log files", "from_start": "Read from the start",
           "can_silence": "May be silenced", "debounce_ms": "Wait for quiet (milliseconds)",
           "resume_max_bytes": "Catch up at most (bytes)"}


def _label(name: str) -> str:
    if name in _LABELS:
        return _LABELS[name]
    words = name.replace("_", " ")
    for unit, said in ((" s", " (seconds)"), (" ms", " (milliseconds)"), (" mb", " (MB)")):
        if words.endswith(unit):
            words = words.removesuffix(unit) + said
    return words[:1].upper() + words[1:]


def _field(key: str, name: str, annotation: Any, current: Any, help: str) -> FormField:
    label = _label(name)
    inner = _without_none(annotation)
    shown = "" if current is None else str(current)
    if inner is bool:
        return FormField(key, label, "checkbox", "true" if current else "false", help=help,
                         checked=bool(current))
    if typing.get_origin(inner) is Literal:
        choices = typing.get_args(inner)
        return FormField(key, label, "select", shown, tuple(str(c) for c in choices), help,
                         quoted=all(isinstance(c, str) for c in choices))
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        return FormField(key, label, "select", "" if current is None else str(current.value),
                         tuple(str(m.value) for m in inner), help, quoted=True)
    if inner in (int, float):
        return FormField(key, label, "number", shown, help=help)
    if inner in (str, Path):
        return FormField(key, label, "text", shown, help=help, quoted=True)
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
    return toml_string(str(value))


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


@dataclass(frozen=True, slots=True)
class Reading:
    """The configuration as far as it can be read: what the forms show."""

    config: Config
    problems: tuple[str, ...] = ()  # why the file cannot be used as it is
    wrong: Mapping[str, str] = field(default_factory=dict)  # dotted key -> its value in the file
    errors: tuple[Any, ...] = ()  # the validator's errors about the file's values, to word


def read(paths: AgentPaths) -> Reading:
    """The configuration, or when the file has bad values, the rest of it with
    those values set aside (shown as the file has them, beside their problems),
    so the page can still fix them. ConfigError when even that is impossible
    (the file is not TOML)."""
    import pydantic

    try:
        return Reading(current(paths))
    except ConfigError as exc:
        problems = tuple(exc.problems)
    data: Any = configuration.read_config_file(paths.config_file)
    wrong: dict[str, str] = {}
    errors: list[Any] = []
    for _ in range(50):  # each pass sets aside what the last one found wrong
        try:
            return Reading(Config.model_validate(data), problems, wrong, tuple(errors))
        except pydantic.ValidationError as exc:
            errors += exc.errors()
            for error in exc.errors():
                loc = [p for p in error["loc"] if not str(p).startswith("function-")]
                data = _set_aside(data, loc, wrong)
    raise ConfigError(str(paths.config_file), list(problems))


def _set_aside(data: Any, loc: list, wrong: dict[str, str]) -> Any:
    """`data` without the value at `loc` (the nearest table that holds it), its
    text kept in `wrong` under its dotted key."""
    for depth in range(len(loc), 0, -1):
        holder: Any = data
        for part in loc[:depth - 1]:
            holder = holder.get(part) if isinstance(holder, dict) else None
        leaf = loc[depth - 1]
        if isinstance(holder, dict) and leaf in holder:
            value = holder.pop(leaf)
            key = ".".join(str(p) for p in loc[:depth])
            wrong[key] = value if isinstance(value, str) else _toml(value)
            return data
    raise ValueError(f"nothing at {loc} to set aside")


# -- saving a section -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Saved:
    """What a section's save changed."""

    changed: tuple[str, ...]  # dotted keys written or taken out
    secret: str | None = None  # the variable a key was kept under

    def sentence(self, paths: AgentPaths) -> str:
        if not self.changed and self.secret is None:
            return "Nothing changed."
        parts = []
        if self.changed:
            parts.append(f"{', '.join(self.changed)} in {paths.config_file}")
        if self.secret is not None:
            parts.append(f"the key kept in {paths.secrets_file} as {self.secret}")
        return "Saved: " + "; ".join(parts) + ". The agent uses the change from its next start."


def save_section(paths: AgentPaths, section_key: str, values: Mapping[str, str],
                 key: str = "", *, served_window: int | None = None,
                 larger_window: bool = False) -> Saved:
    """Write what the person changed in one section, validated with the whole file.

    `values` maps the section's dotted keys to what the form holds (text, as
    `noema config set` takes it); keys of other sections are refused. An
    emptied field goes back to its default. For a model choice only the fields
    of the chosen provider are written (the others are taken out), an empty
    provider of the save-point model means "the model above", and `key` is
    kept in secrets.toml under the choice's variable. SaveRefused says what is
    wrong next to each field; then nothing is written.

    `served_window` is the window the model's server said it serves the model
    with: a larger context window is refused (the server would refuse the
    requests that fill it) unless `larger_window` says the person wants it."""
    reading = read(paths)
    sections = {s.key: s for s in form(reading.config, wrong=reading.wrong)}
    section = sections.get(section_key)
    if section is None:
        raise SaveRefused({"": [f"there is no section {section_key!r}; the sections: "
                                f"{', '.join(sections)}"]})
    fields = section.by_key()
    stray = sorted(k for k in values if k not in fields or fields[k].widget == "secret")
    if stray:
        raise SaveRefused({"": [f"{', '.join(stray)} not in [{section_key}]: each section "
                                "is saved alone"]})
    present = _present(paths, section_key)
    pairs: list[tuple[str, str]] = []
    remove: list[str] = []
    applies = lambda f: True  # noqa: E731  (every field, outside a model choice)
    if section.is_model:
        provider = values.get(f"{section_key}.provider", section.provider).strip()
        if not provider:
            return _unset_model(paths, section_key, present, key)
        if provider not in PROVIDERS:
            raise SaveRefused({f"{section_key}.provider": [
                f"{section_key}.provider: unknown provider {provider!r}; choose one of "
                f"{', '.join(PROVIDERS)}"]})
        kind = PROVIDERS[provider].kind.value
        applies = lambda f: not f.kinds or kind in f.kinds  # noqa: E731
        remove += [f.key for f in section.fields if not applies(f) and f.leaf in present]
    entries = {f.key: _entries(f, values[f.key]) for f in section.fields
               if f.widget == "list" and f.key in values}
    _check_items(paths, entries)
    for item in section.fields:
        if item.widget == "secret" or not applies(item) or item.key not in values:
            continue
        raw = values[item.key]
        if item.key in entries:
            raw = _inline([v for _, v in entries[item.key]])
        if _same(item, raw):
            continue  # unchanged
        if not raw.strip():
            if item.leaf in present:
                remove.append(item.key)
            continue
        text = item.quoted and item.widget != "list"  # a list's items are quoted already
        pairs.append((item.key, toml_string(raw.strip()) if text else raw.strip()))
    if section.is_model and not larger_window:
        _check_window(section, values, served_window)
    _trial(paths, pairs, remove, fields, {f.key: (s.title, f) for s in sections.values()
                                          if s.key != section_key for f in s.fields})
    secret = _secret_name(section, values, key) if key.strip() else None
    if not pairs and not remove and secret is None:
        return Saved(())
    if secret is not None:
        configuration.read_secrets_file(paths.secrets_file)  # a broken file stops us first
        _not_claimed(paths, section_key, secret)
    if pairs or remove:
        try:
            configuration.set_values(paths, pairs, unfinished=False, remove=remove)
        except ConfigError as exc:
            raise SaveRefused(by_field(exc.problems, fields)) from None
    if secret is not None:
        configuration.write_secret(paths, secret, key.strip())
    return Saved(tuple(k for k, _ in pairs) + tuple(remove), secret)


def _check_window(section: FormSection, values: Mapping[str, str],
                  served: int | None) -> None:
    """SaveRefused, asking, when the window typed is larger than the server serves."""
    key = f"{section.key}.context_window"
    typed = configuration.parse_value(values.get(key, "").strip())
    if served is None or not isinstance(typed, int) or isinstance(typed, bool) or typed <= served:
        return
    model = values.get(f"{section.key}.model", "").strip() or "this model"
    raise SaveRefused({key: [
        f"The server serves {model} with {served:,} tokens, and you typed {typed:,}. With the "
        f"larger window the agent fills requests the server refuses once a conversation passes "
        f"{served:,} tokens. Use {served}, or save {typed:,} anyway if you know the server "
        "takes it."]}, ask="larger_window")


def _trial(paths: AgentPaths, pairs: list[tuple[str, str]], remove: list[str],
           fields: Mapping[str, FormField],
           others: Mapping[str, tuple[str, FormField]] | None = None) -> None:
    """The section's change validated with the rest of the file before anything
    is written; SaveRefused in the person's words beside each field it is about.
    What it does not find wrong, `config.set_values` still checks."""
    import pydantic

    if any(configuration.is_secret_name(k.rpartition(".")[2]) or configuration.looks_secret(raw)
           for k, raw in pairs):
        return  # `set_values` refuses it first, in words that never repeat the secret
    data: Any = configuration.read_config_file(paths.config_file)
    for dotted in remove:
        *parts, leaf = dotted.split(".")
        holder: Any = data
        for part in parts:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(holder, dict):
            holder.pop(leaf, None)
    for dotted, raw in pairs:
        data = configuration.merge(data, _nested(dotted.split("."), configuration.parse_value(raw)))
    try:
        Config.model_validate(data)
    except pydantic.ValidationError as exc:
        wrong = in_words(exc.errors(), fields, others)
        if wrong:
            raise SaveRefused(wrong) from None


def in_words(errors: list[Any], fields: Mapping[str, FormField],
             others: Mapping[str, tuple[str, FormField]] | None = None) -> dict[str, list[str]]:
    """The validator's errors in the person's words, by the field each is about
    ("" for one of another section, `others` naming its section's title and
    field). An error about an item of a plain list is left out: the list's own
    checks say it beside the item."""
    wrong: dict[str, list[str]] = {}

    def owner_in(keys, dotted: str) -> str | None:
        return max((k for k in keys if dotted == k or dotted.startswith(k + ".")), key=len,
                   default=None)

    for error in errors:
        dotted = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function-"))
        owner = owner_in(fields, dotted)
        if owner is not None:
            said = _said(error, fields[owner], dotted)
            if said is not None:
                wrong.setdefault(owner, []).append(said)
        elif others and (elsewhere := owner_in(others, dotted)) is not None:
            title, item = others[elsewhere]
            said = _said(error, item, dotted)
            if said is not None:
                wrong.setdefault("", []).append(
                    f"{said} This is in “{title}”: fix it there first, then save this section.")
    return wrong


def _said(error: Any, item: FormField, dotted: str) -> str | None:
    """One error about `item` (or a row of it), in words; None for a plain list's item."""
    label = item.label
    if dotted != item.key:
        place, _, column = dotted[len(item.key) + 1:].partition(".")
        if item.tables is None or not place.isdigit():
            return None
        named = {c.name: c.label for c in item.tables.columns}
        label = f"{item.label}, {item.tables.noun.lower()} {int(place) + 1}" + (
            f", {named.get(column, column)}" if column else "")
    return settings_words.explain(error, label, item.value if item.widget == "number" else "",
                                  leaf=item.leaf if dotted == item.key else "")


def _entries(item: FormField, raw: str) -> list[tuple[int, Any]]:
    """A list field's items as the form sends them (a TOML list of texts, a blank
    field among them), each with its place in the form, blanks left out and
    numbers read; SaveRefused beside each item that is no number."""
    parsed = configuration.parse_value(raw.strip())
    if not isinstance(parsed, list) or not all(isinstance(v, str) for v in parsed):
        raise SaveRefused({item.key: [f"{item.key}: the page sent no list of texts; reload it "
                                      "and try again"]})
    found: list[tuple[int, Any]] = []
    wrong: dict[str, list[str]] = {}
    for place, text in enumerate(parsed):
        text = text.strip()
        if not text:
            continue
        if item.quoted:
            found.append((place, text))
            continue
        try:
            found.append((place, int(text)))
        except ValueError:
            example = item.noun[1]
            wrong[f"{item.key}.{place}"] = [f"{text!r} is not a whole number" + (
                f", like {example}." if example else ".")]
    if wrong:
        raise SaveRefused(wrong)
    return found


def _check_items(paths: AgentPaths, lists: Mapping[str, list[tuple[int, Any]]]) -> None:
    """Each item of each list checked alone, with the rest of the file as it is,
    so that a refusal stands beside the item it is about; SaveRefused then,
    keyed by the list's key and the item's place in the form ("web.allow_ranges.2")."""
    import pydantic

    if not lists:
        return
    data = configuration.read_config_file(paths.config_file)
    wrong: dict[str, list[str]] = {}
    for key, items in lists.items():
        parts = key.split(".")
        for place, value in items:
            trial = configuration.merge(data, _nested(parts, [value]))
            try:
                Config.model_validate(trial)
            except pydantic.ValidationError as exc:
                said = [str(e["msg"]).removeprefix("Value error, ") for e in exc.errors()
                        if [str(p) for p in e["loc"][:len(parts)]] == parts]
                if said:
                    wrong[f"{key}.{place}"] = [s if s.endswith(".") else s + "." for s in said]
    if wrong:
        raise SaveRefused(wrong)


def _nested(parts: list[str], value: Any) -> dict[str, Any]:
    for part in reversed(parts):
        value = {part: value}
    return value


def _same(item: FormField, raw: str) -> bool:
    """Whether the form holds what the field showed (90 is 90.0; text is text;
    rows of tables by what they mean)."""
    if item.widget == "tables":
        model = _row_models().get(item.key)
        return model is not None and settings_tables.same(
            model, configuration.parse_value(item.value), configuration.parse_value(raw.strip()))
    if item.quoted or item.widget in ("toml", "roots", "list"):
        return raw.strip() == item.value.strip()
    return configuration.parse_value(raw.strip()) == configuration.parse_value(item.value)


def toml_string(text: str) -> str:
    """`text` as a TOML basic string, whatever it holds: `config set` then reads
    it as that text, never as a number, a flag or a list."""
    escaped = []
    for char in text:
        if char in '"\\':
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:  # TOML takes no control character raw
            escaped.append(f"\\u{ord(char):04X}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def _unset_model(paths: AgentPaths, section_key: str, present: Mapping[str, Any],
                 key: str) -> Saved:
    if section_key == "models.reasoning":
        raise SaveRefused({f"{section_key}.provider": [
            f"{section_key}.provider: choose where the model runs; without a model the "
            "agent cannot answer"]})
    if key.strip():
        raise SaveRefused({f"{section_key}.{KEY_FIELD}": [
            f"{section_key}: a key needs a provider; choose one, or leave the key empty"]})
    if not present:
        return Saved(())
    try:
        configuration.set_values(paths, [], unfinished=False, remove=[section_key])
    except ConfigError as exc:
        raise SaveRefused({"": list(exc.problems)}) from None
    return Saved((section_key,))


def _present(paths: AgentPaths, section_key: str) -> Mapping[str, Any]:
    """The section's table as the file holds it ({} when it has none)."""
    table: Any = configuration.read_config_file(paths.config_file)
    for part in section_key.split("."):
        table = table.get(part) if isinstance(table, dict) else None
    return table if isinstance(table, dict) else {}


def _not_claimed(paths: AgentPaths, section_key: str, name: str) -> None:
    """SaveRefused when another setting names `name` for something other than a
    model's key: the key typed here would replace that secret (the webhook's
    token, the bot's). Checked even when no setting changes with the key."""
    import pydantic

    try:
        config = Config.model_validate(configuration.read_config_file(paths.config_file))
    except (pydantic.ValidationError, ConfigError):
        return  # the file's own problems are shown beside their fields
    others = [use for use in configuration.secret_uses(config)
              if use.name == name and use.purpose != "model key"]
    if others:
        named = " and ".join(f"{use.key} ({use.words})" for use in others)
        raise SaveRefused({f"{section_key}.api_key_env": [
            f"{section_key}.api_key_env: the secret {name} is also named by {named}; the key "
            f"typed here would replace it: give {section_key}.api_key_env a name of its own"]})


def _secret_name(section: FormSection, values: Mapping[str, str], key: str) -> str:
    """The variable a typed key is kept under: the choice's api_key_env, else the
    provider's own; SaveRefused when there is none."""
    provider = values.get(f"{section.key}.provider", section.provider).strip()
    if not provider or provider not in PROVIDERS:
        raise SaveRefused({f"{section.key}.{KEY_FIELD}": [
            f"{section.key}: a key needs a provider; choose one first"]})
    spec = PROVIDERS[provider]
    if spec.kind is ProviderKind.SCRIPTED:
        raise SaveRefused({f"{section.key}.{KEY_FIELD}": [
            f"{section.key}: the scripted model takes no key; leave it empty"]})
    named = values.get(f"{section.key}.api_key_env", "").strip()
    if not named:
        named = section.by_key()[f"{section.key}.api_key_env"].value
    name = named or spec.key_env
    if not name:
        raise SaveRefused({f"{section.key}.api_key_env": [
            f"{section.key}.api_key_env: name the variable that holds the key (e.g. "
            f"{provider.upper().replace('-', '_')}_API_KEY); the key is kept in secrets.toml "
            "under that name"]})
    return name


_FILE_FIX = re.compile(r" Fix it in config\.toml or with \S+\.$")


def by_field(problems: list[str], fields: Mapping[str, FormField]) -> dict[str, list[str]]:
    """Each problem beside the field whose key it names, the rest for the section
    (without the advice to fix the file: a refused form wrote nothing to it)."""
    found: dict[str, list[str]] = {}
    for problem in problems:
        problem = _FILE_FIX.sub("", problem)
        named = problem.split(":", 1)[0].strip()
        owner = max((k for k in fields if named == k or named.startswith(k + ".")),
                    key=len, default="")
        found.setdefault(owner, []).append(problem)
    return found


# -- the model's server -------------------------------------------------------------


def answers(provider: str, base_url: str, api_key_env: str, key: str,
            model: str = "") -> Answers:
    """What the model fields hold, as the setup's answers (a server's bare address
    with the `/v1` its API is under); ValueError for a choice that has no server
    to ask, SetupFailed for one with no address."""
    spec = PROVIDERS.get(provider)
    if spec is None:
        raise ValueError(f"unknown provider {provider!r}")
    if spec.kind is ProviderKind.SCRIPTED:
        raise ValueError("the scripted model has no server to ask")
    found = Answers(provider, model.strip(), base_url.strip() or None,
                    api_key_env=api_key_env.strip() or None, key=key.strip() or None)
    found.address  # noqa: B018  (SetupFailed now, before anything is asked)
    return setup_flow.with_api_path(found)[0]


def _sendable(paths: AgentPaths, chosen: Answers) -> dict[str, str]:
    """The secrets the server of `chosen` may be sent: the configured models'
    addresses are those a kept key already goes to."""
    try:
        config = current(paths)
    except ConfigError:
        config = None
    configured = [] if config is None else [
        s for s in (config.models.reasoning, config.models.chronicler) if s is not None]
    return setup_flow.sendable(configuration.load_secrets(paths), chosen, configured)


async def served_models(paths: AgentPaths, provider: str, base_url: str, api_key_env: str,
                        key: str) -> list[str]:
    """The models the server of this choice serves; DiscoveryFailed in one line,
    ValueError or SetupFailed for a choice that has no server to ask."""
    chosen = answers(provider, base_url, api_key_env, key)
    return await setup_flow.served_models(chosen, _sendable(paths, chosen))


async def served_window(paths: AgentPaths, provider: str, base_url: str, api_key_env: str,
                        key: str, model: str) -> dict[str, Any] | None:
    """The window the server serves `model` with, where it says it (tokens, where
    the figure comes from, a note); None when it does not say."""
    if not model.strip():
        raise ValueError("name the model first")
    chosen = answers(provider, base_url, api_key_env, key, model)
    window = await setup_flow.served_window(chosen, _sendable(paths, chosen))
    return None if window is None else {"tokens": window.tokens, "source": window.source,
                                        "note": window.note}


async def test_connection(paths: AgentPaths, role: Literal["reasoning", "chronicler"]) -> str:
    """The setup's live test of the configured model: what it answered, and
    whether it called the tool it was offered."""
    config = current(paths)
    settings = config.models.reasoning if role == "reasoning" else config.chronicler
    if settings is None:
        raise ProviderError(f"no {role} model is configured")
    outcome = await setup_flow.live_test_of(settings, configuration.load_secrets(paths))
    return tested(f"{settings.provider}/{settings.model}", outcome)


def tested(name: str, outcome: setup_flow.Outcome) -> str:
    """What the live test showed, in a sentence: what the model answered (its
    words, or a call of the tool it was offered, or nothing at all)."""
    tool = PROBE_TOOL.name
    if outcome.called_tool and outcome.answered:
        return (f"{name} answered “{outcome.answered}” and called the tool it was offered "
                f"({tool}): it is ready.")
    if outcome.called_tool:
        return (f"{name} answered with a call to the tool it was offered ({tool}), without "
                "words: it is ready.")
    if outcome.answered:
        return (f"{name} answered “{outcome.answered}” but did not call the tool it was "
                f"offered ({tool}). The agent's files, commands and memory are tools, so a "
                "model that calls none can only talk; a larger model, or a server started "
                "with tool calling on, does better.")
    return (f"{name} answered, but with no words and no tool call. It may need a larger "
            "answer length, or a chat template that supports tools; the agent cannot work "
            "with it as it is.")


__all__ = ["ConfigError", "FormField", "FormSection", "SaveRefused", "Saved", "answers", "current",
           "form", "save_section", "served_models", "served_window", "test_connection"]
