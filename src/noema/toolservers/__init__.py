"""Tools from Model Context Protocol servers (`[[mcp.servers]]`), offered to
the model as `<server>__<tool>` with the same autonomy levels, argument
checks and untrusted envelope as the built-in tools.

Named `toolservers` so that it never shadows the SDK's top-level `mcp`.

The names below are loaded on first use (PEP 562): the configuration imports
`toolservers.settings`, and an agent without MCP servers should not pay for
the SDK (tens of MB resident) just for that.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .connection import ServerFailure, ServerLink
    from .launch import LaunchError, Surroundings
    from .servers import ServerReport, ToolServers, describe_servers
    from .settings import McpSettings, ServerSettings

_HOME = {
    "LaunchError": "launch",
    "McpSettings": "settings",
    "ServerFailure": "connection",
    "ServerLink": "connection",
    "ServerReport": "servers",
    "ServerSettings": "settings",
    "Surroundings": "launch",
    "ToolServers": "servers",
    "describe_servers": "servers",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
