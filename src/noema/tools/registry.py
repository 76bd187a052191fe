"""Tools the model can call: one typed Python function is the single source
of a tool's JSON schema, its argument validator and its description.

Anything that goes wrong with a call (unknown tool, malformed JSON, wrong
arguments, a refusal, a failure) becomes a tool result marked as an error
that goes back to the model; it never takes the agent down.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, get_type_hints

import pydantic

from ..providers.base import ToolCall, ToolSpec
from .errors import KNOWN_ERRNOS, ToolError, explain, shorten, tidy

__all__ = ["Tool", "ToolContext", "ToolError", "ToolRegistry", "ToolResult", "tool"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Per-call facts a tool may need; dependencies are bound when tools are built.

    A tool cancelled while it runs may append to `interruption` a sentence that
    says what its effect was (for example, a killed command and its partial
    output), so the model is told the truth about a cancelled call.
    """

    call_id: str
    turn_id: int  # the stored tool_call turn
    cycle_id: int
    interruption: list[str] = field(default_factory=list)
    # Whose words besides the person's the context holds ("" when none): a
    # side-effect call then waits for the person's yes (security/approvals.py).
    outside: str = ""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns to the model."""

    content: str
    is_error: bool = False
    outside: bool = False  # the content holds words from outside the person (a page, a mail)


Handler = Callable[..., Awaitable[str | ToolResult] | str | ToolResult]


@dataclass(frozen=True, slots=True)
class Tool:
    """A callable tool with its validated argument model."""

    name: str
    description: str
    side_effects: bool
    handler: Handler
    arguments: type[pydantic.BaseModel]

    @property
    def spec(self) -> ToolSpec:
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        return ToolSpec(self.name, self.description, schema)


def tool(
    *, side_effects: bool, name: str | None = None
) -> Callable[[Handler], Tool]:
    """Make a Tool of a function `f(ctx: ToolContext, arg: type = default, ...)`.

    The description and argument descriptions come from the docstring
    (a summary, then an `Args:` section of `name: text` lines).
    """

    def wrap(func: Handler) -> Tool:
        summary, arg_docs = _parse_docstring(inspect.getdoc(func) or "")
        hints = get_type_hints(func)
        fields: dict[str, Any] = {}
        params = list(inspect.signature(func).parameters.values())
        if not params or params[0].name != "ctx":
            raise TypeError(f"tool {func.__name__} must take ctx: ToolContext first")
        for param in params[1:]:
            annotation = hints.get(param.name, str)
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (
                annotation,
                pydantic.Field(default, description=arg_docs.get(param.name)),
            )
        model = pydantic.create_model(
            f"{func.__name__}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid"),
            **fields,
        )
        return Tool(name or func.__name__, summary, side_effects, func, model)

    return wrap


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into its summary and its `Args:` descriptions."""
    parts = re.split(r"^(?:Args|Arguments):\s*$", doc, maxsplit=1, flags=re.M)
    head = parts[0].strip()
    summary = "\n\n".join(" ".join(p.split()) for p in head.split("\n\n") if p.strip())
    described: dict[str, str] = {}
    current = None
    for line in (parts[1] if len(parts) > 1 else "").splitlines():
        match = re.match(r"^\s{0,8}(\w+)\s*(?:\(.*?\))?:\s*(.*)$", line)
        if match:
            current = match.group(1)
            described[current] = match.group(2).strip()
        elif current and line.strip():
            described[current] += " " + line.strip()
    return summary, described


class ToolRegistry:
    """The set of tools offered to the model in a cycle."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, new: Tool) -> None:
        if new.name in self._tools:
            raise ValueError(f"two tools are named {new.name!r}")
        self._tools[new.name] = new

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(self._tools[n].spec for n in sorted(self._tools))

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def check(self, call: ToolCall) -> tuple[Tool, dict] | ToolResult:
        """Validate a call: the tool and its arguments, or the error result."""
        found = self._tools.get(call.name)
        if found is None:
            return ToolResult(
                f"Error: there is no tool named {call.name!r}. "
                f"Available tools: {', '.join(self.names())}.",
                is_error=True,
            )
        try:
            raw = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return ToolResult(
                f"Error: the arguments for {call.name} are not valid JSON ({exc.msg} at "
                f"character {exc.pos}). Send a JSON object matching the tool's schema.",
                is_error=True,
            )
        except (ValueError, RecursionError):  # an integer of thousands of digits, or deep nesting
            return ToolResult(
                f"Error: the arguments for {call.name} hold a number or nesting too large to "
                "read. Send a JSON object matching the tool's schema, with ordinary numbers.",
                is_error=True,
            )
        if not isinstance(raw, dict):
            return ToolResult(
                f"Error: the arguments for {call.name} must be a JSON object, "
                f"not {type(raw).__name__}.",
                is_error=True,
            )
        try:
            parsed = found.arguments.model_validate(raw)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors()
            )
            return ToolResult(f"Error: invalid arguments for {call.name}: {problems}.", True)
        args = {k: getattr(parsed, k) for k in type(parsed).model_fields}
        for name, value in args.items():
            problem = _numeric_problem(value)
            if problem:
                return ToolResult(
                    f"Error: invalid arguments for {call.name}: {name} {problem}.", True
                )
        return found, args

    async def run(self, found: Tool, args: dict, ctx: ToolContext) -> ToolResult:
        """Run a checked call; failures become error results."""
        try:
            outcome = found.handler(ctx, **args)
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except ToolError as exc:
            return ToolResult(f"Error: {tidy(str(exc))}", is_error=True)
        except Exception as exc:  # the system's refusal, or a bug of ours or a library's
            advice = explain(exc)
            if advice:
                # An unusual errno may be a bug of ours (EBADF...): keep its traceback.
                known = getattr(exc, "errno", None) in KNOWN_ERRNOS
                level = logging.INFO if known else logging.WARNING
                log.log(level, "tool %s: %s (%r)", found.name, advice, exc, exc_info=not known)
                return ToolResult(f"Error: {advice}.", is_error=True)
            log.exception("tool %s failed", found.name)
            detail = shorten(f"{type(exc).__name__}: {exc}", 160, 60)
            return ToolResult(
                f"Error: the tool {found.name} failed unexpectedly ({detail}).", is_error=True
            )
        if isinstance(outcome, ToolResult):
            return outcome
        return ToolResult(str(outcome))

    async def call(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Check and run a call in one step."""
        checked = self.check(call)
        if isinstance(checked, ToolResult):
            return checked
        return await self.run(*checked, ctx)


# No tool has a use for an integer beyond 64 bits; past it, databases and
# system calls fail with overflow errors far from the argument that caused them.
_INT_BOUND = 2**63 - 1


def _numeric_problem(value: Any) -> str | None:
    """Why a validated argument value is not a usable number, or None.

    Python's JSON reader accepts `NaN`, `Infinity` and `1e999`, and pydantic
    turns the string "nan" into a float, so non-finite numbers are refused
    here, for every tool, wherever they sit in the arguments.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, not {value!r} (NaN and infinity are refused)"
    if isinstance(value, int) and abs(value) > _INT_BOUND:
        return "is far too large; use an ordinary number"
    if isinstance(value, dict):
        values: Iterable[Any] = value.values()
    elif isinstance(value, (list, tuple, set, frozenset)):
        values = value
    elif isinstance(value, pydantic.BaseModel):
        values = (getattr(value, k) for k in type(value).model_fields)
    else:
        return None
    for item in values:
        problem = _numeric_problem(item)
        if problem:
            return problem
    return None
