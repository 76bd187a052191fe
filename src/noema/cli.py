"""The `noema` command."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from . import config as configuration
from . import logs
from .app import NoModelConfigured, build_app
from .config import ConfigError
from .health import DamagedDatabase, UnusableDatabase, opening
from .health.agent_files import lost_history, repositories
from .interfaces.commands.context import DOCTOR, Context, refusal
from .interfaces.commands.setup import CHOICES as SETUP_PROVIDERS
from .paths import DEFAULT_AGENT, AgentBusy, AgentPaths, MisplacedPath
from .privacy import go_private
from .providers.base import ProviderError

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from .memory.session import Session
    from .memory.store import TurnStore


def _setup_logging(paths: AgentPaths, verbose: bool) -> None:
    from .health.modes import tighten_on_start

    paths.ensure()
    logs.setup(paths.logs_dir / "noema.log", verbose=verbose)
    tightened = tighten_on_start(paths)
    if tightened is not None:
        logging.getLogger(__name__).info("modes: %s", tightened.line)  # the note is the terminal's
        if tightened.tell:
            click.echo(f"note: {tightened.line}", err=True)


RUNS_THE_AGENT = {"chat", "run", "ui"}  # `ui` runs the agent when no `noema run` does


def _damaged_repository(paths: AgentPaths) -> Exception | None:
    """The first versions repository whose newest version does not read."""
    from .health.repositories import DamagedRepository, quick_problem

    for gitdir in repositories(paths):
        problem = quick_problem(gitdir)
        if problem:
            return DamagedRepository(gitdir, problem)
    return None


def _warn_without_bubblewrap(obj: Context) -> None:
    """One line at the start of an agent whose commands need a bubblewrap that
    is not installed (a copy installed with pipx has no `./run` to fetch it)."""
    import shutil

    try:
        shell = configuration.load_config(obj.paths).shell
    except ConfigError:
        return  # the command itself reports the configuration
    if shell.sandbox == "bubblewrap" and shutil.which(shell.bwrap_path) is None:
        click.echo(f"warning: bubblewrap ({shell.bwrap_path!r}) is not installed, so the agent "
                   "cannot run commands or sandboxed MCP servers. Install it (Debian/Ubuntu: "
                   "sudo apt-get install bubblewrap) or, to run commands without a sandbox, "
                   'set [shell] sandbox = "none" in config.toml.', err=True)


@click.group(invoke_without_command=True)
@click.option("--agent", "-a", default=lambda: os.environ.get("NOEMA_AGENT", DEFAULT_AGENT),
              show_default="default", help="Which agent (each has its own data folder).")
@click.option("--home", type=click.Path(path_type=Path), default=None,
              help="Folder holding all agents (default $NOEMA_HOME or ~/.noema).")
@click.option("--verbose", "-v", is_flag=True, help="Log to the terminal too.")
@click.version_option(package_name="noema", prog_name="noema", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, agent: str, home: Path | None, verbose: bool) -> None:
    """Noema: a personal agent with a traceable memory, senses and a safety net.

    With no command: chat if a model is configured, otherwise run the demo.
    """
    ctx.obj = Context(agent, home)
    if ctx.invoked_subcommand is None:
        if ctx.obj.config().has_model:
            _setup_logging(ctx.obj.paths, verbose)
            _warn_without_bubblewrap(ctx.obj)
            ctx.invoke(chat)
        else:
            click.echo("No model is configured yet, so here is the offline demo.\n"
                       "(`noema setup` chooses a model: it lists what your server serves "
                       "and tries it.)\n")
            ctx.invoke(demo)
        return
    if ctx.invoked_subcommand in RUNS_THE_AGENT:
        _setup_logging(ctx.obj.paths, verbose)
    else:  # inspection commands leave no trace in the agent's folder
        logs.setup(None, verbose=verbose)
    if ctx.invoked_subcommand in ("chat", "run"):
        _warn_without_bubblewrap(ctx.obj)


@cli.command()
@click.pass_obj
def chat(obj: Context) -> None:
    """Talk with the agent at the terminal: attach to the one `noema run` keeps
    running, or run it here (streaming; Ctrl-C stops a reply)."""
    from .interfaces.host.attach import AttachRefused
    from .interfaces.terminal.chat import open_chat

    config = obj.config()
    warning = configuration.secrets_file_warning(obj.paths)
    if warning:
        click.echo(f"warning: {warning}", err=True)

    def build(listener):
        app = build_app(obj.paths, config, listener=listener)
        damaged = _damaged_repository(obj.paths)
        if damaged:  # the conversation can go on; file versions cannot be trusted
            click.echo(f"warning: {damaged}. {DOCTOR}", err=True)
        return app

    def banner(app, pid: int | None) -> str:
        if app is not None:
            where = (f"model {app.provider.name}/{app.provider.model} · running the agent "
                     "here (leaving stops it)")
        else:
            running = f" as pid {pid}" if pid is not None else ""
            where = f"attached to the agent running{running} (leaving leaves it running)"
        return (f"Noema · agent {obj.paths.name} · {where}\n"
                f"data: {obj.paths.root}\n/help lists the commands; Ctrl-C stops a reply.")

    try:
        asyncio.run(open_chat(obj.paths, build=build, banner=banner))
    except (NoModelConfigured, ProviderError, AgentBusy, MisplacedPath, ConfigError,
            AttachRefused) as exc:
        raise click.ClickException(configuration.mask_secrets(str(exc))) from None
    except UnusableDatabase as exc:
        raise refusal(exc) from None


@cli.command()
@click.option("--pace", type=float, default=0.01, show_default=True,
              help="Seconds between streamed words.")
@click.option("--keep", is_flag=True, help="Keep the demo's data folder afterwards.")
def demo(pace: float, keep: bool) -> None:
    """Run a scripted conversation through the real stack, offline."""
    from .demo.tour import run_demo

    code = run_demo(pace=pace, keep=keep)
    sys.exit(code)


# -- file versions ---------------------------------------------------------------


def _versions(obj: Context, call: Callable[[], str]) -> None:
    import pygit2

    from .health.repositories import DamagedRepository
    from .interfaces.commands.versions import VersionsCommandError

    damaged = _damaged_repository(obj.paths)
    if damaged:  # read as it is, it would look like an empty history
        raise refusal(damaged)
    try:
        click.echo(call())
    except VersionsCommandError as exc:
        raise click.ClickException(str(exc)) from None
    except pygit2.GitError as exc:  # damage deeper than the newest version
        raise refusal(DamagedRepository(obj.paths.versions_dir, str(exc))) from None


@cli.command()
@click.argument("path", required=False)
@click.option("--limit", "-n", default=30, show_default=True, help="How many versions.")
@click.pass_obj
def history(obj: Context, path: str | None, limit: int) -> None:
    """Versions of the workspace, or of one file: who changed what, and when."""
    from .interfaces.commands import versions as versions_cli

    _versions(obj, lambda: versions_cli.history(obj.config().files, obj.paths, path,
                                                limit=limit))


@cli.command()
@click.argument("path", required=False)
@click.argument("version", required=False)
@click.pass_obj
def diff(obj: Context, path: str | None, version: str | None) -> None:
    """With a VERSION: what it changed. Without: changes on disk not yet recorded."""
    from .interfaces.commands import versions as versions_cli

    _versions(obj, lambda: versions_cli.diff(obj.config().files, obj.paths, path, version))


@cli.command()
@click.argument("path")
@click.argument("version")
@click.pass_obj
def restore(obj: Context, path: str, version: str) -> None:
    """Bring PATH back as it was in VERSION (recorded as a new version)."""
    from .interfaces.commands import versions as versions_cli

    _versions(obj, lambda: versions_cli.restore(obj.config().files, obj.paths, path, version))


@cli.command()
@click.pass_obj
def undo(obj: Context) -> None:
    """Revert the agent's last write, unless you edited that file since."""
    from .interfaces.commands import versions as versions_cli

    _versions(obj, lambda: versions_cli.undo(obj.config().files, obj.paths))


