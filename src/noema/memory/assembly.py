"""Narrative memory assembled for one agent: search, tools, compactor, chronicle text.

The composition root builds this once and hands its parts to the shell
(`compactor.maybe_start()` after each cycle), to the tool registry
(`tools`) and to the system prompt (`chronicle()`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from ..providers.base import Provider
from ..tools.registry import Tool
from .activity import MemoryActivity
from .chronicle import OutsideText, chronicle_text, outside_context
from .chronicler import Chronicler
from .compaction import Compactor
from .recall_tools import memory_tools
from .search import HistorySearch
from .session import Session
from .settings import MemorySettings


@dataclass
class Memory:
    """The memory parts of one agent."""

    settings: MemorySettings
    session: Session
    search: HistorySearch
    compactor: Compactor
    tools: list[Tool]
    language: str
    activity: MemoryActivity  # what compaction is doing, for the status and the log

    def chronicle(self) -> str | None:
        """The text for `build_system_prompt(..., chronicle=...)`."""
        return chronicle_text(
            self.session, pinned_limit=self.settings.pinned_observations, language=self.language
        )

    def outside(self) -> list[OutsideText]:
        """The outside words of `chronicle()`, for the gate (see `security.provenance`)."""
        return outside_context(self.session, pinned_limit=self.settings.pinned_observations)

    async def close(self) -> None:
        """Stop a running compaction (nothing of it is written) and free the search."""
        await self.compactor.close()
        self.search.close()


def build_memory(
    session: Session,
    chronicler: Provider,
    settings: MemorySettings,
    *,
    context_window: int,
    language: str = "en",
    agent_name: str = "the agent",
    zone: ZoneInfo | None = None,
    overhead_tokens: Callable[[], int] | None = None,
    chronicler_max_output_tokens: int | None = None,
    listener: MemoryActivity | None = None,
) -> Memory:
    """Wire narrative memory over a session.

    `context_window` is the reasoning model's; `overhead_tokens` counts what a
    request carries besides the turns (system prompt with the chronicle, tool
    descriptions, answer reserve) so the trigger sees the whole request.
    """
    search = HistorySearch(session.store, zone=zone)
    activity = listener or MemoryActivity()
    lang = settings.language_or(language)
    compactor = Compactor(
        session,
        Chronicler(chronicler, max_output_tokens=chronicler_max_output_tokens),
        settings,
        context_window=context_window,
        language=lang,
        agent_name=agent_name,
        overhead_tokens=overhead_tokens,
        zone=zone,
        listener=activity,
        meaning=lambda: search.meaning,  # set by the composition root once the model is chosen
    )
    tools = memory_tools(session.store, search, zone=zone, pinned_limit=settings.pinned_observations)
    return Memory(settings, session, search, compactor, tools, lang, activity)
