"""The commands of the agent as a service: `noema run`, `noema status`,
`noema service install|uninstall`.

`noema.cli` adds them to its group; they receive its `Context` object, which
both take from `commands.context`, so neither module imports the other.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from pathlib import Path

import click

from ..host.attach import AgentNotRunning, AttachRefused, attach, lock_holder
from ..host.protocol import AskStatus, Goodbye, Status, StatusView
from ..host.service_unit import CONFIG_EXIT
from .context import Context, refusal

NOT_RUNNING_EXIT = 3  # `noema status`: no agent to ask (as LSB init scripts say "not running")
STATUS_TIMEOUT = 10.0


class ConfigurationProblem(click.ClickException):
    """`noema run` cannot work with this configuration: a restart would not help."""

    exit_code = CONFIG_EXIT


@click.command()
@click.pass_obj
def run(obj: Context) -> None:
    """Run the agent as a service: its senses and channels work, and `noema chat`,
    `noema status` and the web page attach to it. Stops cleanly on SIGTERM or Ctrl-C."""
    from ... import config as configuration
    from ...app import NoModelConfigured
    from ...config import ConfigError
    from ...health import UnusableDatabase
    from ...paths import AgentBusy, MisplacedPath
    from ...providers.base import ProviderError
    from ..host.host import CannotServe
    from .run import run_agent

    config = obj.config()
    warning = configuration.secrets_file_warning(obj.paths)
    if warning:
        click.echo(f"warning: {warning}", err=True)
    try:
        asyncio.run(run_agent(obj.paths, config,
                              announce=lambda line: click.echo(line, err=True)))
    except (NoModelConfigured, ProviderError, ConfigError) as exc:
        raise ConfigurationProblem(configuration.mask_secrets(str(exc))) from None
    except (AgentBusy, MisplacedPath) as exc:
        raise click.ClickException(str(exc)) from None
    except CannotServe as exc:
        raise click.ClickException(f"interfaces could not attach: {exc}") from None
    except UnusableDatabase as exc:
        raise refusal(exc) from None
    # Everything is closed. The interpreter's last collections would walk every
    # object the imports made, a second or more of a service manager's wait;
    # frozen, they are skipped (finalizers still run).
    gc.freeze()


@click.command()
@click.pass_obj
def status(obj: Context) -> None:
    """What the running agent does: its state, what waits, its senses and channels.
    Exits 3 when no agent runs."""
    from ..terminal.status_text import format_status

    try:
        view = asyncio.run(_ask_status(obj))
    except AttachRefused as exc:
        raise click.ClickException(str(exc)) from None
    except AgentNotRunning:
        name = obj.paths.name
        holder = lock_holder(obj.paths)
        if holder is not None:
            click.echo(f"agent {name} is run by process {holder} (a terminal chat, say), which "
                       "does not accept attachments; its own /status shows what it does.")
        else:
            option = "" if name == "default" else f" --agent {name}"
            click.echo(f"agent {name} is not running. Start it with `noema{option} run` "
                       f"(or as a service: `noema{option} service install`).")
        sys.exit(NOT_RUNNING_EXIT)
    click.echo(format_status(view, now=time.time(), asker=True))


async def _ask_status(obj: Context) -> StatusView:
    attached = await attach(obj.paths, client="status")
    try:
        await attached.connection.send(AskStatus(request=1))

        async def answer() -> StatusView:
            async for message in attached.messages:
                if isinstance(message, Status) and message.request == 1:
                    return message.status
                if isinstance(message, Goodbye):
                    break
            raise AgentNotRunning("the agent stopped before it answered")

        return await asyncio.wait_for(answer(), STATUS_TIMEOUT)
    except TimeoutError:
        raise AgentNotRunning("the agent did not answer") from None
    finally:
        await attached.connection.aclose()


@click.group()
def service() -> None:
    """Run the agent as a systemd user service (started with your session)."""


def _agent(obj: Context, agent: str | None) -> str:
    if agent is None:
        return obj.paths.name
    from ...paths import AgentPaths

    try:
        return AgentPaths.for_agent(agent).name
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _home(obj: Context) -> Path | None:
    """The Noema home to write into the unit, when it is not the default `~/.noema`."""
    home = obj.paths.root.parent.parent.expanduser().resolve()
    return None if home == (Path.home() / ".noema").resolve() else home


@service.command("install")
@click.option("--agent", "agent", default=None, help="Which agent (default: the one of --agent "
                                                     "before the command).")
@click.pass_obj
def service_install(obj: Context, agent: str | None) -> None:
    """Write the agent's unit and enable it now (`systemctl --user enable --now`)."""
    from ..host.service_unit import install

    outcome = install(_agent(obj, agent), home=_home(obj))
    click.echo("\n".join(outcome.lines))
    if not outcome.ok:
        sys.exit(1)


@service.command("uninstall")
@click.option("--agent", "agent", default=None, help="Which agent (default: the one of --agent "
                                                     "before the command).")
@click.pass_obj
def service_uninstall(obj: Context, agent: str | None) -> None:
    """Stop and disable the agent's service and remove its unit."""
    from ..host.service_unit import uninstall

    outcome = uninstall(_agent(obj, agent))
    click.echo("\n".join(outcome.lines))
    if not outcome.ok:
        sys.exit(1)