# -- memory ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _MemoryView:
    """The turn store and session, opened read-mostly for a memory command."""

    store: TurnStore
    session: Session
    zone: ZoneInfo | None


@contextmanager
def _memory_view(obj: Context) -> Iterator[_MemoryView]:
    """The agent's memory for one command; a damaged store is refused with the
    way out, whether the check on open or a later read finds the damage."""
    from zoneinfo import ZoneInfo

    from .memory.session import Session
    from .memory.store import TurnStore

    paths = obj.paths
    config = obj.config()
    lost = lost_history(paths)
    if lost:
        raise refusal(DamagedDatabase(paths.turns_db, lost))
    if not paths.turns_db.exists():
        raise click.ClickException(f"agent {paths.name!r} has no conversation yet")
    zone = ZoneInfo(config.agent.timezone) if config.agent.timezone else None
    try:
        with opening(paths.turns_db):
            store = TurnStore(paths.turns_db)
            try:
                yield _MemoryView(store, Session.load(store), zone)
            finally:
                store.close()
    except UnusableDatabase as exc:
        raise refusal(exc) from None


@cli.group(invoke_without_command=True)
@click.pass_context
def memory(ctx: click.Context) -> None:
    """The save points of the chronicle (with no subcommand: list them)."""
    if ctx.invoked_subcommand is None:
        from .interfaces.commands.memory import list_save_points

        with _memory_view(ctx.obj) as view:
            click.echo(list_save_points(view.store, view.session, zone=view.zone))


