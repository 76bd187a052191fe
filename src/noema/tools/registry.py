"""Tools the model can call: one typed Python function is the single source
of a tool's JSON schema, its argument validator and its description.

Anything that goes wrong with a call (unknown tool, malformed JSON, wrong
arguments, a refusal, a failure) becomes a tool result marked as an error
that goes back to the model; it never takes the agent down.

The registry also decides which tools a request *offers*. Tools come in
named groups; when all their descriptions fit the budget the window allows
(`size_to`), every tool is offered as before. When they do not, only the
core tools are, with `enable_tools`, which lists the other groups and
enables (or disables) them by name. What is enabled lasts while the agent
runs and is restored on start from the `enable_tools` calls still in the
session (`restore`), so what the model sees in its history and what it is
offered agree. A call to a known tool that is not offered returns an error
naming the `enable_tools` call that offers it.

**Whose words a result holds fails closed.** A result is outside words (its
turn names the tool as its source) unless the tool vouches for it: a tool
made with `own_words=True` says that what it returns is the agent's own
(a time, a confirmation), and that where it shows stored text (a turn, a
file, a schedule, a mail) it returns a `ToolResult` carrying the sources of
what it shows. Any other tool, a tool server's among them, is outside
words, its errors too. An action (a tool with side effects) whose arguments
repeat what only outside words said returns those words too, whatever it
vouches: "Sent to …", "Saved … to …" and their errors echo the arguments.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_type_hints

import pydantic

from ..memory.turns import Source, SourceKind, sources_union
from ..providers.base import ToolCall, ToolSpec
from .errors import KNOWN_ERRNOS, ToolError, explain, shorten, tidy

if TYPE_CHECKING:
    from ..security.provenance import ArgumentCheck

__all__ = ["ENABLE_TOOLS", "Tool", "ToolContext", "ToolError", "ToolRegistry", "ToolResult", "tool"]

ENABLE_TOOLS = "enable_tools"
# Where a tool added without a group goes (a tool server's, once it answers).
OTHER_GROUP = "other"


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
    # The sources of the outside words that lead the conversation (none: the
    # person's own): a side-effect call then waits for the person's yes, and
    # what it leaves (a file, a schedule, a note) keeps them
    # (security/provenance.py, security/approvals.py).
    lead: tuple[Source, ...] = ()
    # What only outside words in the context said, to find in a call's arguments.
    words: ArgumentCheck | None = None

    @property
    def outside(self) -> bool:
        """Whether outside words lead the conversation."""
        return bool(self.lead)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns to the model."""

    content: str
    is_error: bool = False
    # Whose outside words the content holds: () for the agent's and the
    # person's own, None for "as the tool declares" (see the module's note).
    sources: tuple[Source, ...] | None = None
    # Not run yet: its question went to the person's channels (set by the
    # approval gate), and what becomes of it comes later as an event.
    waiting: bool = False

    @property
    def outside(self) -> bool:
        """Whether the content holds outside words."""
        return bool(self.sources)


Handler = Callable[..., Awaitable[str | ToolResult] | str | ToolResult]


@dataclass(frozen=True, slots=True)
class Tool:
    """A callable tool with its validated argument model."""

    name: str
    description: str
    side_effects: bool
    handler: Handler
    arguments: type[pydantic.BaseModel]
    # The tool vouches that its results are the agent's own words unless it
    # says otherwise in each result (see the module's note on failing closed).
    own_words: bool = False

    @property
    def spec(self) -> ToolSpec:
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        return ToolSpec(self.name, self.description, schema)


