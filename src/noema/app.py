"""The composition root: the one place that wires the parts of an agent together.

Nothing else reaches across packages; interfaces receive an `App` built here,
call `await app.start()` inside their event loop and `await app.aclose()` at
the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar
from zoneinfo import ZoneInfo

from .channels import Channel, ChannelContext, Desk, ReplyRouter
from .channels.assembly import build_channels
from .config import Config, ConfigError, load_secrets, unknown_tools
from .health import DamagedDatabase, opening
from .health.agent_files import lost_history
from .identity import Identity
from .memory.activity import MemoryActivity
from .memory.assembly import Memory, build_memory
from .memory.embeddings import Meaning
from .memory.embeddings_worker import open_meaning
from .memory.session import Session
from .memory.store import TurnStore, start_language_index
from .memory.tokens import Counter as TokenCounter, calibrate, estimate_tokens
from .memory.tokens import set_scale as set_token_scale
from .memory.turns import Flag, Turn, TurnKind
from .orchestrator.agent import Agent, AgentListener, Senses
from .orchestrator.context import (
    MAX_ANSWER_ROOM,
    ContextLimits,
    request_overhead,
    tool_budget,
    tools_tokens,
)
from .orchestrator.cycle import CycleSettings, ReasoningCycle
from .orchestrator.prompt import build_system_prompt
from .orchestrator.status_text import status_text
from .paths import AgentLock, AgentPaths
from .perception import (
    Pipeline,
    SensorCrash,
    SensorHub,
    SensoryArchive,
    SessionDelimiter,
    perception_tools,
    render_pool_event,
    wall_clock,
)
from .perception.own_changes import OwnChanges
from .perception.sensors import build_sensors
from .perception.sensors.scheduler import scheduler_sensors
from .perception.sensors.webhook import intake_sensors
from .perception.webhook_settings import TokenProblem, check_tokens
from .providers.base import Provider
from .providers.traffic import Metered, shared_traffic
from .scheduling.store import ScheduleStore, schedules_path
from .scheduling.tools import schedule_tools
from .perception.sensors.approvals import CHANNEL as APPROVALS_CHANNEL, ApprovalSensor
from .security.approvals import ApprovalRequest, Approver, AskAway
from .security.away import AwayApprovals
from .security.away_store import AwayStore
from .security.fsafe import TEMP_SUFFIX
from .tools.builtin import identity_tools, time_tools
from .tools.hands import Hands, build_hands
from .tools.registry import ENABLE_TOOLS, Tool, ToolError, ToolRegistry
from .web.tools import web_tools

if TYPE_CHECKING:  # each loaded only when configured: [docs] folders, [[mcp.servers]]
    from .docs.tools import Docs
    from .toolservers import ToolServers

log = logging.getLogger(__name__)
T = TypeVar("T")


class NoModelConfigured(Exception):
    """No reasoning model is configured for this agent."""


@dataclass
class App:
    """A fully wired agent and the parts an interface may inspect."""

    paths: AgentPaths
    config: Config
    store: TurnStore
    session: Session
    identity: Identity
    provider: Provider
    tools: ToolRegistry
    agent: Agent
    hands: Hands
    pipeline: Pipeline
    hub: SensorHub
    memory: Memory
    lock: AgentLock
    schedules: ScheduleStore | None = None
    _background: list[asyncio.Task] = field(default_factory=list)
    _calibrated: bool = False  # the token estimates were scaled to this agent's server
    toolservers: ToolServers | None = None  # the MCP servers, when any is configured
    docs: Docs | None = None  # the document library, when [docs] names folders
    channels: list[Channel] = field(default_factory=list)  # mail, Telegram
    replies: ReplyRouter | None = None  # answers go back to the channel asked on
    away: AwayApprovals | None = None  # questions asked on the person's channels

    async def ask_away(self, request: ApprovalRequest) -> bool:
        """The approver for when no interface is attached: raises AskAway, so the
        gate sends the question to the person's own channels (Telegram's
        buttons, then a mail the person replies to; `security/away.py`) and the
        call waits there, not in the cycle. Raises ToolError when no channel of
        the person's is configured to ask."""
        if self.away is not None and self.away.channels:
            raise AskAway()
        raise ToolError(
            f"{request.tool} needs the person's approval, but no interface is attached and "
            "no channel of the person's can ask them (a Telegram chat can: [telegram] "
            "chat_ids; so can mail: [mail] allow_from), so it was not run. Tell the person "
            "what you wanted to do; they can approve it when they attach.")

    def attach_approver(self, approver: Approver | None) -> None:
        """Who is asked when a tool's autonomy level is `ask`."""
        self.hands.gate.attach(approver)
        if self.toolservers is not None:
            self.toolservers.attach(approver)

    async def start(self) -> None:
        """Repair what a previous process left, then let the senses speak."""
        self.agent.start()
        desk = Desk(submit=self.agent.submit, stop=self.agent.stop, status=self._status_text,
                    submitted=self._submitted)
        for channel in self.channels:  # before the hub runs their sensors
            await channel.start(desk)
        if self.away is not None:  # what a previous process left asked away ends
            await self.away.start()
        if self.replies is not None:
            self.replies.catch_up()  # an answer a previous run stored but never sent
        self.hub.start()
        # The first snapshot of a large workspace takes seconds; not on the first write.
        self._background.append(asyncio.create_task(self.hands.prepare()))
        if self.toolservers is not None:  # their tools join the registry once they answer
            self._background.append(asyncio.create_task(self.toolservers.offer_to(self.tools)))
        if self.docs is not None:  # a pass now, then one per change in the folders
            self._background.append(asyncio.create_task(self.docs.library.keep_fresh()))
        # The server's own tokenizer corrects the estimates, where the catalogue
        # says it has one: asking any other endpoint would cost a request for nothing.
        reasoning = self.config.models.reasoning
        count = getattr(self.provider, "count_tokens", None)
        if count is not None and reasoning is not None and reasoning.spec.counts_tokens:
            self._background.append(asyncio.create_task(self._calibrate(count)))

    async def _calibrate(self, count: TokenCounter) -> None:
        """Scale the token estimates to the server's count of what requests carry:
        the system prompt, the tool descriptions and the newest turns."""
        cycle = self.agent.cycle
        samples = [cycle.system_prompt(),
                   *(json.dumps({"name": t.name, "description": t.description,
                                 "parameters": t.parameters}) for t in cycle.tool_specs()),
                   *(t.content for t in self.session.turns[-24:] if t.content)]
        if await calibrate(count, samples) is not None:
            self._calibrated = True

    def _forget_calibration(self) -> None:
        # The scale is this agent's model's: another app in the same process
        # (a test suite builds many) starts from the plain estimate again.
        if self._calibrated:
            set_token_scale(1.0)
            self._calibrated = False

    def _submitted(self, channel: str, recent: int = 2000) -> list[Turn]:
        last = self.store.last_id()
        turns = self.store.range(max(1, last - recent + 1), last) if last else []
        return [t for t in turns if t.kind is TurnKind.USER and t.channel == channel]

    def _status_text(self) -> str:
        return status_text(self.agent.status())

    async def aclose(self) -> None:
        """Stop cleanly: sensors, the running cycle (history repaired), answers
        being sent, channels, then storage."""
        await self.hub.stop()
        await self.agent.close()
        if self.away is not None:  # calls still running are reported on the next start
            await self.away.aclose()
        if self.replies is not None:
            await self.replies.aclose()
        for channel in self.channels:
            with contextlib.suppress(Exception):
                await channel.aclose()
        await self.memory.close()
        for task in self._background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.toolservers is not None:
            await self.toolservers.aclose()  # stops the stdio servers
        closer = getattr(self.provider, "aclose", None)
        if closer is not None:
            with contextlib.suppress(Exception):
                await closer()
        self.close()

    def close(self) -> None:
        """Release files and databases (for use outside an event loop)."""
        self._forget_calibration()
        self.hands.close()
        if self.docs is not None:
            self.docs.library.close()
        self.pipeline.archive.close()
        if self.schedules is not None:
            self.schedules.close()
        if self.away is not None:
            self.away.store.close()
        self.store.close()
        self.lock.release()


