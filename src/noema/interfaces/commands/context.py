"""What every `noema` subcommand is given, and how they all refuse on a damaged file.

`noema.cli` builds the `Context` and the subcommands defined elsewhere receive it;
both import it from here, so neither imports the other."""

from __future__ import annotations

from pathlib import Path

import click

from ... import config as configuration
from ...config import Config, ConfigError
from ...health import DiskFull
from ...paths import AgentPaths

DOCTOR = ("`noema doctor` checks every file of the agent; `noema doctor --repair` keeps what "
          "can be kept and moves the damaged file aside (nothing is deleted).")


class Context:
    """What every subcommand needs: which agent, and its configuration."""

    def __init__(self, agent: str, home: Path | None) -> None:
        try:
            self.paths = AgentPaths.for_agent(agent, home)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        blocked = self.paths.blocked_by()
        if blocked is not None:
            raise click.UsageError(
                f"{blocked} is a file, but the agent's data must go in the folder "
                f"{self.paths.root}. Pass a folder with --home (or NOEMA_HOME).")
        misplaced = self.paths.misplaced()
        if misplaced is not None:
            raise click.ClickException(str(misplaced))

    def config(self) -> Config:
        """The configuration; a bad config.toml or secrets.toml stops every command
        with the same message `noema config check` gives."""
        try:
            config = configuration.load_config(self.paths)
            configuration.read_secrets_file(self.paths.secrets_file)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
        return config


def refusal(exc: Exception) -> click.ClickException:
    """A damaged file or a full disk, told to the person with the way out."""
    if isinstance(exc, DiskFull):
        return click.ClickException(f"{exc}: free some space and start again; nothing was changed.")
    return click.ClickException(f"{exc}\nNothing was changed. {DOCTOR}")
