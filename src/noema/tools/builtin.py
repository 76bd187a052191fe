"""Tools every agent has: the time, environment notes and skills."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone as dt_timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..identity import Identity
from .registry import Tool, ToolContext, ToolError, tool


def time_tools(default_zone: str | None, now: Callable[[], datetime] | None = None) -> list[Tool]:
    """`get_current_time`, reading the clock through `now` (UTC-aware)."""
    clock = now or (lambda: datetime.now(dt_timezone.utc))

    @tool(side_effects=False, own_words=True)
    def get_current_time(ctx: ToolContext, timezone: str | None = None) -> str:
        """The current date and time.

        Args:
            timezone: An IANA time zone such as "Europe/Madrid" or "UTC". Defaults to
                the person's configured zone.
        """
        name = timezone or default_zone or "UTC"
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ToolError(
                f"unknown time zone {name!r}; use an IANA name such as 'Europe/Madrid', "
                "'America/New_York' or 'UTC'"
            ) from None
        moment = clock().astimezone(zone)
        return f"{moment:%A %d %B %Y, %H:%M:%S} ({name}, UTC{moment:%z}); ISO {moment.isoformat()}"

    return [get_current_time]


def identity_tools(identity: Identity) -> list[Tool]:
    """`consult_environ`, `list_skills` and `load_skill` over the identity folder."""

    @tool(side_effects=False, own_words=True)
    def consult_environ(ctx: ToolContext, module: str) -> str:
        """Read a note the person wrote about their environment (machines, projects,
        people, habits). The system prompt lists the modules that exist.

        Args:
            module: The module name, as listed.
        """
        text = identity.read_environ(module)
        if text is None:
            known = ", ".join(e.id for e in identity.environ_modules()) or "none yet"
            raise ToolError(f"there is no environment note {module!r}; available: {known}")
        return text

    @tool(side_effects=False, own_words=True)
    def list_skills(ctx: ToolContext) -> str:
        """List the skills (written procedures) you can load with load_skill."""
        skills = identity.skills()
        if not skills:
            return "No skills are installed yet."
        return "\n".join(f"- {s.id}: {s.title}. {s.description}".rstrip() for s in skills)

    @tool(side_effects=False, own_words=True)
    def load_skill(ctx: ToolContext, skill_id: str) -> str:
        """Load the full text of a skill before following it.

        Args:
            skill_id: The skill's id, as given by list_skills.
        """
        text = identity.read_skill(skill_id)
        if text is None:
            known = ", ".join(s.id for s in identity.skills()) or "none yet"
            raise ToolError(f"there is no skill {skill_id!r}; available: {known}")
        return text

    return [consult_environ, list_skills, load_skill]