def search_meaning(config: Config, store: TurnStore,
                   secrets: Mapping[str, str]) -> Meaning | None:
    """The embeddings that rerank history search, from `[memory] embeddings`:
    the agent's own search, and the person's (the page's, `noema memory
    search`), are built with it, so both rank alike."""
    reasoning = config.models.reasoning
    key_env = reasoning.resolved_key_env if reasoning else None
    return open_meaning(
        store, config.memory.embeddings, model=config.memory.embedding_model,
        base_url=reasoning.resolved_base_url if reasoning else None,
        api_key=(secrets.get(key_env) or "").strip() if key_env else "",
    )


def build_provider_from_config(config: Config, paths: AgentPaths,
                               environ: Mapping[str, str] | None = None) -> Provider:
    """The reasoning model's provider, or NoModelConfigured."""
    from .providers.catalog import build_provider

    if config.models.reasoning is None:
        raise NoModelConfigured(
            f"no reasoning model is configured for agent {paths.name!r}. Choose one with\n"
            "  noema setup\n"
            "(it asks, lists the models your server serves and tries one), or set it yourself:\n"
            "  noema config set models.reasoning.provider=openai "
            "models.reasoning.model=gpt-4o-mini\n"
            "and put OPENAI_API_KEY in the environment or in "
            f"{paths.secrets_file}. `noema demo` runs without a model."
        )
    return build_provider(config.models.reasoning, load_secrets(paths, environ))


