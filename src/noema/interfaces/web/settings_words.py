"""What is wrong with a value typed into the settings, in the person's words.

The validator's own messages ("Input should be a valid integer, unable to
parse string as an integer") are written for programmers, and the message
`noema config set` adds ("Fix it in config.toml or with NOEMA__…") is about a
file nothing was written to. A form's refusal instead names the field as the
form labels it, says what is wrong with what was typed, and what to type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# pydantic's error types, grouped by what the person typed wrong.
_WHOLE = {"int_parsing", "int_type", "int_from_float", "int_parsing_size"}
_NUMBER = {"float_parsing", "float_type", "decimal_parsing", "decimal_type"}
_FLAG = {"bool_parsing", "bool_type"}
_TEXT = {"string_type"}
_CHOICE = {"literal_error", "enum"}


def shown(value: Any) -> str:
    """What was typed, quoted, short enough for a sentence."""
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return f"“{text[:40]}…”" if len(text) > 40 else f"“{text}”"


def _figure(value: Any) -> str:
    """A bound as a person writes it: 0 rather than 0.0, thousands grouped."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


def explain(error: Mapping[str, Any], label: str, example: str = "", leaf: str = "") -> str:
    """One pydantic error about a field labelled `label`, as a sentence that says
    what is wrong and what to type instead. `example` is a value that would do
    (the field's default or current value); `leaf` is the key's own name, which
    a validator's sentence may begin with ("search_url must be …")."""
    kind = str(error.get("type", ""))
    context = error.get("ctx") or {}
    typed = error.get("input")
    like = f", like {example}" if example else ""
    if kind in _WHOLE:
        what = f"{shown(typed)} is not a whole number" if typed not in (None, "") else "empty"
        return f"{label}: {what}. Type a whole number{like}."
    if kind in _NUMBER:
        return f"{label}: {shown(typed)} is not a number. Type a number{like}."
    if kind in _FLAG:
        return f"{label}: {shown(typed)} is neither on nor off. Tick the box or leave it empty."
    if kind in _TEXT:
        return f"{label}: this takes text. Type it{like}."
    if kind == "greater_than":
        bound = context.get("gt")
        return f"{label}: {shown(typed)} is too small. Type a number above {_figure(bound)}."
    if kind == "greater_than_equal":
        bound = context.get("ge")
        return f"{label}: {shown(typed)} is too small. Type {_figure(bound)} or more."
    if kind == "less_than":
        bound = context.get("lt")
        return f"{label}: {shown(typed)} is too large. Type a number below {_figure(bound)}."
    if kind == "less_than_equal":
        bound = context.get("le")
        return f"{label}: {shown(typed)} is too large. Type {_figure(bound)} or less."
    if kind in _CHOICE:
        expected = str(context.get("expected", "")).replace("'", "")
        return f"{label}: {shown(typed)} is not one of the choices. Choose {expected}."
    if kind == "string_too_short":
        return f"{label}: this cannot be empty. Type a value{like}, or empty it to use the default."
    if kind == "string_too_long":
        return f"{label}: too long; at most {_figure(context.get('max_length'))} characters."
    if kind == "too_short":
        return f"{label}: needs at least {_figure(context.get('min_length'))} item(s)."
    if kind == "missing":
        return f"{label}: this is needed. Type a value{like}."
    # Our own validators speak in sentences already ("Value error, …").
    said = str(error.get("msg", "not accepted")).removeprefix("Value error, ")
    end = "" if said.endswith(".") else "."
    if leaf and said.lower().startswith(leaf.lower() + " "):
        return f"{label} {said[len(leaf) + 1:]}{end}"  # "Search url must be …", said once
    said = said[:1].upper() + said[1:]
    return f"{label}: {said}{end}"


__all__ = ["explain", "shown"]