def tool(
    *, side_effects: bool, name: str | None = None, own_words: bool = False
) -> Callable[[Handler], Tool]:
    """Make a Tool of a function `f(ctx: ToolContext, arg: type = default, ...)`.

    The description and argument descriptions come from the docstring
    (a summary, then an `Args:` section of `name: text` lines). `own_words`:
    the tool vouches for its words (see the module's note).
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
        return Tool(name or func.__name__, summary, side_effects, func, model, own_words)

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


@dataclass(frozen=True, slots=True)
class _Group:
    name: str
    summary: str
    tools: list[str] = field(default_factory=list)


class ToolRegistry:
    """Every tool the agent has, and which of them a request offers."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._group_of: dict[str, str] = {}
        self._groups: dict[str, _Group] = {}
        self._core: set[str] = set()
        self._enabled: set[str] = set()
        self._lazy = False  # True: only the core and the enabled groups are offered
        self._limit: int | None = None  # most tokens the enabled tools may take
        self._measure: Callable[[Sequence[ToolSpec]], int] | None = None
        self._enabler_made: tuple[tuple[str, ...], Tool] | None = None
        for t in tools:
            self.add(t)

    def add(self, new: Tool, group: str | None = None) -> None:
        """Add a tool; `group` names the group it is enabled with (default: "other")."""
        if new.name in self._tools or new.name == ENABLE_TOOLS:
            raise ValueError(f"two tools are named {new.name!r}")
        self._tools[new.name] = new
        name = group or OTHER_GROUP
        found = self._groups.setdefault(name, _Group(name, _OTHER_SUMMARY if name == OTHER_GROUP
                                                     else name))
        found.tools.append(new.name)
        self._group_of[new.name] = name
        self._enabler_made = None

    def group(self, name: str, summary: str, members: Iterable[str], *,
              core: Iterable[str] = ()) -> None:
        """Put the tools named in `members` (those the registry has) in one group,
        described to the model by `summary`; those also named in `core` are
        offered even when the group is not enabled."""
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", name) or name == OTHER_GROUP:
            raise ValueError(f"a group name is lowercase letters, digits, - and _: {name!r}")
        self._groups[name] = found = _Group(name, summary, list(self._groups.get(
            name, _Group(name, summary)).tools))
        core = set(core)
        for member in members:
            if member not in self._tools or member in found.tools:
                continue
            self._groups[self._group_of[member]].tools.remove(member)
            found.tools.append(member)
            self._group_of[member] = name
            if member in core:
                self._core.add(member)
        self._enabler_made = None

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Every tool the agent has (offered now or not)."""
        return sorted(self._tools)

    # -- what a request offers ------------------------------------------------

    def size_to(self, budget: int, measure: Callable[[Sequence[ToolSpec]], int], *,
                limit: int | None = None) -> bool:
        """Offer every tool if their descriptions take at most `budget` tokens
        (as `measure` counts them); otherwise only the core, the enabled groups
        and `enable_tools`, which refuses to enable past `limit` tokens.
        Returns whether the offer is restricted. Tools added later (a tool
        server's, once it answers) join that offer: all offered if all were,
        else in the group "other", enabled like the rest."""
        self._measure = measure
        self._limit = limit
        self._lazy = False
        self._lazy = measure(self.specs()) > budget
        return self._lazy

    def offered(self) -> list[str]:
        """The names of the tools a request offers now, sorted."""
        if not self._lazy:
            return sorted(self._tools)
        names = [n for n in self._tools
                 if n in self._core or self._group_of[n] in self._enabled]
        return sorted([*names, ENABLE_TOOLS])

    def specs(self) -> tuple[ToolSpec, ...]:
        """The descriptions of the tools offered now."""
        return tuple(self._lookup(n).spec for n in self.offered())

    def groups(self) -> list[tuple[str, str, list[str], bool]]:
        """Each group: name, summary, its tools, and whether all of them are offered."""
        offered = set(self.offered())
        return [(g.name, g.summary, sorted(g.tools), all(t in offered for t in g.tools))
                for g in sorted(self._groups.values(), key=lambda g: g.name) if g.tools]

    def enable(self, groups: Iterable[str] = (), disable: Iterable[str] = ()) -> str:
        """Change the enabled groups; the text says what is offered now.
        Raises ToolError naming the fix for an unknown group or too many tools."""
        wanted, dropped = list(dict.fromkeys(groups)), list(dict.fromkeys(disable))
        unknown = [g for g in [*wanted, *dropped] if g not in self._groups]
        if unknown:
            raise ToolError(f"there is no tool group {', '.join(map(repr, unknown))}; the groups "
                            f"are: {', '.join(sorted(self._groups))}")
        before = set(self._enabled)
        self._enabled = (self._enabled | set(wanted)) - set(dropped)
        if self._measure is not None and self._limit is not None and self._lazy:
            cost = self._measure(self.specs())
            if cost > self._limit:
                self._enabled = before
                others = sorted(before - set(wanted))
                hint = (f"; disable one first, e.g. enable_tools(disable=[{others[0]!r}]) "
                        f"(enabled now: {', '.join(others)})") if others else ""
                raise ToolError(f"with {', '.join(wanted)} the tool descriptions would take about "
                                f"{cost:,} tokens, more than the {self._limit:,} this model's window "
                                f"leaves for them{hint}")
        return self._menu()

    def restore(self, arguments: Iterable[str]) -> None:
        """Replay the arguments of `enable_tools` calls that succeeded (oldest
        first), as the session holds them; what no longer applies is skipped."""
        for raw in arguments:
            try:
                args = json.loads(raw or "{}")
                wanted = [g for g in args.get("groups", []) if g in self._groups]
                dropped = [g for g in args.get("disable", []) if g in self._groups]
                self.enable(wanted, dropped)
            except (ValueError, AttributeError, TypeError, ToolError):
                continue

    def _menu(self) -> str:
        lines = []
        for name, summary, tools, on in self.groups():
            state = "offered" if on else "not enabled"
            lines.append(f"- {name} ({state}): {summary}. Tools: {', '.join(tools)}")
        return "Tool groups:\n" + "\n".join(lines)

    def _lookup(self, name: str) -> Tool:
        if name == ENABLE_TOOLS:
            return self._enabler()
        return self._tools[name]

    def _enabler(self) -> Tool:
        waiting = tuple(name for name, _, _, on in self.groups() if not on)
        if self._enabler_made is not None and self._enabler_made[0] == waiting:
            return self._enabler_made[1]
        listing = "; ".join(f"{g.name}: {g.summary}" for g in sorted(
            self._groups.values(), key=lambda g: g.name) if g.name in waiting)
        registry = self

        def enable_tools(ctx: ToolContext, groups: list[str] = [],  # noqa: B006 (copied by pydantic)
                         disable: list[str] = []) -> str:  # noqa: B006
            return registry.enable(groups, disable)

        enable_tools.__doc__ = (
            "Offer more tools by group (they stay offered); no argument lists each "
            f"group's tools. Not enabled: {listing or 'none'}.\n\n"
            "Args:\n    groups: Groups to enable.\n    disable: Groups to stop offering."
        )
        made = tool(side_effects=False, own_words=True)(enable_tools)
        self._enabler_made = (waiting, made)
        return made

    def __contains__(self, name: str) -> bool:
        return name in self._tools or (name == ENABLE_TOOLS and self._lazy)

    def __len__(self) -> int:
        return len(self._tools)

    def check(self, call: ToolCall) -> tuple[Tool, dict] | ToolResult:
        """Validate a call: the tool and its arguments, or the error result
        (the registry's own words)."""
        checked = self._check(call)
        if isinstance(checked, ToolResult):
            return ToolResult(checked.content, checked.is_error, sources=())
        return checked

    def _check(self, call: ToolCall) -> tuple[Tool, dict] | ToolResult:
        offered = self.offered()
        if call.name == ENABLE_TOOLS and self._lazy:
            found: Tool | None = self._enabler()
        elif call.name in self._tools and call.name not in offered:
            group = self._group_of[call.name]
            return ToolResult(
                f"Error: the tool {call.name} is not offered right now: it belongs to the group "
                f"{group!r}. Call {ENABLE_TOOLS}(groups=[{group!r}]) first, then call "
                f"{call.name} again.",
                is_error=True,
            )
        else:
            found = self._tools.get(call.name)
        if found is None:
            more = f" {ENABLE_TOOLS}() lists the groups that offer more." if self._lazy else ""
            return ToolResult(
                f"Error: there is no tool named {call.name!r}. "
                f"Available tools: {', '.join(offered)}.{more}",
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
        """Run a checked call; failures become error results. The result says
        whose words it holds: what the tool declared, else its default; an
        action's result also holds whatever outside words its arguments
        carried, since a confirmation or an error repeats them."""
        result = await self._run(found, args, ctx)
        sources = result.sources
        if sources is None:
            sources = () if found.own_words else (Source(SourceKind.TOOL, found.name),)
        if found.side_effects and ctx.words is not None:
            carried = ctx.words.carried(args)
            if carried is not None:
                sources = sources_union(sources, carried.sources)
        if sources == result.sources:
            return result
        return ToolResult(result.content, result.is_error, sources=sources,
                          waiting=result.waiting)

    async def _run(self, found: Tool, args: dict, ctx: ToolContext) -> ToolResult:
        try:
            outcome = found.handler(ctx, **args)
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except ToolError as exc:  # its message may repeat stored outside words
            return ToolResult(f"Error: {tidy(str(exc))}", is_error=True, sources=exc.sources)
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


_OTHER_SUMMARY = "tools added while the agent runs (tool servers)"


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