def build_app(
    paths: AgentPaths,
    config: Config,
    *,
    provider: Provider | None = None,
    chronicler: Provider | None = None,
    listener: AgentListener | None = None,
    approver: Approver | None = None,
) -> App:
    """Open the agent's data and wire store, session, memory, senses, hands, model
    and shell. `provider` and `chronicler` replace the configured models."""
    # Checked before anything opens; with no level named there is nothing to
    # check, and building every tool a second time would load libraries (the
    # document index, the web client) that this agent may never use.
    if config.autonomy.tools:
        unknown = unknown_tools(config.autonomy.tools, offered_tool_names(config, paths))
        if unknown:  # a misspelt name would leave its level, a deny perhaps, unapplied
            raise ConfigError(str(paths.config_file), unknown)
    if config.webhook.enabled:  # an intake no token can open must not start
        try:
            check_tokens(config.webhook, load_secrets(paths))
        except TokenProblem as exc:
            raise ConfigError(str(paths.config_file), [str(exc)]) from None
    paths.ensure()
    lock = AgentLock(paths)  # raises AgentBusy if another process runs this agent
    try:
        lost = lost_history(paths)
        if lost:  # an empty store would silently start a new conversation
            raise DamagedDatabase(paths.turns_db, lost)
        return _wire(paths, config, lock, provider, chronicler, listener, approver)
    except BaseException:
        lock.release()
        raise


