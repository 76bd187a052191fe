"""Settings of the Model Context Protocol servers whose tools the agent may use.

The TOML shape is

    [[mcp.servers]]
    name = "notes"                       # tools are offered as notes__<tool>
    transport = "stdio"
    command = "notes-mcp"
    args = ["--db", "~/notes.db"]
    env = { NOTES_TOKEN = "${NOTES_TOKEN}" }   # ${NAME}: from secrets.toml or the environment
    sandbox = true                       # the default for stdio: runs under bubblewrap
    network = false                      # inside the sandbox
    workspace = "read-only"              # or "read-write"
    read_only = ["/opt/notes-mcp"]       # more folders the sandboxed server may read
    timeout_s = 60
    autonomy = { add_note = "allow" }    # per tool, by its MCP name
    default = "ask"                      # tools that do not say they are read-only

    [[mcp.servers]]
    name = "tracker"
    transport = "http"
    url = "https://mcp.example.org/mcp"
    headers = { Authorization = "Bearer ${TRACKER_TOKEN}" }
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..security.settings import Level

# `${NAME}` in a header or environment value names a secret.
SECRET_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ServerSettings(BaseModel):
    """One MCP server: how to reach it, how it is confined, and its tools' levels."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Short name; its tools are offered as <name>__<tool>.")
    transport: Literal["stdio", "http"] = Field(
        "stdio", description="'stdio' runs a program; 'http' speaks streamable HTTP to a URL."
    )
    command: str | None = Field(None, description="stdio: the program to run.")
    args: tuple[str, ...] = Field((), description="stdio: its arguments.")
    env: dict[str, str] = Field(
        default_factory=dict, description="stdio: environment variables; ${NAME} is a secret."
    )
    url: str | None = Field(None, description="http: the server's endpoint.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="http: request headers; ${NAME} is a secret."
    )
    sandbox: bool = Field(True, description="stdio: run the program under bubblewrap.")
    network: bool = Field(False, description="stdio, sandboxed: let the program use the network.")
    workspace: Literal["read-only", "read-write"] = Field(
        "read-only",
        description="stdio, sandboxed: how the program sees the roots of [files] "
        "('read-write' lets it change the workspace without the agent's history).",
    )
    read_only: tuple[Path, ...] = Field(
        (), description="stdio, sandboxed: more folders it may read (its own installation)."
    )
    timeout_s: float = Field(
        60, gt=0, le=3600, allow_inf_nan=False,
        description="Longest wait for one call, in seconds; then the server is restarted.",
    )
    connect_timeout_s: float = Field(
        20, gt=0, le=600, allow_inf_nan=False, description="Longest wait to connect, in seconds."
    )
    max_result_chars: int = Field(
        30_000, ge=1_000, le=1_000_000, description="A longer result is cut to this size."
    )
    default: Level = Field(
        "ask", description="Level of its tools that do not declare themselves read-only."
    )
    autonomy: dict[str, Level] = Field(
        default_factory=dict, description="Levels of named tools (their MCP names)."
    )

    @field_validator("name")
    @classmethod
    def _usable_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*", value) or len(value) > 30:
            raise ValueError(
                "a server name is 1 to 30 letters, digits, '-' or single '_' (e.g. 'notes'), "
                "since its tools are named <name>__<tool>"
            )
        return value

    @model_validator(mode="after")
    def _transport_complete(self) -> ServerSettings:
        if self.transport == "stdio":
            if not (self.command or "").strip():
                raise ValueError(f"server {self.name!r} uses stdio: set `command`")
            if self.url or self.headers:
                raise ValueError(f"server {self.name!r} uses stdio: `url` and `headers` are "
                                 "for transport = \"http\"")
        else:
            if not (self.url or "").startswith(("http://", "https://")):
                raise ValueError(f"server {self.name!r} uses http: set `url` to its "
                                 "http:// or https:// endpoint")
            if self.command or self.args or self.env:
                raise ValueError(f"server {self.name!r} uses http: `command`, `args` and `env` "
                                 "are for transport = \"stdio\"")
        return self

    @property
    def sandboxed(self) -> bool:
        """Whether the program runs under bubblewrap (never for http)."""
        return self.transport == "stdio" and self.sandbox

    def secret_names(self) -> list[str]:
        """The secrets its header and environment values name."""
        values = [*self.headers.values(), *self.env.values()]
        return [m.group(1) for v in values for m in SECRET_REFERENCE.finditer(v)]


class McpSettings(BaseModel):
    """The `[mcp]` section: the servers whose tools are offered."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: tuple[ServerSettings, ...] = Field((), description="The configured MCP servers.")

    @field_validator("servers")
    @classmethod
    def _distinct_names(cls, value: tuple[ServerSettings, ...]) -> tuple[ServerSettings, ...]:
        seen: set[str] = set()
        for server in value:
            if server.name.lower() in seen:
                raise ValueError(f"two servers are named {server.name!r}; names must differ")
            seen.add(server.name.lower())
        return value


def fill_secrets(value: str, secrets: Mapping[str, str], where: str) -> str:
    """`value` with each ${NAME} replaced by its secret; a KeyError naming
    `where` and the missing name (never a value) when one is not set."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in secrets:
            raise KeyError(f"{where} names the secret {name}, which is neither in "
                           "secrets.toml nor in the environment")
        return secrets[name]

    return SECRET_REFERENCE.sub(one, value)
