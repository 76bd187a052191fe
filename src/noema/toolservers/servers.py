"""The configured MCP servers together: connected when the agent starts, their
tools guarded by an autonomy gate of their own (their levels come from the
`[[mcp.servers]]` entries, since their names are only known once connected),
and closed when the agent stops. `describe_servers` is what `noema config
check` prints about them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..perception.untrusted import SessionDelimiter
from ..security.approvals import ApprovalGate, Approver
from ..security.settings import AutonomySettings, Level
from ..tools.registry import Tool, ToolRegistry
from .launch import Surroundings
from .settings import McpSettings, ServerSettings

if TYPE_CHECKING:
    import mcp_types

    from .connection import ServerLink

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Offered:
    """One MCP tool as offered to the model."""

    tool: Tool  # not yet guarded
    server: str
    mcp_name: str
    level: Level
    read_only: bool


@dataclass(frozen=True, slots=True)
class ServerReport:
    """What connecting to one server gave: its tools, or why there are none."""

    server: ServerSettings
    offered: tuple[Offered, ...] = ()
    skipped: tuple[str, ...] = ()  # tools that could not be offered, with the reason
    unknown_levels: tuple[str, ...] = ()  # names under `autonomy` the server does not list
    problem: str | None = None

    def lines(self) -> list[str]:
        """The report as `noema config check` prints it."""
        s = self.server
        how = s.url if s.transport == "http" else f"{s.command}" + (
            ", sandboxed" if s.sandboxed else ", not sandboxed"
        )
        head = f"MCP server {s.name} ({s.transport}: {how})"
        if self.problem is not None:
            return [f"{head}: failed: {self.problem}"]
        lines = [f"{head}: {len(self.offered)} tool(s)"]
        for o in self.offered:
            kind = "read-only" if o.read_only else "side effects"
            lines.append(f"  {o.tool.name} ({kind}, {o.level})")
        lines += [f"  skipped {why}" for why in self.skipped]
        lines += [
            f"  autonomy.{n}: the server lists no tool named {n!r}, so this level never applies"
            for n in self.unknown_levels
        ]
        return lines


def offer(
    link: ServerLink,
    listing: tuple[mcp_types.Tool, ...],
    delimiter: SessionDelimiter,
    person: AutonomySettings,
    taken: set[str],
) -> ServerReport:
    """Turn a server's listing into tools (names added to `taken`)."""
    from .tools import UnusableTool, is_read_only, level_of, mcp_tool, tool_name  # the SDK: on use

    offered: list[Offered] = []
    skipped: list[str] = []
    for listed in listing:
        name = tool_name(link.name, listed.name, taken)
        try:
            made = mcp_tool(link, listed, name, delimiter)
        except UnusableTool as exc:
            skipped.append(f"{listed.name!r}: {exc}")
            continue
        taken.add(name)
        level = level_of(link.settings, listed, name, person.default)
        offered.append(Offered(made, link.name, listed.name, level, is_read_only(listed)))
    known = {o.mcp_name for o in offered} | {o.tool.name for o in offered}
    unknown = tuple(n for n in link.settings.autonomy if n not in known)
    return ServerReport(link.settings, tuple(offered), tuple(skipped), unknown)


@dataclass
class ToolServers:
    """The agent's MCP servers and their tools."""

    settings: McpSettings
    around: Surroundings
    delimiter: SessionDelimiter
    person: AutonomySettings = field(default_factory=AutonomySettings)
    approver: Approver | None = None
    links: list[ServerLink] = field(init=False)
    gate: ApprovalGate = field(init=False)
    reports: list[ServerReport] = field(init=False, default_factory=list)
    offered: asyncio.Event = field(init=False, default_factory=asyncio.Event)  # set by offer_to

    def __post_init__(self) -> None:
        from .connection import ServerLink  # the SDK is loaded only when servers are configured

        self.links = [ServerLink(s, self.around) for s in self.settings.servers]
        # Every MCP tool has an entry once listed; anything else is refused.
        self.gate = ApprovalGate(AutonomySettings(default="deny"), self.approver)

    def attach(self, approver: Approver | None) -> None:
        """Who is asked when an MCP tool's level is `ask`."""
        self.gate.attach(approver)

    async def start(self, taken: Iterable[str] = ()) -> list[Tool]:
        """Connect to every server at once; the tools of those that answered,
        guarded. A server that failed is reported in `reports`, not raised."""
        reports = await asyncio.gather(*(self._connect(link) for link in self.links))
        names = set(taken)
        self.reports = []
        for link, found in zip(self.links, reports, strict=True):
            if isinstance(found, ServerReport):
                self.reports.append(found)
                continue
            report = offer(link, found, self.delimiter, self.person, names)
            self.reports.append(report)
        levels = {o.tool.name: o.level for r in self.reports for o in r.offered}
        self.gate.settings = AutonomySettings(default="deny", tools=levels)
        for report in self.reports:
            if report.problem is not None:
                log.warning("%s", report.lines()[0])
        return [self.gate.wrap(o.tool) for r in self.reports for o in r.offered]

    async def offer_to(self, registry: ToolRegistry) -> None:
        """Connect (see `start`) and add the tools to `registry`, for the running
        agent: run in the background, so that slow servers do not hold up the
        first turn; the tools appear once every server has answered or failed."""
        try:
            for guarded in await self.start(registry.names()):
                registry.add(guarded)
        finally:
            self.offered.set()
        down = [link for link, r in zip(self.links, self.reports, strict=True) if r.problem]
        await asyncio.gather(*(self._keep_trying(link, registry) for link in down))

    async def _keep_trying(self, link: ServerLink, registry: ToolRegistry) -> None:
        """Try a server that was down at the start again, after the link's
        growing pauses, until it answers; then offer its tools too."""
        from .connection import ServerFailure  # loaded with the links, never before

        while True:
            await asyncio.sleep(link.retry_in())
            try:
                listing = await link.tools()
            except ServerFailure:
                continue
            report = offer(link, listing, self.delimiter, self.person, set(registry.names()))
            self.reports = [report if r.server is link.settings else r for r in self.reports]
            levels = {**self.gate.settings.tools, **{o.tool.name: o.level for o in report.offered}}
            self.gate.settings = AutonomySettings(default="deny", tools=levels)
            for o in report.offered:
                registry.add(self.gate.wrap(o.tool))
            log.info("MCP server %s answered; its %d tool(s) are offered", link.name,
                     len(report.offered))
            return

    async def _connect(self, link: ServerLink) -> tuple[mcp_types.Tool, ...] | ServerReport:
        from .connection import ServerFailure  # loaded with the links, never before

        try:
            return await link.tools()
        except ServerFailure as exc:
            return ServerReport(link.settings, problem=f"{exc}{exc.detail}")

    def problems(self) -> list[str]:
        """A sentence for each server that could not be used (for a notice)."""
        return [r.lines()[0] for r in self.reports if r.problem is not None]

    async def aclose(self) -> None:
        """Close every connection (stopping the stdio servers)."""
        await asyncio.gather(*(link.aclose() for link in self.links), return_exceptions=True)


async def describe_servers(
    settings: McpSettings,
    around: Surroundings,
    person: AutonomySettings | None = None,
) -> list[str]:
    """Lines for `noema config check`: each server's tools with their levels,
    or why it failed. Connects to each server and closes it again."""
    if not settings.servers:
        return ["MCP servers: none configured ([[mcp.servers]])."]
    servers = ToolServers(settings, around, SessionDelimiter.new(), person or AutonomySettings())
    try:
        await servers.start()
    finally:
        await servers.aclose()
    return [line for report in servers.reports for line in report.lines()]
