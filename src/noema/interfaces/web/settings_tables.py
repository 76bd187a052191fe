"""A list of small tables in the settings (the log files and the folders the
senses watch) as rows of fields, one field per key, instead of TOML to type.

A list qualifies when each of its tables holds only plain values (text,
numbers, flags, a fixed choice): each row is then a set of fields typed from
the table's model. The page sends the rows back as the TOML list `config set`
reads; an unchanged list is recognised by what it means, not by its spelling.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

# What a row is, per list, for its legend and its "Add …" button.
_ROW_NOUNS: Mapping[str, tuple[str, str]] = {
    "perception.logs": ("Log file", "a log file"),
    "perception.folders": ("Folder", "a folder"),
}
_PLAIN = (str, Path, int, float, bool)


@dataclass(frozen=True, slots=True)
class Column:
    """One key of the rows' tables, as a field."""

    name: str
    label: str
    kind: str  # "text", "number", "checkbox", "select"
    default: str = ""  # as text; "" when the key has no default (required) or none is shown
    required: bool = False
    choices: tuple[str, ...] = ()
    help: str = ""


@dataclass(frozen=True, slots=True)
class Tables:
    """A list of tables edited as rows."""

    noun: str  # "Log file": a row's legend, numbered
    add: str  # "a log file": the add button's object
    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]  # each row's values as text, in the columns' order


def _without_none(annotation: Any) -> Any:
    """The type inside `X | None` and `Annotated[X, …]`."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _without_none(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, getattr(typing, "UnionType", ())) or \
            type(annotation).__name__ == "UnionType":
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return _without_none(rest[0])
    return annotation


def row_model(annotation: Any) -> type[BaseModel] | None:
    """The table model of a `list[Model]` whose keys all hold plain values."""
    inner = _without_none(annotation)
    if typing.get_origin(inner) not in (list, tuple):
        return None
    args = [a for a in typing.get_args(inner) if a is not Ellipsis]
    if len(args) != 1 or not (isinstance(args[0], type) and issubclass(args[0], BaseModel)):
        return None
    model = args[0]
    return model if all(_kind(info.annotation) for info in model.model_fields.values()) else None


def _kind(annotation: Any) -> str | None:
    inner = _without_none(annotation)
    if inner is bool:
        return "checkbox"
    if inner in (int, float):
        return "number"
    if inner in (str, Path):
        return "text"
    if typing.get_origin(inner) is Literal or (isinstance(inner, type) and issubclass(inner, enum.Enum)):
        return "select"
    return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def tables(key: str, model: type[BaseModel], current: Any, label: Any) -> Tables:
    """The rows of the list at `key` (its tables now), and their columns."""
    columns = []
    for name, info in model.model_fields.items():
        kind = _kind(info.annotation) or "text"
        inner = _without_none(info.annotation)
        choices: tuple[str, ...] = ()
        if typing.get_origin(inner) is Literal:
            choices = tuple(str(c) for c in typing.get_args(inner))
        elif isinstance(inner, type) and issubclass(inner, enum.Enum):
            choices = tuple(str(m.value) for m in inner)
        elif kind == "checkbox" and info.default is None and not info.is_required():
            kind, choices = "select", ("true", "false")  # yes, no, or either: three answers
        required = info.is_required()
        said = info.description or ""
        if any(getattr(getattr(m, "func", None), "__name__", "") == "parse_duration"
               for m in info.metadata):
            said = "seconds, or a duration like 30s, 5m, 2h"
        columns.append(Column(name, label(name), kind, "" if required else _text(info.default),
                              required, choices, said))
    rows = tuple(tuple(_text(getattr(item, c.name)) for c in columns) for item in current or ())
    noun, add = _ROW_NOUNS.get(key, ("Item", "an item"))
    return Tables(noun, add, tuple(columns), rows)


def same(model: type[BaseModel], before: Any, after: Any) -> bool:
    """Whether two lists of tables mean the same (defaults spelled out or not)."""
    def meant(items: Any) -> list[dict[str, Any]] | None:
        if not isinstance(items, list):
            return None
        try:
            return [model.model_validate(item).model_dump() for item in items]
        except (ValidationError, TypeError, ValueError):
            return None

    first, second = meant(before), meant(after)
    return first is not None and first == second


__all__ = ["Column", "Tables", "row_model", "same", "tables"]
