"""What every channel offers the composition root, and what it is given."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from zoneinfo import ZoneInfo

from ..memory.turns import Turn
from ..paths import AgentPaths
from ..perception.hub import Bookmark, Sensor
from ..perception.untrusted import SessionDelimiter
from ..tools.registry import Tool
from .view import ChannelView

if TYPE_CHECKING:
    from ..tools.hands import Hands


@dataclass(frozen=True, slots=True)
class ChannelContext:
    """What the composition root gives a channel to build itself."""

    paths: AgentPaths  # the channel keeps its state under paths.root
    secrets: Mapping[str, str]  # passwords and tokens: the environment over secrets.toml
    hands: Hands  # policy, versions (a saved attachment is a versioned write), the gate
    delimiter: SessionDelimiter  # outside text goes in the untrusted envelope with it
    zone: ZoneInfo
    notice: Callable[[str], None]  # a line for the person (the attached interfaces)
    # A durable bookmark by name, committed with the events emitted before it
    # is saved (the sensory archive's): a sensor resumes exactly where the
    # acknowledged events end. None while the senses are off.
    bookmark: Callable[[str], Bookmark] | None = None


@dataclass(frozen=True, slots=True)
class Desk:
    """The agent as a channel sees it: where the person's messages go.

    `submit` stores the message before it returns (it survives `kill -9`
    from then on) and raises `StorageFull` when the disk is full; `stop`
    stops the current cycle; `status` is a few lines for a `/status` command.
    """

    submit: Callable[..., Turn]  # (text, *, channel, sender) like Agent.submit
    stop: Callable[[], Awaitable[bool]]
    status: Callable[[], str]
    # The person's recent messages from a channel, oldest first: after a crash
    # between `submit` and the channel's own record, this tells whether a
    # message was taken already (so it is neither lost nor taken twice).
    submitted: Callable[[str], list[Turn]]


class Channel(Protocol):
    """A mail account, a Telegram bot…: a voice of the person and a sense."""

    name: str  # the `channel` of the turns it submits, e.g. "email", "telegram"

    def sensors(self) -> list[Sensor]:
        """The sensors the hub runs for it (supervised, restarted on a crash)."""
        ...

    def tools(self) -> list[Tool]:
        """Its tools, before the autonomy gate (the composition root wraps them)."""
        ...

    async def start(self, desk: Desk) -> None:
        """Take the desk; called before the hub starts its sensors."""
        ...

    async def reply(self, question: Turn, answer: Turn) -> None:
        """Send `answer` where `question` came from (the same mail thread, the
        same chat). Called again after a restart for an answer whose sending
        is not known to have finished: it must send each answer once (keyed by
        `answer.id`), and raise only for a failure worth a notice."""
        ...

    def view(self) -> ChannelView:
        """Its state for `noema status`."""
        ...

    async def aclose(self) -> None:
        """Stop; what was acknowledged is already on disk."""
        ...
