"""Small windows (4,096 and 8,192 tokens) are first class: the trigger counts the
whole request, max_tokens fits the window, tools are offered by need, the
estimates can be calibrated, and a window no request fits is refused."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noema.app import build_app, window_problems
from noema.config import Config, ModelsSection
from noema.memory import savepoints, tokens
from noema.memory.chronicler import ChronicleRequest, Chronicler, Rejection
from noema.memory.compaction import Compactor
from noema.memory.pruning import context_cost
from noema.memory.settings import MemorySettings
from noema.memory.turns import Flag
from noema.memory.validator import Failure, citable
from noema.orchestrator.context import ContextLimits, tools_tokens
from noema.orchestrator.window_check import RequestNeeds
from noema.orchestrator.window_check import window_problems as needs_problems
from noema.paths import AgentPaths
from noema.providers.base import (
    Finish,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
)
from noema.providers.scripted import ScriptedProvider, say
from noema.providers.scripted import call as call_
from noema.providers.settings import ModelSettings
from noema.security.settings import FilesSettings, RootSettings
from noema.tools.registry import ENABLE_TOOLS, ToolContext, ToolRegistry, tool

from .conftest import chat, said_in_request, save_point_text

CTX = ToolContext("c1", 1, 1)
WORDS = ("river stone garden lamp letter window harbour bread winter market music paper "
         "kitchen budget family project holiday weather morning evening").split()


def prose(seed: int, count: int = 150) -> str:
    rnd = random.Random(seed)
    return " ".join(rnd.choice(WORDS) for _ in range(count))


# -- token estimates and their calibration ------------------------------------


@pytest.fixture
def unscaled():
    tokens.set_scale(1.0)
    yield
    tokens.set_scale(1.0)


async def test_a_real_counter_scales_the_estimates_within_bounds(unscaled):
    text = prose(1)
    plain = tokens.estimate_tokens(text)

    async def double(texts):
        return [2 * tokens.raw_estimate(t) for t in texts]

    assert await tokens.calibrate(double, [text, "another sample"]) == pytest.approx(2.0)
    assert tokens.estimate_tokens(text) == pytest.approx(2 * plain, abs=2)

    async def absurd(texts):
        return [100 * tokens.raw_estimate(t) for t in texts]

    assert await tokens.calibrate(absurd, [text]) == 2.0  # bounded: the counter is doubtful


async def test_a_counter_with_nothing_to_say_leaves_the_estimates_alone(unscaled):
    async def nothing(texts):
        return None

    async def broken(texts):
        raise OSError("the server went away")

    async def short(texts):
        return [1]

    for counter in (nothing, broken, short):
        assert await tokens.calibrate(counter, ["one text", "two texts"]) is None
        assert tokens.scale() == 1.0


def test_digits_and_json_punctuation_are_weighed_as_tokenizers_split_them(unscaled):
    # Digits split (a date costs more than one piece); JSON's `": "` merges.
    assert tokens.estimate_tokens("2026-12-01 20:24") > tokens.estimate_tokens("date time")
    schema = json.dumps({"name": "file_read", "parameters": {"path": {"type": "string"}}})
    assert tokens.estimate_tokens(schema) < len(re.findall(r"\w+|[^\w\s]", schema))


# -- max_tokens ----------------------------------------------------------------


@settings(deadline=None)
@given(window=st.integers(1_000, 300_000), max_answer=st.integers(256, 32_000),
       used=st.floats(0, 1))
def test_the_prompt_and_the_answer_it_asks_for_fit_the_window(window, max_answer, used):
    limits = ContextLimits(window, max_answer=min(max_answer, window - 1))
    prompt = int((window - limits.answer_room) * used)  # a fitted prompt leaves the reserve
    asked = limits.max_tokens(prompt)
    assert 1 <= asked <= limits.max_answer
    assert asked >= min(limits.answer_room, limits.max_answer)
    if prompt + limits.answer_room + prompt // 20 + 16 <= window:
        assert prompt + asked <= window


def test_an_8k_window_asks_for_the_answer_reserve_whatever_the_prompt():
    # The trigger counts the reserve: an answer asked for more than that could
    # push the next request past the window before any save point existed.
    limits = ContextLimits(8_192, max_answer=4_096)
    assert limits.max_tokens(6_000) + 6_000 <= 8_192
    assert limits.max_tokens(1_000) == limits.answer_room == 1_024
    assert ContextLimits(8_192, max_answer=300).max_tokens(1_000) == 300


# -- tools offered by need ------------------------------------------------------


def make_tools() -> ToolRegistry:
    @tool(side_effects=False)
    def read_it(ctx: ToolContext, path: str) -> str:
        """Read a file.

        Args:
            path: Which file.
        """
        return f"read {path}"

    @tool(side_effects=False)
    def find_it(ctx: ToolContext, pattern: str) -> str:
        """Find files whose names match a pattern, anywhere in the workspaces.

        Args:
            pattern: A glob such as *.md, matched against every name.
        """
        return f"found {pattern}"

    @tool(side_effects=False)
    def remind(ctx: ToolContext, when: str) -> str:
        """Set an alarm.

        Args:
            when: When it rings.
        """
        return f"alarm {when}"

    registry = ToolRegistry([read_it, find_it, remind])
    registry.group("files", "files in the workspaces", ["read_it", "find_it"], core={"read_it"})
    registry.group("schedule", "alarms", ["remind"])
    return registry


def test_when_everything_fits_everything_is_offered_and_nothing_waits():
    registry = make_tools()
    assert not registry.size_to(10_000, tools_tokens)
    assert registry.offered() == ["find_it", "read_it", "remind"]
    assert ENABLE_TOOLS not in registry


async def test_past_the_budget_only_the_core_is_offered_and_the_rest_is_enabled_by_name():
    registry = make_tools()
    assert registry.size_to(1, tools_tokens)
    assert registry.offered() == [ENABLE_TOOLS, "read_it"]
    enabler = next(s for s in registry.specs() if s.name == ENABLE_TOOLS)
    assert "files: files in the workspaces" in enabler.description
    assert "schedule: alarms" in enabler.description

    refused = await registry.call(ToolCall("c", "remind", '{"when": "noon"}'), CTX)
    assert refused.is_error
    assert "enable_tools(groups=['schedule'])" in refused.content

    listed = await registry.call(ToolCall("c", ENABLE_TOOLS, "{}"), CTX)
    assert "schedule (not enabled)" in listed.content and "remind" in listed.content
    done = await registry.call(ToolCall("c", ENABLE_TOOLS, '{"groups": ["schedule"]}'), CTX)
    assert not done.is_error and "schedule (offered)" in done.content
    assert "remind" in registry.offered()
    assert (await registry.call(ToolCall("c", "remind", '{"when": "noon"}'), CTX)).content == \
        "alarm noon"
    dropped = await registry.call(ToolCall("c", ENABLE_TOOLS, '{"disable": ["schedule"]}'), CTX)
    assert not dropped.is_error and "remind" not in registry.offered()


async def test_an_unknown_group_or_one_past_the_limit_is_refused_naming_the_fix():
    registry = make_tools()
    registry.size_to(1, tools_tokens, limit=tools_tokens(registry.specs()) + 5)
    unknown = await registry.call(ToolCall("c", ENABLE_TOOLS, '{"groups": ["mail"]}'), CTX)
    assert unknown.is_error and "files" in unknown.content and "schedule" in unknown.content
    too_much = await registry.call(ToolCall("c", ENABLE_TOOLS, '{"groups": ["files"]}'), CTX)
    assert too_much.is_error and "more than" in too_much.content
    assert "find_it" not in registry.offered()  # nothing changed


async def test_tools_added_later_wait_in_the_group_other_when_the_offer_is_narrow():
    registry = make_tools()
    registry.size_to(1, tools_tokens)

    @tool(side_effects=False)
    def served(ctx: ToolContext, query: str) -> str:
        """A tool a tool server offers once it answers.

        Args:
            query: What to ask.
        """
        return query

    registry.add(served)
    assert "served" not in registry.offered()
    refused = await registry.call(ToolCall("c", "served", '{"query": "q"}'), CTX)
    assert "enable_tools(groups=['other'])" in refused.content
    registry.enable(["other"])
    assert "served" in registry.offered()


def test_the_enabled_groups_come_back_from_the_calls_in_the_session():
    registry = make_tools()
    registry.size_to(1, tools_tokens)
    registry.restore(['{"groups": ["schedule", "files"]}', "not json", '{"groups": ["gone"]}',
                      '{"disable": ["files"]}'])
    assert registry.offered() == [ENABLE_TOOLS, "read_it", "remind"]


# -- the trigger counts the whole request ----------------------------------------


class Reader:
    """A chronicler that cites the person and agent turns it is shown."""

    name = "test"
    model = "reader"

    def __init__(self, window: int) -> None:
        self.context_window = window
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        shown = request.messages[1].content.split("# Citable IDs")[0]
        said = said_in_request(shown)
        ids = list(said)
        yield TextDelta(save_point_text(ids, journey_words=20, said=said))
        yield Finish("stop")


SETTINGS = MemorySettings(min_journey_words=10)


def test_the_overhead_of_the_request_brings_the_trigger_forward(session):
    for n in range(8):
        chat(session, 1, topic=prose(n, 60))
    alone = Compactor(session, Chronicler(Reader(8_192)), SETTINGS, context_window=8_192)
    loaded = Compactor(session, Chronicler(Reader(8_192)), SETTINGS, context_window=8_192,
                       overhead_tokens=lambda: 6_000)
    held = sum(context_cost(t) for t in session.turns)
    assert held < 0.6 * 8_192  # the conversation alone is far from the old threshold
    assert alone.due() is None
    assert loaded.due() is not None and "the window leaves" in loaded.due()
    assert loaded.context_tokens() == 6_000 + held


def test_large_recent_turns_are_not_all_kept_raw_in_a_small_window(session):
    chat(session, 8, topic=prose(3, 120))
    small = Compactor(session, Chronicler(Reader(4_096)), SETTINGS, context_window=4_096,
                      overhead_tokens=lambda: 2_000)
    assert 2 <= small.keep_recent() < SETTINGS.keep_recent_turns
    assert small.next_block() is not None


async def test_the_chronicler_request_and_its_answer_fit_its_window(session):
    chat(session, 20, topic=prose(5, 40))
    reader = Reader(4_096)
    compactor = Compactor(session, Chronicler(reader), SETTINGS, context_window=4_096,
                          overhead_tokens=lambda: 2_000)
    outcome = await compactor.compact()
    assert outcome.status == "accepted"
    request = reader.requests[0]
    prompt = sum(tokens.estimate_tokens(m.content) + tokens.MESSAGE_OVERHEAD
                 for m in request.messages)
    assert prompt + request.max_tokens <= 4_096
    # the save point rides in every request: a small window bounds it, and says so
    bound = compactor.save_point_words()
    assert bound is not None and bound * 4 // 3 <= int(4_096 * 0.15) + 1
    assert f"under {bound} words" in request.messages[1].content
    large = Compactor(session, Chronicler(Reader(200_000)), SETTINGS, context_window=128_000)
    assert large.save_point_words() is None  # no real bound: the chronicler is not told one


async def test_older_rejections_give_way_when_a_retry_would_overflow(session):
    turns = chat(session, 4)
    reader = Reader(2_000)
    request = ChronicleRequest(None, tuple(turns), citable(None, turns, lambda ids: ids))
    long = prose(9, 400)
    rejections = [Rejection(long, (Failure("terse", "too short"),)) for _ in range(3)]
    await Chronicler(reader).write(request, rejections)
    sent = reader.requests[0].messages
    assert len(sent) == 4  # protocol, input, the newest rejected attempt and what to fix
    assert "too short" in sent[-1].content


# -- config check ------------------------------------------------------------------


def test_a_window_no_request_fits_is_refused_and_the_fix_named():
    needs = dict(system=350, all_tools=6_000, core_tools=1_400, chronicler_protocol=850)
    small = needs_problems(RequestNeeds(window=3_000, chronicler_window=3_000, **needs))
    assert len(small) == 2
    assert "models.reasoning.context_window" in small[0] and "at least" in small[0]
    assert "memory.chronicler_input_fraction" in small[1]
    assert needs_problems(RequestNeeds(window=4_096, chronicler_window=4_096, **needs)) == []


def config_for(tmp_path, window: int) -> Config:
    return Config(
        files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
        models=ModelsSection(reasoning=ModelSettings(provider="openai", model="m",
                                                     context_window=window)),
    )


def test_the_check_weighs_this_agents_own_prompt_and_tools(tmp_path):
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    assert window_problems(config_for(tmp_path, 4_096), paths) == []
    refused = window_problems(config_for(tmp_path, 2_000), paths)
    assert refused and all("2,000" in p for p in refused)


# -- end to end, through the app ------------------------------------------------------


@pytest.mark.parametrize(("window", "messages"), [(4_096, 12), (8_192, 24)])
async def test_long_messages_make_save_points_and_leave_nothing_out(tmp_path, window, messages):
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    model = ScriptedProvider([say(f"reply {n}: " + prose(100 + n, 30)) for n in range(messages)],
                             context_window=window)
    chronicler = Reader(window)
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
                    memory=SETTINGS)
    app = build_app(paths, config, provider=model, chronicler=chronicler)
    try:
        await app.start()
        for n in range(messages):
            app.agent.submit(prose(n))
            await app.agent.idle()
            while app.memory.compactor.busy:
                await asyncio.sleep(0.01)
        accepted = [sp for sp in savepoints.listing(app.store) if sp.accepted]
        assert accepted, "a save point was made"
        for request in model.requests:
            note = request.messages[1].content
            assert "oldest turns of this session" not in note, "no turn was left out"
            prompt = (sum(tokens.estimate_tokens(m.content) + tokens.MESSAGE_OVERHEAD
                          for m in request.messages) + tools_tokens(request.tools))
            assert prompt + request.max_tokens <= window
        assert tools_tokens(model.requests[-1].tools) <= 1_500
        assert ENABLE_TOOLS in {t.name for t in model.requests[-1].tools}
    finally:
        await app.aclose()


class Verbose:
    """A model that writes all it is allowed to: `max_tokens` tokens of prose
    each time, a tool call first every third message (a request of two steps)."""

    name = "test"
    model = "verbose"

    def __init__(self, window: int) -> None:
        self.context_window = window
        self.requests: list[ModelRequest] = []
        self.saved_before: list[bool] = []  # whether any save point existed at each request
        self.store = None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        self.saved_before.append(bool(savepoints.listing(self.store)))
        n = len(self.requests)
        text = prose(n, 4)
        while tokens.estimate_tokens(text) < request.max_tokens:
            text += " " + prose(n + len(text), 40)
        while tokens.estimate_tokens(text) > request.max_tokens:
            text = text.rsplit(" ", 1)[0]
        asked = request.messages[-1]
        if asked.content.startswith("please look") and request.tools:
            yield TextDelta("Let me look. ")
            yield ToolCallDelta(0, f"call_{n}", "get_current_time", "{}")
            yield Finish("tool_calls")
            return
        yield TextDelta(text)
        yield Finish("length")


@pytest.mark.parametrize("window", [4_096, 8_192])
async def test_a_model_that_writes_all_it_may_leaves_no_turn_out_before_a_save_point(
        tmp_path, window):
    # The answer's reserve is part of the budget the trigger counts: an
    # answer may never take more of the window than the trigger set aside.
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    model = Verbose(window)
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
                    memory=SETTINGS,
                    models=ModelsSection(reasoning=ModelSettings(
                        provider="openai", model="m", context_window=window,
                        max_output_tokens=3_000)))
    app = build_app(paths, config, provider=model, chronicler=Reader(window))
    model.store = app.store
    try:
        await app.start()
        for n in range(16):
            app.agent.submit(("please look, " if n % 3 == 2 else "") + prose(n, 40))
            await app.agent.idle()
            while app.memory.compactor.busy:
                await asyncio.sleep(0.01)
        assert any(sp.accepted for sp in savepoints.listing(app.store))
        for request, saved in zip(model.requests, model.saved_before, strict=True):
            note = request.messages[1].content
            left_out = "oldest turns of this session" in note
            assert not (left_out and not saved), "a turn was left out before any save point"
            prompt = (sum(tokens.estimate_tokens(m.content) + tokens.MESSAGE_OVERHEAD
                          for m in request.messages) + tools_tokens(request.tools))
            assert prompt + request.max_tokens <= window
    finally:
        await app.aclose()


async def test_a_long_cycle_starts_a_save_point_between_its_steps(tmp_path):
    # Three short exchanges stay under the trigger; then one cycle reads a file
    # again and again. Its own turns cannot be compacted while it runs, but the
    # exchanges before it can: the check between steps starts that at once.
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text(prose(77, 250))
    replies = [say("reply: " + prose(200 + n, 60)) for n in range(3)]
    replies += [say("", call_("file_read", path="notes.txt")) for _ in range(5)]
    replies.append(say("Read it."))
    model = ScriptedProvider(replies, context_window=4_096)
    chronicler = Reader(4_096)
    asked_at: list[int] = []
    original = chronicler.stream

    def stream(request):
        asked_at.append(len(model.requests))
        return original(request)

    chronicler.stream = stream  # type: ignore[method-assign]
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
                    memory=SETTINGS)
    app = build_app(paths, config, provider=model, chronicler=chronicler)
    try:
        await app.start()
        for n in range(4):
            app.agent.submit(prose(n, 60) if n < 3 else "Read notes.txt five times.")
            await app.agent.idle()
            if n < 3:
                assert not asked_at, "the short exchanges alone are under the trigger"
        while app.memory.compactor.busy:
            await asyncio.sleep(0.01)
        assert asked_at and asked_at[0] < len(model.requests), "asked before the cycle ended"
        assert any(sp.accepted for sp in savepoints.listing(app.store))
    finally:
        await app.aclose()


async def test_what_a_cycle_acts_on_is_not_pruned_before_it_answers(tmp_path):
    # A bulky result read first, then more steps than `prune_after_turns`
    # counts: every request of the cycle still carries it whole; once the
    # cycle has answered, it may be pruned as any old result is.
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "big.txt").write_text(prose(9, 900))
    names = ("apples", "pears", "plums", "figs", "limes", "dates")
    for name in names:
        (tmp_path / "ws" / f"{name}.txt").write_text(f"a note on {name}\n")
    replies = [say("", call_("file_read", path="big.txt"))]
    replies += [say("", call_("file_read", path=f"{name}.txt")) for name in names]
    replies += [say("Read them all."), say("Fine.")]
    model = ScriptedProvider(replies, context_window=32_768)
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
                    memory=MemorySettings(prune_after_turns=2, prune_min_tokens=100))
    app = build_app(paths, config, provider=model)
    try:
        await app.start()
        app.agent.submit("Read big.txt, then the six small notes.")
        await app.agent.idle()
        big = prose(9, 900)[:200]
        assert len(model.requests) == 8
        assert all(any(big in (m.content or "") for m in r.messages) for r in model.requests[1:])
        app.agent.submit("Thanks.")
        await app.agent.idle()
        assert not any(big in (m.content or "") for m in model.requests[-1].messages)
    finally:
        await app.aclose()


# -- what the status shows -------------------------------------------------------


def status_lines(app) -> str:
    from noema.interfaces.host.host import _request_view
    from noema.interfaces.host.protocol import StatusView
    from noema.interfaces.terminal.status_text import format_status

    status = app.agent.status()
    view = StatusView(agent="ana", pid=1, started_at=0.0, phase="idle", busy=False,
                      context_tokens=status.context_tokens, context_window=status.context_window,
                      session_turns=status.session_turns, waiting_messages=0,
                      request=_request_view(status.request))
    return format_status(view, now=0.0)


@pytest.mark.parametrize("window", [2_000, 8_192])
async def test_the_status_shows_what_the_next_request_carries(tmp_path, window):
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    model = ScriptedProvider([say("hello")], context_window=window)
    app = build_app(paths, Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),))),
                    provider=model, chronicler=Reader(window))
    try:
        await app.start()
        text = status_lines(app)
        if window == 2_000:  # no request fits: said so, not "10 %"
            assert "next request: does not fit the window" in text and "config check" in text
        else:
            line = next(line for line in text.splitlines() if line.startswith("next request:"))
            assert "system prompt" in line and "answer reserve 1,024" in line
            assert "(the rest by enable_tools)" in line
            shape = app.agent.status().request
            assert app.agent.status().context_tokens == shape.total
            assert shape.total > shape.tools > 0
    finally:
        await app.aclose()


class CountingModel(ScriptedProvider):
    """A scripted model whose server counts tokens: twice the plain estimate."""

    async def count_tokens(self, texts):
        return [2 * tokens.raw_estimate(t) for t in texts]


@pytest.mark.parametrize("provider", ["llamacpp", "openai"])
async def test_a_server_that_counts_calibrates_the_estimates_at_start(tmp_path, unscaled,
                                                                      provider):
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)),
                    models=ModelsSection(reasoning=ModelSettings(provider=provider, model="m")))
    app = build_app(paths, config, provider=CountingModel([], context_window=32_768),
                    chronicler=Reader(32_768))
    try:
        await app.start()
        for _ in range(100 if provider == "llamacpp" else 10):
            if tokens.scale() != 1.0:
                break
            await asyncio.sleep(0.01)
        if provider == "llamacpp":
            assert tokens.scale() == pytest.approx(2.0, rel=0.01)
        else:  # an endpoint with no tokenizer is never asked
            assert tokens.scale() == 1.0
    finally:
        await app.aclose()
    assert tokens.scale() == 1.0  # the next agent of this process starts unscaled


async def test_a_tool_not_offered_is_enabled_by_the_model_and_stays_after_a_restart(tmp_path):
    paths = AgentPaths.for_agent("ana", tmp_path / "home")
    config = Config(files=FilesSettings(roots=(RootSettings(path=tmp_path / "ws"),)))
    script = [
        say("", call_("schedule_list")),
        say("", call_(ENABLE_TOOLS, groups=["schedule"])),
        say("", call_("schedule_list")),
        say("Done."),
    ]
    model = ScriptedProvider(script, context_window=8_192)
    app = build_app(paths, config, provider=model, chronicler=Reader(8_192))
    try:
        await app.start()
        assert "schedule_list" not in app.tools.offered()
        app.agent.submit("what alarms do I have?")
        await app.agent.idle()
        results = [t for t in app.session.turns if t.is_result]
        assert results[0].has(Flag.ERROR)
        assert "enable_tools(groups=['schedule'])" in results[0].content
        assert not results[1].has(Flag.ERROR) and not results[2].has(Flag.ERROR)
        assert "schedule_list" in {t.name for t in model.requests[-1].tools}
    finally:
        await app.aclose()
    again = build_app(paths, config, provider=ScriptedProvider([], context_window=8_192),
                      chronicler=Reader(8_192))
    try:
        assert "schedule_list" in again.tools.offered()  # restored from the session
    finally:
        again.close()


@settings(deadline=None, max_examples=60)  # a busy machine must not fail it
@given(st.lists(st.tuples(st.sampled_from(["enable", "disable"]),
                          st.lists(st.sampled_from(["files", "schedule"]), max_size=2)),
                max_size=8))
def test_whatever_is_enabled_the_offer_is_the_core_and_the_enabled_groups(steps):
    registry = make_tools()
    registry.size_to(1, tools_tokens)
    enabled: set[str] = set()
    for action, groups in steps:
        if action == "enable":
            registry.enable(groups)
            enabled |= set(groups)
        else:
            registry.enable(disable=groups)
            enabled -= set(groups)
        members = {"files": {"read_it", "find_it"}, "schedule": {"remind"}}
        expected = {"read_it", ENABLE_TOOLS}.union(*(members[g] for g in enabled))
        assert set(registry.offered()) == expected
        assert [s.name for s in registry.specs()] == registry.offered()
