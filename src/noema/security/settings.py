"""Settings of the agent's hands: where files may be touched, how commands
run, and which actions need the person's approval.

The TOML shape is

    [files]
    deny = [".ssh", "*.pem", ...]          # replaces the default secret globs
    max_read_bytes = 10485760
    max_write_bytes = 10485760
    [[files.roots]]
    path = "~/projects/thesis"
    mode = "read-write"                    # or "read-only"

    [shell]
    sandbox = "bubblewrap"                 # or "none" (explicit choice to run unsandboxed)
    network = false
    timeout_s = 60
    max_timeout_s = 600
    output_cap_bytes = 30000
    memory_mb = 2048                       # per command (cgroup, or per process by rlimit)
    max_processes = 256                    # per command
    max_open_files = 1024                  # per process
    max_file_mb = 4096                     # largest file a command may write

    [autonomy]
    default = "allow"                      # side-effect tools without their own entry
    [autonomy.tools]
    shell_execute = "ask"
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

AccessMode = Literal["read-only", "read-write"]
Level = Literal["allow", "ask", "deny"]

# Names that usually hold credentials. `.git` and the agent's own data are
# not here: they are refused whatever this list says (see policy.py).
DEFAULT_DENY: tuple[str, ...] = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "secrets.toml",
)

DEFAULT_WORKSPACE = "~/noema-workspace"

# Levels that hold unless the person names the tool in [autonomy.tools]; kept
# apart from the field's default so that naming another tool keeps these.
TOOL_DEFAULTS: dict[str, Level] = {"shell_execute": "ask"}
_MIB = 1024 * 1024
_DAY_S = 86_400


# Kernel file systems: no folder of the person's can be made there.
_KERNEL_FILE_SYSTEMS = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "pstore",
    "bpf", "configfs", "efivarfs", "fusectl", "binfmt_misc", "mqueue", "devpts",
})


def no_folder_can_be_made_in(parent: Path) -> str | None:
    """Why no folder can be made in the existing folder `parent` whatever the
    permissions say (a kernel or read-only file system), or None."""
    kind = _file_system_type(parent)
    if kind in _KERNEL_FILE_SYSTEMS:
        return f"{parent} belongs to the kernel ({kind}), where no folder can be made"
    try:
        if os.statvfs(parent).f_flag & os.ST_RDONLY:
            return f"{parent} is on a read-only file system"
    except OSError:
        return None
    return None


def _file_system_type(folder: Path) -> str | None:
    """The type of the file system that holds `folder`, from the mount table."""
    real = os.path.realpath(folder)
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
            table = [line.split() for line in mounts]
    except OSError:
        return None
    best, kind = "", None
    for fields in table:
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


class RootSettings(BaseModel):
    """A folder the agent may use, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path = Field(description="The folder; '~' is the person's home.")
    mode: AccessMode = Field("read-write", description="'read-only' or 'read-write'.")

    @field_validator("path")
    @classmethod
    def _not_empty(cls, value: Path) -> Path:
        if str(value).strip() in ("", "."):
            raise ValueError("a root must name a folder, e.g. '~/projects'")
        return value


class FilesSettings(BaseModel):
    """Where the file tools may read and write, and how much."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    roots: tuple[RootSettings, ...] = Field(
        (RootSettings(path=Path(DEFAULT_WORKSPACE)),),
        description="Folders the agent may use; the first read-write one is its workspace.",
    )
    deny: tuple[str, ...] = Field(
        DEFAULT_DENY,
        description="Globs refused inside the roots. A glob without '/' matches any path "
        "component; one with '/' matches the path relative to its root, or the absolute "
        "path when it starts with '/' or '~'.",
    )
    max_read_bytes: int = Field(10 * _MIB, gt=0, description="Largest file the tools read.")
    max_write_bytes: int = Field(10 * _MIB, gt=0, description="Largest content one write may put.")
    allow_hard_links: bool = Field(
        False,
        description="Read files that have more than one hard link (another name may be "
        "outside the roots).",
    )

    @field_validator("deny")
    @classmethod
    def _usable_globs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = tuple(g.strip() for g in value)
        if any(not g for g in cleaned):
            raise ValueError("a deny glob must not be empty")
        return cleaned

    @model_validator(mode="after")
    def _some_root(self) -> FilesSettings:
        if not self.roots:
            raise ValueError(
                "files.roots is empty: name at least one folder, e.g. "
                '[[files.roots]] path = "~/noema-workspace" mode = "read-write"'
            )
        return self


class ShellSettings(BaseModel):
    """How `shell_execute` runs commands."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sandbox: Literal["bubblewrap", "none"] = Field(
        "bubblewrap", description="'none' runs commands unsandboxed: an explicit choice."
    )
    network: bool = Field(False, description="Let sandboxed commands use the network.")
    # Numbers are bounded and finite: a NaN or infinite time limit would never end.
    timeout_s: float = Field(
        60, gt=0, le=_DAY_S, allow_inf_nan=False,
        description="Time limit when the model gives none, in seconds.",
    )
    max_timeout_s: float = Field(
        600, gt=0, le=_DAY_S, allow_inf_nan=False,
        description="Longest time limit the model may ask, in seconds.",
    )
    output_cap_bytes: int = Field(
        30_000, ge=1_000, le=100 * _MIB,
        description="Output kept: half from the start, half from the end.",
    )
    bwrap_path: str = Field("bwrap", description="The bubblewrap program.")
    memory_mb: int = Field(
        2048, ge=64, le=1_048_576, description="Memory one command may use, in MiB."
    )
    max_processes: int = Field(
        256, ge=8, le=65_536, description="Processes (and threads) one command may run at once."
    )
    max_open_files: int = Field(
        1024, ge=64, le=1_048_576, description="Files each process of a command may hold open."
    )
    max_file_mb: int = Field(
        4096, ge=1, le=1_048_576, description="Largest file a command may write, in MiB."
    )

    @model_validator(mode="after")
    def _timeouts_agree(self) -> ShellSettings:
        if self.timeout_s > self.max_timeout_s:
            raise ValueError(
                f"shell.timeout_s ({self.timeout_s}) is above shell.max_timeout_s "
                f"({self.max_timeout_s})"
            )
        return self


class AutonomySettings(BaseModel):
    """Which tools run on their own, which ask the person first, which never run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: Level = Field(
        "allow", description="Level of side-effect tools that have no entry in `tools`."
    )
    tools: dict[str, Level] = Field(
        default_factory=dict,
        description="Per-tool levels; any tool may be named, read-only ones included. "
        "shell_execute is 'ask' unless named here.",
    )

    approval_timeout_s: float = Field(
        900.0, ge=1, le=7 * 86400,
        description="How long a question to the person waits before it counts as a no.",
    )

    def level_for(self, name: str, side_effects: bool) -> Level:
        """The level that applies to a tool; read-only tools default to `allow`."""
        if name in self.tools:
            return self.tools[name]
        if name in TOOL_DEFAULTS:
            return TOOL_DEFAULTS[name]
        return self.default if side_effects else "allow"


class HandsSettings(BaseModel):
    """The three sections together, as `[files]`, `[shell]` and `[autonomy]`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    files: FilesSettings = Field(default_factory=FilesSettings)
    shell: ShellSettings = Field(default_factory=ShellSettings)
    autonomy: AutonomySettings = Field(default_factory=AutonomySettings)
