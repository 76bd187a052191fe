"""Tools from Model Context Protocol servers (`[[mcp.servers]]`), offered to
the model as `<server>__<tool>` with the same autonomy levels, argument
checks and untrusted envelope as the built-in tools.

Named `toolservers` so that it never shadows the SDK's top-level `mcp`.
"""

from .connection import ServerFailure, ServerLink
from .launch import LaunchError, Surroundings
from .servers import ServerReport, ToolServers, describe_servers
from .settings import McpSettings, ServerSettings

__all__ = [
    "LaunchError",
    "McpSettings",
    "ServerFailure",
    "ServerLink",
    "ServerReport",
    "ServerSettings",
    "Surroundings",
    "ToolServers",
    "describe_servers",
]