def _wire(
    paths: AgentPaths,
    config: Config,
    lock: AgentLock,
    provider: Provider | None,
    chronicler: Provider | None,
    listener: AgentListener | None,
    approver: Approver | None,
) -> App:
    listener = listener or AgentListener()
    zone = ZoneInfo(config.agent.timezone) if config.agent.timezone else ZoneInfo("UTC")
    store = TurnStore(paths.turns_db, durable_to_power_loss=config.storage.durability == "power")
    try:
        # Damage the quick check on open could not see (a large store) shows here.
        with opening(paths.turns_db):
            store.start_upkeep()  # index merges and checkpoints happen while the store is quiet
            session = Session.load(store)
    except BaseException:
        store.close()
        raise
    # Search reads words by the rules of the agent's language (memory.stemming).
    start_language_index(store, config.agent.language, listener.on_notice)
    identity = Identity(paths.identity_dir)
    identity.ensure_defaults()
    provider = provider or build_provider_from_config(config, paths)
    chronicler = chronicler or _chronicler_from_config(config, paths, provider)
    # Before schema 3 a file's mark of outside words was kept on the file.
    hands = build_hands(config.hands, paths, approver,
                        carry_legacy_marks=store.upgraded_from is not None
                        and store.upgraded_from < 3)

    senses = config.perception
    for waiting in senses.path_warnings():
        listener.on_notice(waiting)
    archive = _open_archive(paths, senses.archive_flush_every, listener)
    senses_on = archive is not None
    if archive is None:  # damaged: the senses stay off, over an empty archive in memory
        archive = SensoryArchive(":memory:", flush_every=senses.archive_flush_every)
    # A watched folder does not report the agent's own writes (nor their temporary files).
    own_changes = OwnChanges(temp_suffix=TEMP_SUFFIX)
    hands.versions.on_agent_version(own_changes.record)
    sensors = [] if not senses_on else build_sensors(
        senses, last_exchange=lambda: _last_exchange(session), clock=wall_clock, tz=zone,
        bookmarks=archive.bookmark,  # a log sensor resumes where it stopped
        own_change=own_changes.is_own,
    )
    if senses_on:  # the webhook is a sense: off with the others
        sensors += intake_sensors(config.webhook, load_secrets(paths))
    schedules = _open_schedules(paths, listener)
    # Alarms are the agent's own: they fire with the other senses off too (then
    # over the archive in memory, their place kept in the schedules file).
    sensors += scheduler_sensors(schedules, clock=wall_clock,
                                 bookmarks=archive.bookmark if senses_on else None)
    delimiter = SessionDelimiter.new()
    channels = build_channels(config, ChannelContext(
        paths, load_secrets(paths), hands, delimiter, zone, listener.on_notice,
        bookmark=archive.bookmark if senses_on else None))
    # Channels run with the senses off too: they are the person's voice, and a
    # mail or a chat message from the person must reach the agent. That is
    # safe: the person's messages go to the turn store (the desk), never through
    # the archive, and each channel keeps its place in its own state file when
    # there is no archive bookmark. What strangers write (mail only: Telegram
    # ignores other chats) is then an event in the archive in memory, delivered
    # while the process lives; the mail itself stays in the mailbox.
    sensors += [sensor for channel in channels for sensor in channel.sensors()]
    # With nobody at the machine a question goes to the person's channels, and
    # its outcome comes back as an event, the senses off or not (as alarms do).
    away = AwayApprovals(
        _open_away(paths, listener),
        [c for c in sorted(channels, key=lambda c: getattr(c, "ask_order", 0))
         if hasattr(c, "post_question")],
        timeout=lambda: config.autonomy.approval_timeout_s, zone=zone)
    hands.gate.away = away
    sensors.append(ApprovalSensor(away, bookmark=archive.bookmark(
        "sensor:" + APPROVALS_CHANNEL) if senses_on else None))
    pipeline = Pipeline(archive, [s.info for s in sensors], max_silence=senses.max_silence)
    toolservers = None
    if config.mcp.servers:
        from .toolservers import Surroundings, ToolServers

        toolservers = ToolServers(
            config.mcp,
            Surroundings.of_agent(config.files, config.shell, paths, load_secrets(paths)),
            delimiter, config.autonomy, approver)
        toolservers.gate.away = away
    docs = None
    if config.docs.enabled:
        from .docs.tools import build_docs_tools

        docs = build_docs_tools(config.docs, hands.policy, paths, delimiter=delimiter,
                                allow_hard_links=config.files.allow_hard_links,
                                marks=hands.marks)
    docs_offered = hands.gate.wrap_all(docs.tools) if docs is not None else []
    web_offered = hands.gate.wrap_all(web_tools(config.web, load_secrets(paths), delimiter,
                                                conversation=store, gate=hands.gate))

    def render(items, now: float) -> str:
        return render_pool_event(items, delimiter, now=now, k=senses.sandwich_k, tz=zone,
                                 max_chars=senses.max_text_chars)

    def system_prompt() -> str:
        return build_system_prompt(identity, agent_name=paths.name,
                                   language=config.agent.language, chronicle=memory.chronicle(),
                                   channels=tuple(c.name for c in channels))

    chronicler_settings = config.chronicler
    # Both models on one server that answers one request at a time: the
    # person's replies go first, the chronicle gives way and resumes after.
    traffic = shared_traffic(provider, chronicler)
    memory = build_memory(
        session, Metered(chronicler, traffic=traffic, background=True), config.memory,
        context_window=provider.context_window,
        language=config.agent.language, agent_name=paths.name, zone=zone,
        # what a request carries besides the turns: the trigger counts it all
        overhead_tokens=lambda: request_overhead(system_prompt(), cycle.limits,
                                                 cycle.tool_specs()).total,
        chronicler_max_output_tokens=(
            chronicler_settings.max_output_tokens if chronicler_settings else None),
        listener=MemoryActivity(say=listener.on_memory),
    )
    # Meaning as the search's second signal; its vectors are written in the background.
    memory.search.meaning = search_meaning(config, store, load_secrets(paths))
    channel_tools = [tool for channel in channels for tool in channel.tools()]
    agent_ref: list[Agent] = []  # pool_event needs the agent, built below
    tools = _tool_set(config, identity, pipeline, delimiter, zone,
                      [*hands.tools, *memory.tools, *docs_offered, *web_offered,
                       *hands.gate.wrap_all(schedule_tools(schedules, zone)),
                       *hands.gate.wrap_all(channel_tools)],
                      pending=lambda: agent_ref[0].pending_events(), guard=hands.gate.wrap_all)
    _arrange_tools(tools, provider.context_window, session, [
        ("files", "find, grep, patch, restore files", hands.tools),
        ("memory", "search all history, observations", memory.tools),
        ("docs", "the document library", docs_offered),
        ("web", "search and read the web", web_offered),
        ("schedule", "alarms, reminders", schedule_tools(schedules, zone)),
        *((channel.name, f"{channel.name}: send, read", channel.tools()) for channel in channels),
    ])
    replies = ReplyRouter(store, {c.name: c for c in channels}, listener.on_notice)

    def after_cycle() -> None:
        memory.compactor.maybe_start()
        replies.after_cycle()

    reasoning = config.models.reasoning
    # Metered: the replies teach the server's speed, which sizes a chronicle.
    cycle = ReasoningCycle(session, Metered(provider, traffic=traffic), tools, system_prompt,
                           CycleSettings(max_steps=config.cycle.max_steps,
                                         max_answer=reasoning.max_output_tokens if reasoning
                                         else MAX_ANSWER_ROOM),
                           outside_context=memory.outside,
                           between_steps=lambda: memory.compactor.maybe_start(prune=False))
    agent = Agent(session, cycle, listener, context_window=provider.context_window,
                  reflexes=config.reflexes,
                  senses=Senses(pipeline, render, commit_delay=senses.archive_commit_ms / 1000),
                  after_cycle=after_cycle,
                  context_tokens=memory.compactor.context_tokens,
                  request_shape=lambda: cycle.request_shape(
                      estimate_tokens(memory.chronicle() or "")))
    agent_ref.append(agent)

    def sensor_crashed(crash: SensorCrash) -> None:
        log.warning("sensor %s crashed: %s", crash.channel, crash.error)
        listener.on_notice(
            f"the {crash.channel} sensor failed ({crash.error}); retrying in {crash.retry_in:.0f} s"
        )
        listener.on_sensor_crash(crash.channel, crash.retry_in)  # for the status, until then

    hub = SensorHub(agent.perceive, on_crash=sensor_crashed, clock=wall_clock)
    for sensor in sensors:
        hub.add(sensor)
    return App(paths, config, store, session, identity, provider, tools, agent, hands,
               pipeline, hub, memory, lock, docs=docs, schedules=schedules,
               toolservers=toolservers, channels=channels, replies=replies, away=away)