@memory.command("show")
@click.argument("save_point_id", type=int)
@click.pass_obj
def memory_show(obj: Context, save_point_id: int) -> None:
    """One save point, with every citation resolved to its turn."""
    from .interfaces.commands.memory import show_save_point

    with _memory_view(obj) as view:
        click.echo(show_save_point(view.store, save_point_id, zone=view.zone))


MEANING_START_S = 15.0  # a local embedding model loads in a second or two; a slow disk, longer


@memory.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option("--limit", "-n", default=10, show_default=True)
@click.option("--role", "roles", multiple=True,
              type=click.Choice(["user", "assistant", "tool", "event", "note"]),
              help="Only turns of this kind (repeatable).")
@click.pass_obj
def memory_search(obj: Context, query: tuple[str, ...], limit: int, roles: tuple[str, ...]) -> None:
    """Search every turn ever stored (ranked, with snippets)."""
    from .interfaces.commands.memory import person_search, search_memory

    with _memory_view(obj) as view:
        search = person_search(view.store, obj.config(), obj.paths, view.zone)
        try:
            if not search.wait_for_meaning(0.5):
                click.echo("Starting the model that ranks by meaning…", err=True)
                search.wait_for_meaning(MEANING_START_S)
            click.echo(search_memory(search, " ".join(query), limit=limit,
                                     roles=list(roles) or None, zone=view.zone))
        finally:
            search.close()


@memory.command("export")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_obj
def memory_export(obj: Context, out: Path) -> None:
    """Write the conversation as JSON lines (the format `noema lab compact` reads)."""
    from .interfaces.commands.memory import export_turns

    with _memory_view(obj) as view, out.open("w", encoding="utf-8") as sink:
        count = export_turns(view.store, sink, agent=obj.paths.name, session=view.session)
    click.echo(f"{count} turns written to {out}")



@cli.group(invoke_without_command=True)
@click.pass_context
def schedule(ctx: click.Context) -> None:
    """The agent's alarms and recurring schedules (with no subcommand: list them)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(schedule_list)


@schedule.command("list")
@click.option("--all", "include_ended", is_flag=True,
              help="Fired and cancelled ones too (the latest 50, newest first).")
@click.pass_obj
def schedule_list(obj: Context, include_ended: bool = False) -> None:
    """The schedules that may still fire, with their IDs and when each fires next."""
    import time

    from .interfaces.commands.schedule import list_schedules

    try:
        click.echo(list_schedules(obj.paths, now=time.time(), include_ended=include_ended))
    except UnusableDatabase as exc:
        raise refusal(exc) from None


@schedule.command("cancel")
@click.argument("schedule_id", type=int)
@click.pass_obj
def schedule_cancel(obj: Context, schedule_id: int) -> None:
    """Cancel a schedule by its ID; a running agent will not fire it."""
    import time

    from .interfaces.commands.schedule import ScheduleCommandError, cancel_schedule

    try:
        click.echo(cancel_schedule(obj.paths, schedule_id, now=time.time()))
    except ScheduleCommandError as exc:
        raise click.ClickException(str(exc)) from None
    except UnusableDatabase as exc:
        raise refusal(exc) from None

@cli.group()
def lab() -> None:
    """Offline experiments on exported conversations."""


@lab.command("compact")
@click.argument("export", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--provider", help="Provider to try (default: the configured chronicler).")
@click.option("--model", help="Model to try, with --provider.")
@click.option("--base-url", help="Endpoint, with --provider.")
@click.option("--script", type=click.Path(exists=True, path_type=Path),
              help="A model script, with --provider scripted.")
@click.option("--blocks", default=3, show_default=True, help="Save points to write at most.")
@click.option("--block-turns", type=int, help="Turns per block (default: as the agent would).")
@click.option("--quiet", is_flag=True, help="Only the validator's reports, not the texts.")
@click.pass_obj
def lab_compact(obj: Context, export: Path, provider: str | None, model: str | None,
                base_url: str | None, script: Path | None, blocks: int,
                block_turns: int | None, quiet: bool) -> None:
    """Run a chronicler over an exported conversation and print the validator's report."""
    from .interfaces.commands.memory import lab_compact as run_lab, read_export
    from .providers.catalog import build_provider
    from .providers.settings import ModelSettings

    config = obj.config()
    if provider:
        try:
            settings = ModelSettings(provider=provider, model=model or "default",
                                     base_url=base_url, script=script)
        except ValueError as exc:
            raise click.ClickException(configuration.mask_secrets(str(exc))) from None
    elif config.chronicler is not None:
        settings = config.chronicler
    else:
        raise click.ClickException("no chronicler is configured; pass --provider and --model")
    try:
        chronicler = build_provider(settings, configuration.load_secrets(obj.paths))
        text = asyncio.run(run_lab(read_export(export), chronicler, config.memory,
                                   language=config.memory.language_or(config.agent.language),
                                   agent_name=obj.paths.name, max_save_points=blocks,
                                   block_turns=block_turns, show_text=not quiet))
    except (ProviderError, ValueError) as exc:
        raise click.ClickException(configuration.mask_secrets(str(exc))) from None
    click.echo(text)


