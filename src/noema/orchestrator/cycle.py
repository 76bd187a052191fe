"""One reasoning cycle: from delivering input to the model until it answers
with no pending tool call (or the step bound is reached).

Every turn is written to the store (and the session) before it is shown or
acted on: the assistant's text and tool calls when the model's response is
complete, each tool result as soon as the tool returns. What the cycle has
done so far is kept in a `CycleProgress` that whoever cancels the cycle
reads to repair the history (see `repair.py`).
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ..memory.chronicle import OutsideText
from ..memory.session import Session
from ..memory.tokens import estimate_tokens
from ..memory.turns import Flag, NewTurn, Source, SourceKind, Turn, TurnKind, sources_union
from ..providers.base import (
    ModelRequest,
    Provider,
    ResponseBuilder,
    RetryWait,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from ..security.provenance import ArgumentCheck, OutsideItem, leading
from ..tools.registry import Tool, ToolContext, ToolRegistry, ToolResult
from .progress import ALIKE_RUN, SeenCall, repeats, seen_call
from .context import BuiltContext, ContextLimits, ContextTooSmall, RequestShape, build_context


log = logging.getLogger(__name__)


class CycleEnd(enum.StrEnum):
    ANSWERED = "answered"  # the model replied with no tool call
    STEP_LIMIT = "step_limit"  # bounded: the model kept calling tools
    REPEATING = "repeating"  # stopped: the model kept making a call it was told changes nothing
    NO_PROGRESS = "no_progress"  # stopped: its calls changed only in details, their results not at all


# The same call (tool and arguments) that gave the same result this many
# times in a row is not run again in the cycle: the model is told so. A
# small local model can make one call over and over until the step bound,
# each one a model request of seconds to minutes; a call worth repeating
# (a check after a change) gives another result, or follows another call.
REPEATS_RUN = 2


@dataclass(frozen=True, slots=True)
class CycleSettings:
    max_steps: int = 24
    max_answer: int = 4096  # the model's configured output limit, for max_tokens


class CycleListener:
    """Receives what a cycle does, for display. Every method is optional."""

    def on_model_request(self, step: int) -> None: ...
    def on_text(self, delta: str) -> None: ...
    def on_retry(self, wait: RetryWait) -> None:
        """The model request failed before any answer and is retried after a wait."""
    def on_turn(self, turn: Turn) -> None: ...
    def on_tool_start(self, call: Turn, side_effects: bool) -> None: ...
    def on_tool_end(self, call: Turn, result: Turn) -> None: ...


@dataclass
class CycleProgress:
    """The record of a cycle in flight."""

    cycle_id: int
    step: int = 0
    partial: list[str] = field(default_factory=list)  # streamed text not yet stored
    stored: list[int] = field(default_factory=list)  # turns this cycle put in the session
    unanswered: list[Turn] = field(default_factory=list)  # stored calls with no result yet
    running: Turn | None = None  # the call whose tool is running now
    running_context: ToolContext | None = None
    running_side_effects: bool = False
    running_job: asyncio.Task[ToolResult] | None = None  # the tool's own task, to kill it alone
    running_began: bool = False  # the running tool's code was entered (it may have acted)
    side_effects_started: int = 0
    last_confirmed_action: str | None = None
    usage: Usage | None = None
    tokens: int = 0  # input and output over all the cycle's model calls
    last_seen: tuple[str, str, str] | None = None  # tool, arguments and result of the last call
    same_in_a_row: int = 0  # calls in a row that gave `last_seen`
    refused_repeats: int = 0  # calls not run for being such a repeat
    # The outside words that led when the model began its current answer: what
    # it streamed is theirs too, if a stop keeps it (orchestrator/repair.py).
    lead: tuple[Source, ...] = ()
    seen: list[SeenCall] = field(default_factory=list)  # the calls run, noise removed
    refused_alike: int = 0  # calls not run for only repeating earlier ones in details
    refused_tool: str = ""  # the tool of the newest call refused so


class ReasoningCycle:
    """Runs cycles against one session, provider and tool registry."""

    def __init__(
        self,
        session: Session,
        provider: Provider,
        tools: ToolRegistry,
        system_prompt: Callable[[], str],
        settings: CycleSettings = CycleSettings(),
        outside_context: Callable[[], list[OutsideText]] = list,
        *,
        between_steps: Callable[[], object] | None = None,
    ) -> None:
        """`between_steps` runs after a step's tool results are stored, before
        the next model request: the compactor's check, so a long cycle does
        not outgrow the window before its end lets a save point begin."""
        self.session = session
        self.between_steps = between_steps
        self.provider = provider
        self.tools = tools
        self.system_prompt = system_prompt
        self.settings = settings
        self.outside_context = outside_context
        self._specs: tuple[tuple[str, ...], tuple[ToolSpec, ...]] | None = None
        self._texts: dict = {}  # a turn's words, read once (turns never change)

    def lead(self) -> tuple[Source, ...]:
        """The sources of the outside words that lead the context now."""
        extra = [OutsideItem(o.ts, o.sources) for o in self.outside_context() if not o.taken_up]
        return leading(self.session.turns, extra)

    def _argument_check(self) -> ArgumentCheck:
        """What only outside words in the context said, read when first asked."""
        if len(self._texts) > 20_000:  # a long-lived agent: keep the recent turns' words
            self._texts.clear()
        extra = [(o.text, o.sources) for o in self.outside_context()]
        return ArgumentCheck(self.session.turns, extra, reads=self._reads, cache=self._texts)

    def _reads(self, name: str) -> bool:
        found = self.tools.get(name)
        return found is not None and not found.side_effects

    @property
    def limits(self) -> ContextLimits:
        """How large a request of this cycle may grow."""
        return ContextLimits(self.provider.context_window,
                             max_answer=min(self.settings.max_answer,
                                            self.provider.context_window - 1))

    def next_request(self) -> BuiltContext:
        """The request the model would get now: what it carries, part by part."""
        return build_context(self.system_prompt(), self.session.turns, self.limits,
                             self._tool_specs())

    def request_shape(self, save_point_tokens: int = 0) -> RequestShape:
        """The next request part by part, or why none fits the window."""
        window = self.provider.context_window
        offered, total = len(self._tool_specs()), len(self.tools)
        try:
            built = self.next_request()
        except ContextTooSmall as exc:
            return RequestShape(window, tools_offered=offered, tools_total=total,
                                problem=str(exc))
        return RequestShape(
            window, system=built.system_tokens, save_point=save_point_tokens,
            tools=built.tools_tokens, tools_offered=offered, tools_total=total,
            turns=built.turns_sent, turn_tokens=built.turn_tokens, answer=built.answer_room,
            left_out=len(built.left_out), cut=len(built.cut),
        )

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """The descriptions of the tools the next request offers."""
        return self._tool_specs()

    def _tool_specs(self) -> tuple[ToolSpec, ...]:
        # Building JSON schemas costs milliseconds per request, on the path of
        # every restart after an interruption; the offer changes only when a
        # tool is added or a group enabled.
        names = tuple(self.tools.offered())
        if self._specs is None or self._specs[0] != names:
            self._specs = (names, self.tools.specs())
        return self._specs[1]

    async def run(self, progress: CycleProgress, listener: CycleListener) -> CycleEnd:
        """Run the cycle recorded in `progress` to its end."""
        for step in range(self.settings.max_steps):
            progress.step = step
            calls = await self._think(progress, listener)
            if not calls:
                return CycleEnd.ANSWERED
            refused_before = progress.refused_repeats
            alike_before = progress.refused_alike
            for call in calls:
                await self._act(call, progress, listener)
            if alike_before and progress.refused_alike > alike_before:
                # Told once that such a call changes nothing, the model made it again.
                self._note(progress, listener,
                           f"This cycle was stopped: the model kept calling {progress.refused_tool} "
                           "with arguments that changed only in details (numbers, names, times) "
                           "while the results stayed the same, after it was told so; tell the "
                           "person what is done and what is left.")
                return CycleEnd.NO_PROGRESS
            if refused_before and progress.refused_repeats > refused_before \
                    and progress.last_seen is not None:
                # Told once that the call changes nothing, the model made it again.
                self._note(progress, listener,
                           f"This cycle was stopped: the model kept calling {progress.last_seen[0]} "
                           "with the same arguments after it was told the result would not "
                           "change; tell the person what is done and what is left.")
                return CycleEnd.REPEATING
            self._between_steps()
        self._note(progress, listener,
                   f"This cycle reached its bound of {self.settings.max_steps} model calls and "
                   "was stopped there; tell the person what is done and what is left.")
        return CycleEnd.STEP_LIMIT

    def _between_steps(self) -> None:
        if self.between_steps is None:
            return
        try:
            self.between_steps()
        except Exception:  # a check that fails must not end the person's reply
            log.exception("the check between two steps of a cycle failed; the cycle goes on")

    def _note(self, progress: CycleProgress, listener: CycleListener, text: str) -> None:
        note = self.session.append(
            NewTurn(TurnKind.NOTE, text, cycle_id=progress.cycle_id, flags=Flag.SYNTHETIC)
        )
        progress.stored.append(note.id)
        listener.on_turn(note)

    async def _think(self, progress: CycleProgress, listener: CycleListener) -> list[Turn]:
        """One model call; stores its text and tool calls, returns the calls."""
        limits = self.limits
        built = build_context(self.system_prompt(), self.session.turns, limits,
                              self._tool_specs())
        # Prompt and answer together must fit the window: a strict server
        # refuses a request whose max_tokens would overflow it.
        request = ModelRequest(messages=built.messages, tools=self._tool_specs(),
                               max_tokens=limits.max_tokens(built.tokens))
        listener.on_model_request(progress.step)
        builder = ResponseBuilder()
        progress.partial.clear()
        progress.lead = self.lead()
        # Charged before the stream: a request cut short was still paid for.
        estimated_input = sum(estimate_tokens(m.content) for m in request.messages)
        try:
            async for event in self.provider.stream(request):
                builder.feed(event)
                if isinstance(event, TextDelta):
                    progress.partial.append(event.text)
                    listener.on_text(event.text)
                elif isinstance(event, RetryWait):
                    listener.on_retry(event)
        finally:
            usage = builder.usage
            progress.tokens += (
                usage.input_tokens + usage.output_tokens if usage
                else estimated_input + estimate_tokens(builder.text)
            )
        response = builder.build()
        progress.usage = response.usage or progress.usage

        news: list[NewTurn] = []
        # What the model writes while outside words lead may repeat them, and
        # so may what it writes after the person took them up (an answer that
        # quotes a mail, a call that repeats an older order): read back later
        # (a lookup, a search), it is theirs as much as its own.
        lead = self.lead()
        words = self._argument_check()

        def whose(text: dict[str, str] | str) -> tuple[Source, ...]:
            carried = words.carried(text)
            return sources_union(lead, carried.sources) if carried else lead

        if response.text.strip():
            news.append(NewTurn(TurnKind.ASSISTANT, response.text, cycle_id=progress.cycle_id,
                                sources=whose({"text": response.text})))
        taken = {t.call_id for t in self.session.turns if t.is_call}
        for index, call in enumerate(response.tool_calls):
            news.append(
                NewTurn(
                    TurnKind.TOOL_CALL,
                    tool_name=call.name or "(unnamed)",
                    call_id=_unique_call_id(call, taken, progress, index),
                    arguments=call.arguments,
                    cycle_id=progress.cycle_id,
                    sources=whose(call.arguments or "{}"),
                )
            )
        stored = self.session.append_all(news)
        progress.partial.clear()
        progress.stored.extend(t.id for t in stored)
        for turn in stored:
            listener.on_turn(turn)
        progress.unanswered = [t for t in stored if t.is_call]
        return list(progress.unanswered)

    async def _act(self, call: Turn, progress: CycleProgress, listener: CycleListener) -> None:
        """Run one stored call and store its result."""
        ctx = ToolContext(call.call_id or "", call.id, progress.cycle_id,
                          lead=self.lead(), words=self._argument_check())
        made = _call_key(call)
        if progress.same_in_a_row >= REPEATS_RUN and progress.last_seen is not None \
                and progress.last_seen[:2] == made:
            progress.refused_repeats += 1
            self._store_result(call, ToolResult(
                f"Not run: {made[0]} was just called {progress.same_in_a_row} times in a row "
                "with these same arguments and gave the same result each time; it would give "
                "it again. Use that result, do something else, or answer.", is_error=True,
                sources=(),
            ), progress, listener)
            return
        alike = repeats(progress.seen, made[0], call.arguments or "")
        if alike >= ALIKE_RUN:
            progress.refused_alike += 1
            progress.refused_tool = made[0]
            self._store_result(call, ToolResult(
                f"Not run: {made[0]} was already called {alike} times in this cycle with "
                "arguments that differ only in details (numbers, names, times) and gave the "
                "same result each time; another such call would change nothing. Use what you "
                "have, do something else, or answer.", is_error=True,
                sources=(),
            ), progress, listener)
            return
        checked = self.tools.check(ToolCall(ctx.call_id, call.tool_name or "", call.arguments or ""))
        if isinstance(checked, ToolResult):
            result = checked
        else:
            found, args = checked
            progress.running, progress.running_context = call, ctx
            progress.running_side_effects = found.side_effects
            if found.side_effects:
                progress.side_effects_started += 1
            listener.on_tool_start(call, found.side_effects)
            progress.running_began = False
            job = progress.running_job = asyncio.ensure_future(
                self._run_tool(found, args, ctx, progress)
            )
            try:
                result = await job
            except asyncio.CancelledError:
                # Cancelled after the tool had already returned: its result is
                # true and is stored before the cancellation goes on.
                if not job.done() or job.cancelled() or job.exception() is not None:
                    raise
                self._store_result(call, job.result(), progress, listener)
                raise
            finally:
                progress.running_job = None
        self._store_result(call, result, progress, listener)
        seen = (*made, result.content)
        progress.seen.append(seen_call(made[0], call.arguments or "", result.content))
        progress.same_in_a_row = progress.same_in_a_row + 1 if seen == progress.last_seen else 1
        progress.last_seen = seen
        # A tool that finished despite a cancellation (an atomic write does) has
        # its true result stored above; the cancellation still stands.
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError

    async def _run_tool(
        self, found: Tool, args: dict, ctx: ToolContext, progress: CycleProgress
    ) -> ToolResult:
        progress.running_began = True
        return await self.tools.run(found, args, ctx)

    def _store_result(
        self, call: Turn, result: ToolResult, progress: CycleProgress, listener: CycleListener
    ) -> None:
        if progress.running_side_effects and not result.is_error:
            progress.last_confirmed_action = f"{call.tool_name} (turn {call.id})"
        stored = self.session.append(result_turn(call, result, progress.cycle_id))
        progress.running = progress.running_context = None
        progress.running_side_effects = False
        progress.unanswered.remove(call)
        progress.stored.append(stored.id)
        listener.on_turn(stored)
        listener.on_tool_end(call, stored)


def result_turn(call: Turn, result: ToolResult, cycle_id: int | None) -> NewTurn:
    """The turn that answers a stored call. A result whose tool declared
    nothing (a path that did not go through the registry) is outside words."""
    sources = result.sources
    if sources is None:
        sources = (Source(SourceKind.TOOL, call.tool_name or ""),)
    return NewTurn(
        TurnKind.TOOL_RESULT,
        result.content,
        tool_name=call.tool_name,
        call_id=call.call_id,
        cycle_id=cycle_id,
        flags=(Flag.ERROR if result.is_error else Flag.NONE)
        | (Flag.OUTSIDE if sources else Flag.NONE)
        | (Flag.WAITING if result.waiting else Flag.NONE),
        sources=sources,
    )


def _call_key(call: Turn) -> tuple[str, str]:
    """A call's tool and arguments, the arguments in one spelling when they
    are JSON (`{"a": 1}` and `{ "a":1 }` are the same call)."""
    arguments = call.arguments or ""
    try:
        arguments = json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except (ValueError, RecursionError):  # not JSON: the check below says so to the model
        pass
    return call.tool_name or "", arguments


def _unique_call_id(call: ToolCall, taken: set[str | None], progress: CycleProgress, index: int) -> str:
    # Some local servers number calls from zero in every response; IDs must be
    # unique across the whole history for the protocols to pair results.
    candidate = call.id or f"call_{progress.cycle_id}_{progress.step}_{index}"
    if candidate in taken:
        candidate = f"{candidate}_{progress.cycle_id}_{progress.step}_{index}"
    taken.add(candidate)
    return candidate