# Offered whatever the window: enough to talk, remember, read, write and run.
CORE_TOOLS = frozenset({"get_current_time", "pool_event", "lookup_turn", "file_read",
                        "file_write", "shell_execute"})


def _arrange_tools(tools: ToolRegistry, window: int, session: Session,
                   groups: list[tuple[str, str, list[Tool]]]) -> None:
    """Group the tools, size what is offered to the window, and enable again
    what the model enabled in this session (the calls still in it)."""
    tools.group("senses", "sensors, their archive, notes, skills", [n for n in tools.names()
                                     if n not in {t.name for _, _, ts in groups for t in ts}],
                core=CORE_TOOLS)
    for name, summary, members in groups:
        tools.group(name, summary, [t.name for t in members], core=CORE_TOOLS)
    budget, limit = tool_budget(window)
    if tools.size_to(budget, tools_tokens, limit=limit):
        results = {t.call_id for t in session.turns if t.is_result and not t.has(Flag.ERROR)}
        tools.restore(t.arguments or "" for t in session.turns
                      if t.is_call and t.tool_name == ENABLE_TOOLS and t.call_id in results)


def _tool_set(config: Config, identity: Identity, pipeline: Pipeline,
              delimiter: SessionDelimiter, zone: ZoneInfo, more: list[Tool], *,
              pending: Callable[[], str | Awaitable[str]],
              guard: Callable[[list[Tool]], list[Tool]] = list) -> ToolRegistry:
    """Every tool the model is offered; `guard` puts the built-in ones behind the
    autonomy gate (`more` comes guarded already)."""
    return ToolRegistry([
        *guard([*time_tools(config.agent.timezone), *identity_tools(identity),
                *perception_tools(pipeline, clock=wall_clock, delimiter=delimiter,
                                  pending=pending, tz=zone,
                                  source_problem=config.perception.source_problem)]),
        *more,
    ])