# -- health ----------------------------------------------------------------------


@cli.command()
@click.option("--repair", "fix", is_flag=True,
              help="Keep what can be kept of damaged files; each is moved aside, never deleted.")
@click.pass_obj
def doctor(obj: Context, fix: bool) -> None:
    """Check the agent's databases and repositories (--repair keeps what it can).

    One line per item: the turn store, the sensory archive and each versions
    repository, read whole. Exits 0 when all are healthy.
    """
    from .interfaces.commands import doctor as checkup

    findings = checkup.examine(obj.paths)
    click.echo(checkup.report(findings, obj.paths))
    if fix and not all(f.healthy for f in findings):
        try:
            click.echo(checkup.repair(findings, obj.paths))
        except AgentBusy as exc:
            raise click.ClickException(f"{exc} (a repair needs the agent stopped)") from None
        findings = checkup.examine(obj.paths)
        click.echo("after the repair:\n" + checkup.report(findings, obj.paths))
    sys.exit(0 if all(f.healthy for f in findings) else 1)


# -- docs ------------------------------------------------------------------------


@cli.group()
def docs() -> None:
    """The document library: the folders of [docs], indexed by their structure."""


@docs.command("index")
@click.pass_obj
def docs_index(obj: Context) -> None:
    """Index new and changed documents and forget removed ones (progress, then a summary)."""
    from .interfaces.commands.docs import index_command

    config = obj.config()
    report, text = index_command(config.docs, config.files, obj.paths)
    click.echo(text)
    if not report.complete:  # a folder left out is not a library brought in line
        sys.exit(1)


# -- setup -----------------------------------------------------------------------


@cli.command()
@click.option("--provider", type=click.Choice(SETUP_PROVIDERS),
              help="Set up without questions, with this provider.")
@click.option("--model", help="The model, as the server names it (with --provider; "
                              "optional when the server serves only one).")
@click.option("--base-url", help="The server's address (default: the provider's).")
@click.option("--context-window", type=click.IntRange(min=1),
              help="Tokens the server serves (default: what the server says).")
@click.option("--api-key-env", help="The variable holding the key (default: the provider's).")
@click.option("--no-test", is_flag=True, help="Write without the live test request.")
@click.pass_obj
def setup(obj: Context, provider: str | None, model: str | None, base_url: str | None,
          context_window: int | None, api_key_env: str | None, no_test: bool) -> None:
    """Choose the model: provider, address, key, model and window, tried live.

    With no options it asks, offering the models the server serves and the
    window it reports. With --provider it asks nothing. Nothing is written
    until the end; a key goes to secrets.toml (mode 600), never to config.toml.
    """
    from .interfaces.commands import setup as setup_cli

    try:  # the section being replaced may be unfinished; the rest must be right
        configuration.check_besides_model(obj.paths, "reasoning")
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        if provider is None:
            if any(v is not None for v in (model, base_url, context_window, api_key_env)):
                raise click.UsageError("--model, --base-url, --context-window and --api-key-env "
                                       "go with --provider")
            if not sys.stdin.isatty():
                raise click.UsageError("noema setup asks questions at a terminal; to set up "
                                       "without them, pass --provider and --model")
            written = setup_cli.run_questions(obj.paths, say=click.echo, ask=click.prompt,
                                              confirm=click.confirm)
            sys.exit(0 if written else 1)
        answers = setup_cli.Answers(provider, model or "", base_url, context_window, api_key_env)
        setup_cli.run_options(obj.paths, answers, test=not no_test, say=click.echo)
    except setup_cli.SetupFailed as exc:
        raise click.ClickException(str(exc)) from None


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

    from .app import offered_tool_names, window_problems

    cfg = obj.config()
    problems: list[str] = []
    secrets = configuration.load_secrets(obj.paths)
    for role, settings in (("reasoning", cfg.models.reasoning), ("chronicler", cfg.models.chronicler)):
        if settings is not None:
            try:  # building a client checks the key and script without any request
                build_provider(settings, secrets)
            except ProviderError as exc:
                problems.append(f"models.{role}: {exc}")
    problems += configuration.unknown_tools(cfg.autonomy.tools, offered_tool_names(cfg, obj.paths))
    problems += window_problems(cfg, obj.paths)  # a window no request fits fails every message
    warning = configuration.secrets_file_warning(obj.paths)
    if warning:
        problems.append(warning)
    for waiting in cfg.perception.path_warnings():
        click.echo(f"warning: {waiting}", err=True)
    if problems:
        for problem in problems:
            click.echo(f"problem: {configuration.mask_secrets(problem)}", err=True)
        sys.exit(1)
    from .toolservers.launch import Surroundings
    from .toolservers.servers import describe_servers
    from .web.tools import web_status

    for line in web_status(cfg.web, secrets).splitlines():
        click.echo(line)
    around = Surroundings.of_agent(cfg.files, cfg.shell, obj.paths, secrets)
    for line in asyncio.run(describe_servers(cfg.mcp, around, cfg.autonomy)):
        click.echo(line)
    if cfg.has_model:
        click.echo("configuration is valid.")
    else:
        click.echo("configuration is valid; no model is configured yet (the demo runs offline).")


