"""The `noema` command."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

import click

from . import config as configuration
from .app import NoModelConfigured, build_app
from .config import Config, ConfigError
from .paths import DEFAULT_AGENT, AgentBusy, AgentPaths
from .providers.base import ProviderError


class Context:
    """What every subcommand needs: which agent, and its configuration."""

    def __init__(self, agent: str, home: Path | None) -> None:
        try:
            self.paths = AgentPaths.for_agent(agent, home)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None

    def config(self) -> Config:
        try:
            return configuration.load_config(self.paths)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None


def _setup_logging(paths: AgentPaths, verbose: bool) -> None:
    paths.ensure()
    handlers: list[logging.Handler] = [logging.FileHandler(paths.logs_dir / "noema.log")]
    if verbose:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    # HTTP client logs can carry headers; keep them quiet unless asked.
    for noisy in ("httpx", "httpcore", "openai", "anthropic"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.WARNING)


@click.group(invoke_without_command=True)
@click.option("--agent", "-a", default=lambda: os.environ.get("NOEMA_AGENT", DEFAULT_AGENT),
              show_default="default", help="Which agent (each has its own data folder).")
@click.option("--home", type=click.Path(path_type=Path), default=None,
              help="Folder holding all agents (default $NOEMA_HOME or ~/.noema).")
@click.option("--verbose", "-v", is_flag=True, help="Log to the terminal too.")
@click.pass_context
def cli(ctx: click.Context, agent: str, home: Path | None, verbose: bool) -> None:
    """Noema: a personal agent with a traceable memory, senses and a safety net.

    With no command: chat if a model is configured, otherwise run the demo.
    """
    ctx.obj = Context(agent, home)
    if ctx.invoked_subcommand is None:
        if ctx.obj.config().has_model:
            ctx.invoke(chat)
        else:
            click.echo("No model is configured yet, so here is the offline demo.\n"
                       "(`noema config --help` shows how to configure a model.)\n")
            ctx.invoke(demo)
        return
    if ctx.invoked_subcommand not in {"config"}:
        _setup_logging(ctx.obj.paths, verbose)


@cli.command()
@click.pass_obj
def chat(obj: Context) -> None:
    """Talk with the agent at the terminal (streaming; Ctrl-C stops a reply)."""
    from .interfaces.chat import TerminalListener, run_chat

    config = obj.config()
    warning = configuration.secrets_file_warning(obj.paths)
    if warning:
        click.echo(f"warning: {warning}", err=True)
    listener = TerminalListener(sys.stdout)
    try:
        app = build_app(obj.paths, config, listener=listener)
    except (NoModelConfigured, ProviderError, AgentBusy) as exc:
        raise click.ClickException(str(exc)) from None
    banner = (
        f"Noema · agent {obj.paths.name} · model {app.provider.name}/{app.provider.model}\n"
        f"data: {obj.paths.root}\n/help lists the commands; Ctrl-C stops a reply."
    )
    asyncio.run(run_chat(app, banner=banner, listener=listener))


@cli.command()
@click.option("--pace", type=float, default=0.01, show_default=True,
              help="Seconds between streamed words.")
@click.option("--keep", is_flag=True, help="Keep the demo's data folder afterwards.")
def demo(pace: float, keep: bool) -> None:
    """Run a scripted conversation through the real stack, offline."""
    from .interfaces.demo import run_demo

    code = run_demo(pace=pace, keep=keep)
    sys.exit(code)


# -- file versions ---------------------------------------------------------------


def _versions(call) -> None:  # type: ignore[no-untyped-def]
    from .interfaces.versions_cli import VersionsCommandError

    try:
        click.echo(call())
    except VersionsCommandError as exc:
        raise click.ClickException(str(exc)) from None


@cli.command()
@click.argument("path", required=False)
@click.option("--limit", "-n", default=30, show_default=True, help="How many versions.")
@click.pass_obj
def history(obj: Context, path: str | None, limit: int) -> None:
    """Versions of the workspace, or of one file: who changed what, and when."""
    from .interfaces import versions_cli

    _versions(lambda: versions_cli.history(obj.config().files, obj.paths, path, limit=limit))


@cli.command()
@click.argument("path", required=False)
@click.argument("version", required=False)
@click.pass_obj
def diff(obj: Context, path: str | None, version: str | None) -> None:
    """With a VERSION: what it changed. Without: changes on disk not yet recorded."""
    from .interfaces import versions_cli

    _versions(lambda: versions_cli.diff(obj.config().files, obj.paths, path, version))


@cli.command()
@click.argument("path")
@click.argument("version")
@click.pass_obj
def restore(obj: Context, path: str, version: str) -> None:
    """Bring PATH back as it was in VERSION (recorded as a new version)."""
    from .interfaces import versions_cli

    _versions(lambda: versions_cli.restore(obj.config().files, obj.paths, path, version))


@cli.command()
@click.pass_obj
def undo(obj: Context) -> None:
    """Revert the agent's last write, unless you edited that file since."""
    from .interfaces import versions_cli

    _versions(lambda: versions_cli.undo(obj.config().files, obj.paths))


# -- config ----------------------------------------------------------------------


@cli.group()
def config() -> None:
    """Show, check or change the agent's configuration."""


@config.command("show")
@click.pass_obj
def config_show(obj: Context) -> None:
    """Print the effective configuration (file + environment; no secrets)."""
    click.echo(f"# {obj.paths.config_file}")
    click.echo(configuration.show(obj.config()), nl=False)


@config.command("check")
@click.pass_obj
def config_check(obj: Context) -> None:
    """Validate the configuration and check that the model's key is present."""
    from .providers.catalog import build_provider

    cfg = obj.config()
    problems: list[str] = []
    secrets = configuration.load_secrets(obj.paths)
    for role, settings in (("reasoning", cfg.models.reasoning), ("chronicler", cfg.models.chronicler)):
        if settings is not None:
            try:  # building a client checks the key and script without any request
                build_provider(settings, secrets)
            except ProviderError as exc:
                problems.append(f"models.{role}: {exc}")
    warning = configuration.secrets_file_warning(obj.paths)
    if warning:
        problems.append(warning)
    if not cfg.has_model:
        click.echo("configuration is valid; no model is configured yet (the demo runs offline).")
    if problems:
        for problem in problems:
            click.echo(f"problem: {problem}", err=True)
        sys.exit(1)
    if cfg.has_model:
        click.echo("configuration is valid.")


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.pass_obj
def config_set(obj: Context, key: str, value: str) -> None:
    """Set KEY (dotted, e.g. models.reasoning.model) to VALUE in config.toml."""
    try:
        configuration.set_value(obj.paths, key, value)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{key} = {value}  (in {obj.paths.config_file})")


@config.command("path")
@click.pass_obj
def config_path(obj: Context) -> None:
    """Print where the configuration, secrets and data live."""
    click.echo(f"config:  {obj.paths.config_file}\nsecrets: {obj.paths.secrets_file}\n"
               f"data:    {obj.paths.root}\nhome:    {obj.paths.root.parent.parent}")


def main() -> None:
    cli(prog_name="noema")


if __name__ == "__main__":
    main()