def offered_tool_names(config: Config, paths: AgentPaths) -> list[str]:
    """The names of the tools an agent with this configuration is offered, found
    by building them over empty stores in memory: nothing on disk is touched
    (for `noema config check`, which must not need the agent stopped)."""
    return _tools_for_checks(config, paths, lambda tools: [*tools.names(),
                                                            *_channel_tool_names(config)])


def window_problems(config: Config, paths: AgentPaths) -> list[str]:
    """Why the configured windows cannot hold a request (for `noema config
    check`), each naming the key and the fix; empty when they can."""
    from .memory.chronicler import protocol_tokens
    from .orchestrator.window_check import RequestNeeds, window_problems as problems

    reasoning = config.models.reasoning
    if reasoning is None:
        return []
    chronicler = config.models.chronicler or reasoning
    system = request_overhead(build_system_prompt(
        Identity(paths.identity_dir), agent_name=paths.name, language=config.agent.language),
        ContextLimits(reasoning.resolved_context_window)).system

    def sizes(tools: ToolRegistry) -> tuple[int, int]:
        everything = tools_tokens(tools.specs())
        tools.size_to(0, tools_tokens)  # what a window too small for all of them is offered
        return everything, tools_tokens(tools.specs())

    def arranged(tools: ToolRegistry) -> tuple[int, int]:
        for name in tools.names():
            tools.group("checked", "every tool", [name], core=CORE_TOOLS)
        return sizes(tools)

    everything, core = _tools_for_checks(config, paths, arranged)
    return problems(RequestNeeds(
        window=reasoning.resolved_context_window, system=system, all_tools=everything,
        core_tools=core, chronicler_window=chronicler.resolved_context_window,
        chronicler_protocol=protocol_tokens(config.memory.language_or(config.agent.language),
                                            paths.name),
        chronicler_input_fraction=config.memory.chronicler_input_fraction,
        max_answer=reasoning.max_output_tokens,
    ), chronicler_key=("models.chronicler.context_window" if config.models.chronicler
                       else "models.reasoning.context_window"))