@config.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("assignments", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_obj
def config_set(obj: Context, assignments: tuple[str, ...]) -> None:
    """Set KEY VALUE, or several KEY=VALUE at once, in config.toml.

    Keys are dotted (models.reasoning.model). Values are TOML (numbers such as
    -5, true, ["a", "b"]) or plain text. The whole file is validated before it
    is written; a section you are building may lack required keys for now:
    each is a note, and `noema config check` reports it until it is set.
    """
    try:
        pairs = configuration.parse_assignments(assignments)
    except configuration.AssignmentError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        edit = configuration.set_values(obj.paths, pairs)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    for key, value in pairs:
        click.echo(f"{key} = {configuration.mask_secrets(value)}  (in {obj.paths.config_file})")
    for note in edit.notes:
        click.echo(f"note: {note}")


@config.command("path")
@click.pass_obj
def config_path(obj: Context) -> None:
    """Print where the configuration, secrets and data live."""
    click.echo(f"config:  {obj.paths.config_file}\nsecrets: {obj.paths.secrets_file}\n"
               f"data:    {obj.paths.root}\nhome:    {obj.paths.root.parent.parent}")


# -- the agent as a service ---------------------------------------------------------

from .interfaces.commands.service import run, service, status  # noqa: E402

cli.add_command(run)
cli.add_command(status)
cli.add_command(service)


# -- web page ----------------------------------------------------------------------


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; one other machines can reach needs --allow-remote.")
@click.option("--port", default=8731, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: any free one).")
@click.option("--allow-remote", is_flag=True,
              help="Allow an address other machines can reach (the token is then the only lock).")
@click.pass_obj
def ui(obj: Context, host: str, port: int, allow_remote: bool) -> None:
    """The web page: chat, memory and the agent's state in a browser.

    Attaches to the agent `noema run` runs; when none runs, runs it here.
    Prints the address to open (it carries the access token).
    """
    from .interfaces.web import PublicAddress, UiServer
    from .interfaces.web.auth import TOKEN_FILE

    config = obj.config()

    async def serve() -> None:
        server = UiServer(obj.paths, config, host=host, port=port, allow_remote=allow_remote)
        address = await server.start()
        how = {"attached": "attached to the running agent", "in-process": "the agent runs here",
               "first-run": "no model configured yet: the page says what to set"}[server.mode]
        click.echo(f"Noema · agent {obj.paths.name} · {how}\nOpen {address}\n"
                   f"(the token is also in {obj.paths.root / TOKEN_FILE}); Ctrl-C stops.")
        try:
            await server.wait()
        finally:
            await server.stop()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    except (PublicAddress, NoModelConfigured, ProviderError, AgentBusy, MisplacedPath,
            ConfigError) as exc:
        raise click.ClickException(configuration.mask_secrets(str(exc))) from None
    except UnusableDatabase as exc:
        raise refusal(exc) from None
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}"
                                   " (pass another --port)") from None


def main() -> None:
    go_private()  # before anything is written: the agent's data is the person's alone
    cli(prog_name="noema")


if __name__ == "__main__":
    main()