def _tools_for_checks(config: Config, paths: AgentPaths, use: Callable[[ToolRegistry], T]) -> T:
    """`use` applied to the tools of an agent with this configuration, built
    over empty stores in memory: nothing on disk is touched."""
    from .docs.tools import offered_docs_tools
    from .memory.recall_tools import memory_tools
    from .memory.search import HistorySearch
    from .security.policy import AccessPolicy
    from .security.sandbox import Sandbox
    from .security.versions import Versions
    from .tools.files import file_tools
    from .tools.shell import shell_tools

    store, archive = TurnStore(":memory:"), SensoryArchive(":memory:")
    search = HistorySearch(store)
    try:
        policy = AccessPolicy.from_settings(config.files, paths)
        versions = Versions.of_agent(policy, config.files.deny, paths, watch_changes=False)
        hands = file_tools(policy, versions, config.files) + shell_tools(
            Sandbox(config.shell), policy, versions, paths.agents_dir)
        tools = _tool_set(config, Identity(paths.identity_dir), Pipeline(archive),
                          SessionDelimiter.new(), ZoneInfo("UTC"),
                          [*hands, *memory_tools(store, search),
                           *offered_docs_tools(config.docs, policy),
                           *web_tools(config.web, load_secrets(paths), SessionDelimiter.new()),
                           *schedule_tools(ScheduleStore(":memory:"), ZoneInfo("UTC"))],
                          pending=lambda: "")
        return use(tools)
    finally:
        search.close()
        archive.close()
        store.close()


def _channel_tool_names(config: Config) -> list[str]:
    """The tools of the configured channels, named without connecting anywhere."""
    names: list[str] = []
    if config.mail.configured:
        from .channels.mail.tools import TOOL_NAMES as MAIL_TOOLS

        names += MAIL_TOOLS
    if config.telegram.configured:
        from .channels.telegram import TOOL_NAMES as TELEGRAM_TOOLS

        names += TELEGRAM_TOOLS
    return names


def _open_archive(paths: AgentPaths, flush_every: int,
                  listener: AgentListener) -> SensoryArchive | None:
    """The sensory archive, or None when it is damaged: that must not block the
    conversation, so the person is told and the senses stay off."""
    try:
        return SensoryArchive(paths.archive_db, flush_every=flush_every)
    except DamagedDatabase as exc:
        log.info("sensory archive unusable, senses off: %s", exc)  # the notice tells the person
        listener.on_notice(f"senses are off: {exc}. `noema doctor --repair` keeps what "
                           "can be kept of it and moves the damaged file aside.")
        return None


def _open_away(paths: AgentPaths, listener: AgentListener) -> AwayStore:
    """The record of questions asked away; a damaged one is moved aside and a
    new one started (what it held is told to the person, not guessed)."""
    from .channels.state_file import open_state

    return open_state(paths.approvals_db, AwayStore, what="approvals",
                      lost="Questions asked while you were away before now are forgotten: "
                           "answer them again if the agent asks again.",
                      notice=listener.on_notice)


def _open_schedules(paths: AgentPaths, listener: AgentListener) -> ScheduleStore:
    """The agent's schedules; a damaged file must not block the conversation:
    alarms set meanwhile are kept in memory, until the agent stops."""
    try:
        return ScheduleStore(schedules_path(paths))
    except DamagedDatabase as exc:
        log.info("schedules unusable, kept in memory: %s", exc)  # the notice tells the person
        listener.on_notice(f"alarms are kept in memory only, until the agent stops: {exc}. "
                           "`noema doctor --repair` moves the damaged file aside.")
        return ScheduleStore(":memory:")


def _chronicler_from_config(config: Config, paths: AgentPaths, reasoning: Provider) -> Provider:
    """The chronicler's own model if one is configured, else the reasoning model."""
    from .providers.catalog import build_provider

    if config.models.chronicler is None:
        return reasoning
    return build_provider(config.models.chronicler, load_secrets(paths))


def _last_exchange(session: Session) -> float | None:
    """When the person and the model last spoke (for the clock sensor)."""
    for turn in reversed(session.turns):
        if turn.kind in (TurnKind.USER, TurnKind.ASSISTANT):
            return turn.ts
    return None
